// A private namespace on the shared Redis for one test file: a random key prefix, and
// everything under it deleted at the end (even when a test failed halfway).
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { Redis } from 'ioredis'
import { createRedisClient, pingRedis } from '../../src/store/redis-client.ts'
import { keysUnder, REDIS_URL } from '../helpers/redis.ts'

export { REDIS_URL } from '../helpers/redis.ts'

export interface RedisNamespace {
  readonly prefix: string
  readonly redis: Redis
  /** False when Redis does not answer: the caller fails its tests (never skips). */
  readonly up: boolean
  /** Keys under the prefix now. */
  keys(): Promise<string[]>
}

export async function redisNamespace(t: Test): Promise<RedisNamespace> {
  const prefix = `tgtest:${randomBytes(6).toString('hex')}:`
  const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-keys-admin' })
  const keys = (): Promise<string[]> => keysUnder(redis, prefix)
  t.teardown(async () => {
    try {
      if (redis.status === 'ready') {
        const all = await keys()
        for (let i = 0; i < all.length; i += 500) await redis.del(...all.slice(i, i + 500))
      }
    } finally {
      redis.disconnect()
    }
  })
  return { prefix, redis, up: await pingRedis(redis), keys }
}

export function redisMissing(url = REDIS_URL): string {
  return `Redis does not answer at ${url}: these tests need it (set REDIS_URL or start redis-server); they fail rather than skip`
}

// Redis for tests: the shared server every test uses under its own random prefix.
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Test } from 'tap'
import { createRedisClient } from '../../src/store/redis-client.ts'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Every key under prefix, by SCAN (bounded: a full iteration always ends). */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found = new Set<string>()
  let cursor = '0'
  for (let round = 0; round < 100_000; round++) {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    for (const key of batch) found.add(key)
    cursor = next
    if (cursor === '0') return [...found].sort()
  }
  throw new Error('SCAN did not finish')
}

export async function deleteUnder(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(redis, prefix)
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500))
}

export interface TestNamespace {
  /** `tgtest:<label>:<random>:`, under which the whole file writes. */
  readonly namespace: string
  /** A client for reading and cleaning up around the stores under test. */
  readonly admin: Redis
  /** A fresh prefix under the namespace (one store's), and the cleanup of its keys. */
  fresh(): { readonly prefix: string; cleanup(): Promise<void> }
}

/** A test file's namespace on the shared Redis, deleted (and its client closed) at the end. */
export function testNamespace(t: Test, label: string, clientName: string): TestNamespace {
  const namespace = `tgtest:${label}:${randomBytes(6).toString('hex')}:`
  const admin = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: clientName })
  t.teardown(async () => {
    await deleteUnder(admin, namespace)
    admin.disconnect()
  })
  let n = 0
  return {
    namespace,
    admin,
    fresh() {
      const prefix = `${namespace}${n++}:`
      return { prefix, cleanup: () => deleteUnder(admin, prefix) }
    },
  }
}

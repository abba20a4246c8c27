// Redis for tests: the shared server every test uses under its own random prefix.
import type { Redis } from 'ioredis'

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

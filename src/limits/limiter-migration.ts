// Issue #25 moved the limiter's counters from `{tg}` to their owner's slot (store/redis-kit.ts).
// The windowed ones need nothing: a window lasts a minute, and a new one simply opens in
// the new place. The lifetime ones would be lost, though: a key's quota used so far, a
// budget's spend in its period and the thresholds it has reported. This carries them over,
// once, when a gateway starts: each old key is taken by one instance (GETDEL) and added to
// its new place, so several instances starting at once move each value once; a second
// run finds nothing left to move.
import type { Logger } from '../observability/logger.ts'
import { isCluster, type RedisConnection } from '../store/redis-client.ts'
import { DIMENSION_CODE } from './counters.ts'
import { limiterKeys } from './redis-counters.ts'

/** Who owns a key (null: none, or no such key): its counters move to the owner's slot. */
export type OwnerOf = (keyId: string) => Promise<string | null>

const QUOTA = DIMENSION_CODE.quota

/** A SCAN pattern matching `literal` and anything after it. */
function startingWith(literal: string): string {
  return `${literal.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`
}

/** The new name of an old counter, or null when it is windowed (nothing to move). */
async function newName(keys: ReturnType<typeof limiterKeys>, rest: string, ownerOf: OwnerOf): Promise<string | null> {
  const parts = rest.split(':')
  if (parts[0] === 'bg') {
    // bg:<scope>:<id>:<period>:<start>:s | :f:<revision> | :h (held: windowed)
    const [, scope, id, , , kind] = parts
    if (id === undefined || (kind !== 's' && kind !== 'f')) return null
    const name = decodeURIComponent(id)
    const home =
      scope === 'tenant'
        ? { tenant: name }
        : scope === 'owner'
          ? { keyId: '', owner: name }
          : { keyId: name, owner: (await ownerOf(name)) ?? undefined }
    return `${keys.budgetSlot({ home })}rl:${rest}`
  }
  // <keyId>:<model>:<dimension>: only the quota is kept for ever (its held counter is windowed).
  const [keyId, model, code] = parts
  if (keyId === undefined || model === undefined || code !== QUOTA) return null
  const id = decodeURIComponent(keyId)
  const owner = (await ownerOf(id)) ?? undefined
  return `${keys.slot({ keyId: id, model: decodeURIComponent(model), owner })}rl:${rest}`
}

/** Moves one counter: a number is added to its new place, a fired set merged; the TTL kept. */
async function move(redis: RedisConnection, from: string, to: string): Promise<boolean> {
  const ttl = await redis.pttl(from)
  const type = await redis.type(from)
  if (type === 'string') {
    const value = await redis.getdel(from)
    if (value === null) return false
    await redis.incrby(to, value)
  } else if (type === 'hash') {
    // Merged before it is deleted (a set of thresholds: merging it twice is harmless); the
    // instance whose DEL takes it counts it.
    const fields = await redis.hgetall(from)
    if (Object.keys(fields).length === 0) return false
    await redis.hset(to, fields)
    if ((await redis.del(from)) === 0) return false
  } else {
    return false
  }
  if (ttl > 0 && (await redis.pttl(to)) === -1) await redis.pexpire(to, ttl)
  return true
}

/** Carries the lifetime counters of the `{tg}` layout over to their owners' slots; answers how many moved. */
export async function migrateLimiterCounters(
  redis: RedisConnection,
  prefix: string,
  ownerOf: OwnerOf,
  log: Logger,
): Promise<number> {
  const keys = limiterKeys(prefix)
  const nodes = isCluster(redis) ? redis.nodes('master') : [redis]
  let moved = 0
  for (const node of nodes) {
    let cursor = '0'
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', startingWith(keys.base), 'COUNT', 1000)
      cursor = next
      for (const from of batch) {
        const to = await newName(keys, from.slice(keys.base.length), ownerOf)
        if (to !== null && (await move(redis, from, to))) moved++
      }
    } while (cursor !== '0')
  }
  if (moved > 0) log.info({ moved }, "rate limiter: carried lifetime counters over to their owners' slots")
  return moved
}

// The semantic index on Redis, for Redis versions without vector search (7.0 here): the
// vectors are kept in Redis and searched in the gateway (semantic-index.ts nearest). They
// live in their scope's own slot beside its cached replies (`<prefix>{rc:<scope>}:`): one
// hash per partition (`sv:<partition>`, exact key → vector), and for the whole scope an
// index by expiry (`sx`), sizes and labels (`sm`) and a byte count (`sb`). One script adds a
// vector: it drops what has expired, then the scope's vectors that expire first until the
// scope is within both its count and its byte bound, so no lookup ever reads more than
// scopeMaxVectors vectors. Each vector is sealed like a reply (seal.ts: AES-256-GCM under
// the scope's key), with its expiry inside, since an embedding tells a lot about a prompt.
import type { RedisConnection } from '../store/redis-client.ts'
import { cacheScopeNamespace, redisNamespace, runScript, script, withRedis } from '../store/redis-kit.ts'
import { matches } from './memory-store.ts'
import { decodeEntryLabels, encodeEntryLabels } from './port.ts'
import { endianness } from 'node:os'
import type { Sealer } from './seal.ts'
import { vectorBytes, type Candidate, type SemanticBounds, type SemanticIndex } from './semantic-index.ts'

// A member is `<partition> <key>` (both base64url: no space in either).
const DROP = `
local function drop(ns, member)
  local meta = redis.call('HGET', ns .. 'sm', member)
  if meta then
    redis.call('DECRBY', ns .. 'sb', tonumber(string.match(meta, '^(%d+)')))
    redis.call('HDEL', ns .. 'sm', member)
  end
  redis.call('ZREM', ns .. 'sx', member)
  local space = string.find(member, ' ', 1, true)
  redis.call('HDEL', ns .. 'sv:' .. string.sub(member, 1, space - 1), string.sub(member, space + 1))
end
`

// KEYS: sx, sm, sb, sv:<partition>. ARGV: ns, member, key, value, ttl ms, now ms, max count, cap, size, labels.
// Returns {stored 0|1, evicted}.
const ADD = script(`${DROP}
local ns, member = ARGV[1], ARGV[2]
local ttl, now = tonumber(ARGV[5]), tonumber(ARGV[6])
local maxCount, cap, size = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do drop(ns, m) end
drop(ns, member)
if size > cap then return {0, 0} end
local evicted = 0
while redis.call('ZCARD', KEYS[1]) + 1 > maxCount or tonumber(redis.call('GET', KEYS[3]) or '0') + size > cap do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  drop(ns, oldest[1])
  evicted = evicted + 1
end
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[1], now + ttl, member)
redis.call('HSET', KEYS[2], member, size .. ' ' .. ARGV[10])
redis.call('INCRBY', KEYS[3], size)
for i = 1, 4 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, evicted}
`)

// KEYS: sx, sm. ARGV: ns, members to drop... Returns the vectors left.
const PURGE = script(`${DROP}
for i = 2, #ARGV do drop(ARGV[1], ARGV[i]) end
return redis.call('ZCARD', KEYS[1])
`)

/** The sealed plain bytes: the expiry (epoch ms, float64) then the floats, little-endian. */
function encodeVector(vector: Float32Array, expiresAt: number): Buffer {
  const out = Buffer.alloc(8 + vector.length * 4)
  out.writeDoubleLE(expiresAt, 0)
  for (let i = 0; i < vector.length; i++) out.writeFloatLE(vector[i] as number, 8 + i * 4)
  return out
}

interface Opened {
  readonly vector: Float32Array
  readonly expiresAt: number
}

function decodeVector(plain: Buffer): Opened | undefined {
  if (plain.length < 12 || (plain.length - 8) % 4 !== 0) return undefined
  const floats = plain.subarray(8)
  // A copy on its own buffer (aligned); the floats as they are where the machine is little-endian.
  const vector = LITTLE_ENDIAN
    ? new Float32Array(Uint8Array.from(floats).buffer)
    : Float32Array.from({ length: floats.length / 4 }, (_, i) => floats.readFloatLE(i * 4))
  return { vector, expiresAt: plain.readDoubleLE(0) }
}

/**
 * Vectors this instance opened, by scope, partition and key. A lookup asks Redis only which
 * keys a partition holds (HKEYS, ~50 bytes a vector) and fetches and opens only those it has
 * not opened yet, or whose expiry it saw pass: opening costs ~0.1 ms a vector (a decipher
 * each) and a 768-float vector is 3 KB, which over a scope's thousands would be most of a
 * lookup. A key names one body's last turn, embedded by one model: its vector does not
 * change, and one removed (evicted, purged) is no longer in HKEYS. Held to a byte bound,
 * oldest first out.
 */
function openedMemo(maxBytes: number) {
  const kept = new Map<string, Opened>()
  let bytes = 0
  const drop = (id: string, opened: Opened): void => {
    kept.delete(id)
    bytes -= opened.vector.byteLength
  }
  return {
    get(id: string, now: number): Opened | undefined {
      const opened = kept.get(id)
      return opened !== undefined && opened.expiresAt > now ? opened : undefined
    },
    set(id: string, opened: Opened): void {
      const previous = kept.get(id)
      if (previous !== undefined) drop(id, previous)
      kept.set(id, opened)
      bytes += opened.vector.byteLength
      for (const [other, entry] of kept) {
        if (bytes <= maxBytes) break
        drop(other, entry)
      }
    },
  }
}

const LITTLE_ENDIAN = endianness() === 'LE'

const aad = (partition: string, key: string): string => `sv ${partition} ${key}`

export function createRedisSemanticIndex(
  redis: RedisConnection,
  prefix: string,
  bounds: SemanticBounds,
  sealer: Sealer,
): SemanticIndex {
  const scopes = `${redisNamespace(prefix)}rc:semantic-scopes`
  const memo = openedMemo(bounds.maxBytes)
  const parts = (scope: string) => {
    const ns = cacheScopeNamespace(prefix, scope)
    return { ns, sx: `${ns}sx`, sm: `${ns}sm`, sb: `${ns}sb` }
  }
  return {
    async vectors(scope, partition) {
      const hash = `${parts(scope).ns}sv:${partition}`
      const now = Date.now()
      const idOf = (key: string): string => `${scope}\u0000${partition}\u0000${key}`
      const keys = await withRedis(redis, () => redis.hkeys(hash))
      const unknown = keys.filter((key) => memo.get(idOf(key), now) === undefined)
      if (unknown.length > 0) {
        const values = await withRedis(redis, () => redis.hmgetBuffer(hash, ...unknown))
        unknown.forEach((key, i) => {
          const sealed = values[i]
          const plain = sealed == null ? undefined : sealer.open(scope, aad(partition, key), sealed)
          const opened = plain === undefined ? undefined : decodeVector(plain)
          if (opened !== undefined) memo.set(idOf(key), opened)
        })
      }
      const out: Candidate[] = []
      for (const key of keys) {
        // Expired ones stay in the hash until the scope's next add drops them (no field TTL on 7.0).
        const opened = memo.get(idOf(key), now)
        if (opened !== undefined) out.push({ key, vector: opened.vector })
      }
      return out
    },
    async add(scope, partition, key, vector, ttlMs, labels) {
      const { ns, sx, sm, sb } = parts(scope)
      const ttl = Math.max(1, Math.round(ttlMs))
      const now = Date.now()
      const sealed = sealer.seal(scope, aad(partition, key), encodeVector(vector, now + ttl))
      const reply = await withRedis(redis, async () => {
        const [result] = await Promise.all([
          runScript(
            redis,
            ADD,
            [sx, sm, sb, `${ns}sv:${partition}`],
            [
              ns,
              `${partition} ${key}`,
              key,
              sealed,
              ttl,
              now,
              bounds.scopeMaxVectors,
              bounds.scopeMaxBytes,
              vectorBytes(vector),
              encodeEntryLabels(labels),
            ],
          ),
          redis.sadd(scopes, scope),
        ])
        return result as [number, number]
      })
      return { stored: reply[0] === 1, evicted: reply[1] }
    },
    async purge(filter) {
      let removed = 0
      for (const scope of await withRedis(redis, () => redis.smembers(scopes))) {
        const { ns, sx, sm } = parts(scope)
        const all = await withRedis(redis, () => redis.hgetall(sm))
        const doomed = Object.entries(all)
          .filter(([, meta]) => {
            const labels = decodeEntryLabels(meta)
            return labels !== undefined && matches(labels, filter)
          })
          .map(([member]) => member)
        const left = Number(await withRedis(redis, () => runScript(redis, PURGE, [sx, sm], [ns, ...doomed])))
        removed += doomed.length
        if (left === 0) await withRedis(redis, () => redis.srem(scopes, scope))
      }
      return removed
    },
    async close() {},
  }
}

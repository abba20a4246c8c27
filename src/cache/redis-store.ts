// A fleet's response cache on Redis. Each scope (tenant, owner or key) has its own slot
// (`<prefix>{rc:<scope>}:`): its sealed entries, each with its TTL; an index of them by
// expiry; their labels and sizes; and its byte count. One script stores an entry: it drops
// what has expired, then the scope's entries that expire first until the new one fits
// under the scope's cap, so the cap holds whatever the load. The scopes in use are listed
// under the global namespace, for DELETE /admin/cache.
import { cacheScopeNamespace, redisNamespace, runScript, script, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { matches } from './memory-store.ts'
import { decodeEntryLabels, encodeEntryLabels, ENTRY_OVERHEAD_BYTES, type ResponseCacheStore } from './port.ts'

const DROP = `
local function drop(ns, k)
  local meta = redis.call('HGET', ns .. 'm', k)
  if meta then
    redis.call('DECRBY', ns .. 'b', tonumber(string.match(meta, '^(%d+)')))
    redis.call('HDEL', ns .. 'm', k)
  end
  redis.call('ZREM', ns .. 'x', k)
  redis.call('DEL', ns .. 'e:' .. k)
end
`

// KEYS: index (x), labels (m), bytes (b), the entry (e:<key>). ARGV: namespace, key, value,
// ttl ms, now ms, cap, size, labels. Returns {stored 0|1, evicted}.
const PUT = script(`${DROP}
local ns, key, value = ARGV[1], ARGV[2], ARGV[3]
local ttl, now, cap, size = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do drop(ns, k) end
drop(ns, key)
if size > cap then return {0, 0} end
local evicted = 0
while tonumber(redis.call('GET', KEYS[3]) or '0') + size > cap do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then break end
  drop(ns, oldest[1])
  evicted = evicted + 1
end
redis.call('SET', KEYS[4], value, 'PX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, key)
redis.call('HSET', KEYS[2], key, size .. ' ' .. ARGV[8])
redis.call('INCRBY', KEYS[3], size)
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return {1, evicted}
`)

// KEYS: index, labels, bytes. ARGV: namespace, keys to drop...
const PURGE = script(`${DROP}
for i = 2, #ARGV do drop(ARGV[1], ARGV[i]) end
return redis.call('HLEN', KEYS[2])
`)

export function createRedisCacheStore(
  redis: RedisConnection,
  prefix: string,
  bounds: { scopeMaxBytes: number },
): ResponseCacheStore {
  const scopes = `${redisNamespace(prefix)}rc:scopes`
  const parts = (scope: string) => {
    const ns = cacheScopeNamespace(prefix, scope)
    return { ns, x: `${ns}x`, m: `${ns}m`, b: `${ns}b` }
  }
  return {
    async get(scope, key) {
      const value = await withRedis(redis, () => redis.getBuffer(`${parts(scope).ns}e:${key}`))
      return value ?? undefined
    },
    async put(scope, key, value, ttlMs, labels) {
      const { ns, x, m, b } = parts(scope)
      const size = value.length + ENTRY_OVERHEAD_BYTES
      const reply = await withRedis(redis, async () => {
        const [result] = await Promise.all([
          runScript(
            redis,
            PUT,
            [x, m, b, `${ns}e:${key}`],
            [
              ns,
              key,
              value,
              Math.max(1, Math.round(ttlMs)),
              Date.now(),
              bounds.scopeMaxBytes,
              size,
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
        const { ns, x, m, b } = parts(scope)
        const all = await withRedis(redis, () => redis.hgetall(m))
        const doomed = Object.entries(all)
          .filter(([, meta]) => {
            const labels = decodeEntryLabels(meta)
            return labels !== undefined && matches(labels, filter)
          })
          .map(([k]) => k)
        const left = Number(await withRedis(redis, () => runScript(redis, PURGE, [x, m, b], [ns, ...doomed])))
        removed += doomed.length
        if (left === 0) await withRedis(redis, () => redis.srem(scopes, scope))
      }
      return removed
    },
    bytes: () => undefined,
    async close() {},
  }
}

// Where the output-length sketches live: in this process (the embedded store), or in Redis,
// one hash per scope shared by every instance. An instance adds an observation with one
// script (HINCRBYFLOAT of its bucket by its weight: sketch.ts), so the instances' sketches
// merge as they are written; a reader reads the hash whole.
import { runScript, script, sketchNamespace, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { bucketOf, emptySketch, observe, REBASE_ABOVE, type Sketch } from './sketch.ts'

export interface SketchStore {
  /** Adds one observation of `tokens` at `at` to each scope's sketch. */
  observe(scopes: readonly string[], tokens: number, at: number, halfLifeMs: number): Promise<void>
  /** The sketches of these scopes, in order (empty where there is none). */
  read(scopes: readonly string[], at: number): Promise<Sketch[]>
}

/** A sketch unobserved for this many half-lives weighs under a millionth: it is let go. */
const KEEP_HALF_LIVES = 20
const MAX_KEEP_MS = 30 * 86_400_000
/** The embedded store keeps at most this many scopes (the least recently written go first). */
const MAX_MEMORY_SCOPES = 50_000

export function memorySketchStore(): SketchStore {
  const sketches = new Map<string, { sketch: Sketch; until: number }>()
  return {
    async observe(scopes, tokens, at, halfLifeMs) {
      for (const scope of scopes) {
        const found = sketches.get(scope)
        const entry = found !== undefined && found.until > at ? found : { sketch: emptySketch(at), until: 0 }
        observe(entry.sketch, tokens, at, halfLifeMs)
        entry.until = at + Math.min(KEEP_HALF_LIVES * halfLifeMs, MAX_KEEP_MS)
        // Re-inserted: the Map's order is the order of last writes.
        sketches.delete(scope)
        sketches.set(scope, entry)
        if (sketches.size > MAX_MEMORY_SCOPES) {
          const oldest = sketches.keys().next().value
          if (oldest !== undefined) sketches.delete(oldest)
        }
      }
    },
    async read(scopes, at) {
      return scopes.map((scope) => {
        const entry = sketches.get(scope)
        if (entry === undefined || entry.until <= at) return emptySketch(at)
        return { t0: entry.sketch.t0, buckets: new Map(entry.sketch.buckets) }
      })
    },
  }
}

// KEYS[1] the scope's hash. ARGV: bucket, now (ms), half-life (ms), keep (ms), rebase above.
// The epoch is the hash's field `t0`; weights beyond ARGV[5] move it to now (sketch.ts rebase).
const OBSERVE = script(`
local t0 = tonumber(redis.call('HGET', KEYS[1], 't0'))
local now = tonumber(ARGV[2])
local half = tonumber(ARGV[3])
if not t0 then
  t0 = now
  redis.call('HSET', KEYS[1], 't0', ARGV[2])
end
local w = 2 ^ ((now - t0) / half)
if w > tonumber(ARGV[5]) then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if all[i] ~= 't0' then
      local scaled = tonumber(all[i + 1]) / w
      if scaled < 1e-9 then
        redis.call('HDEL', KEYS[1], all[i])
      else
        redis.call('HSET', KEYS[1], all[i], string.format('%.17g', scaled))
      end
    end
  end
  redis.call('HSET', KEYS[1], 't0', ARGV[2])
  w = 1
end
redis.call('HINCRBYFLOAT', KEYS[1], ARGV[1], string.format('%.17g', w))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

export function redisSketchStore(redis: RedisConnection, prefix: string): SketchStore {
  const keyOf = (scope: string): string => `${sketchNamespace(prefix, scope)}out`
  return {
    async observe(scopes, tokens, at, halfLifeMs) {
      const keep = Math.min(KEEP_HALF_LIVES * halfLifeMs, MAX_KEEP_MS)
      const args = [bucketOf(tokens), Math.round(at), halfLifeMs, Math.ceil(keep), REBASE_ABOVE]
      // One script per scope: each scope is a slot of its own on a cluster.
      await withRedis(redis, () => Promise.all(scopes.map((s) => runScript(redis, OBSERVE, [keyOf(s)], args))))
    },
    async read(scopes, at) {
      const hashes = await withRedis(redis, () => Promise.all(scopes.map((s) => redis.hgetall(keyOf(s)))))
      return hashes.map((hash) => {
        const t0 = Number(hash.t0)
        if (!Number.isFinite(t0)) return emptySketch(at)
        const buckets = new Map<string, number>()
        for (const [field, value] of Object.entries(hash)) {
          const weight = Number(value)
          if (field !== 't0' && Number.isFinite(weight) && weight > 0) buckets.set(field, weight)
        }
        return { t0, buckets }
      })
    },
  }
}

// Counters in Redis. Each dimension is a plain integer key with a TTL: the layout of
// rate-limiter-flexible's RateLimiterRedis (SET NX + INCRBY + PTTL, fixed window that
// opens with the first call), so its get()/delete() read these keys. Unlike the library's
// one-key script, ours checks every dimension of the (key, model) and consumes all or
// none, in one EVALSHA: one round trip per admission, nothing to roll back on refusal.
import type { RedisConnection } from '../store/redis-client.ts'
import { redisNamespace, runScript, script } from '../store/redis-kit.ts'
import type { CounterState, DimensionName } from './dimensions.ts'
import { DIMENSION_CODE, HELD_CODE, type AdmitResult, type Counters, type Subject } from './counters.ts'

// KEYS: one counter per dimension, then one "held" counter per lifetime dimension (the
// quota), in the same order. ARGV[1]: window ms; then per dimension i the triple
// ARGV[3i-1] limit, ARGV[3i] cost, ARGV[3i+1] windowed ('1') or lifetime ('0').
// The fit rule is dimensions.ts fits(): windowed refuses when cost > 0 and used + cost
// > limit; the lifetime quota refuses when used + held >= limit. A lifetime dimension's
// cost goes to its held counter (a windowed key: a reservation whose instance died
// expires with the window), never to the lifetime counter itself.
// Returns {admitted, now, used_1, ttl_1, ...}: used after consuming (or as found when
// refused; used + held for the quota), ttl in ms (0 no open window; the quota reports
// its held counter's), now from Redis's clock.
const ADMIT = `
local window = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = math.floor((#ARGV - 1) / 3)
local used, ttl, key = {}, {}, {}
local admitted = 1
local h = n
for i = 1, n do
  local limit, cost = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  if ARGV[3 * i + 1] == '1' then
    key[i] = KEYS[i]
    used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
    ttl[i] = redis.call('PTTL', KEYS[i])
    if ttl[i] < 0 then used[i] = 0; ttl[i] = 0 end
    if cost > 0 and used[i] + cost > limit then admitted = 0 end
  else
    h = h + 1
    key[i] = KEYS[h]
    local held = tonumber(redis.call('GET', KEYS[h]) or '0')
    ttl[i] = redis.call('PTTL', KEYS[h])
    if ttl[i] < 0 then held = 0; ttl[i] = 0 end
    used[i] = tonumber(redis.call('GET', KEYS[i]) or '0') + held
    if used[i] >= limit then admitted = 0 end
  end
end
if admitted == 1 then
  for i = 1, n do
    local cost = tonumber(ARGV[3 * i])
    if ttl[i] == 0 then
      redis.call('SET', key[i], cost, 'PX', window)
      ttl[i] = window
    else
      redis.call('INCRBY', key[i], cost)
    end
    used[i] = used[i] + cost
  end
end
local out = { admitted, now }
for i = 1, n do out[2 * i + 1] = used[i]; out[2 * i + 2] = ttl[i] end
return out
`

// KEYS: counters, then a held counter per lifetime dimension. ARGV[1]: window ms; per
// dimension i: ARGV[4i-2] delta, ARGV[4i-1] windowed, ARGV[4i] the window end seen at
// admission (Redis clock, ms), ARGV[4i+1] what was reserved.
const SETTLE = `
local window = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = math.floor((#ARGV - 1) / 4)
local h = n
for i = 1, n do
  local delta, expected, reserved = tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1])
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  if ARGV[4 * i - 1] == '1' then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl > 0 and expected > 0 and math.abs(now + ttl - expected) * 2 < window then
      redis.call('INCRBY', KEYS[i], math.max(delta, -current))
    elseif delta > 0 then
      if ttl > 0 then redis.call('INCRBY', KEYS[i], delta) else redis.call('SET', KEYS[i], delta, 'PX', window) end
    end
  else
    h = h + 1
    -- Commit what the call used; release its reservation if its window still holds it.
    redis.call('INCRBY', KEYS[i], math.max(reserved + delta, -current))
    local ttl = redis.call('PTTL', KEYS[h])
    if reserved > 0 and ttl > 0 and expected > 0 and math.abs(now + ttl - expected) * 2 < window then
      local held = tonumber(redis.call('GET', KEYS[h]) or '0')
      redis.call('DECRBY', KEYS[h], math.min(reserved, held))
    end
  end
end
return 1
`

// KEYS: counters, then a held counter per lifetime dimension; ARGV[i]: windowed ('1') or
// lifetime. Returns {now, used_1, ttl_1, ...} (the quota: used + held).
const PEEK = `
local t = redis.call('TIME')
local out = { tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) }
local h = #ARGV
for i = 1, #ARGV do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  local ttl = -1
  if ARGV[i] == '1' then
    ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then used = 0; ttl = 0 end
  else
    h = h + 1
    if redis.call('PTTL', KEYS[h]) > 0 then used = used + tonumber(redis.call('GET', KEYS[h]) or '0') end
  end
  out[2 * i] = used
  out[2 * i + 1] = ttl
end
return out
`

const SCRIPTS = { admit: script(ADMIT), settle: script(SETTLE), peek: script(PEEK) }

/** Key names under the gateway's prefix, hash-tagged like the rest of Tollgate's keys. */
export function limiterKeys(prefix: string): {
  readonly base: string
  counter(subject: Subject, dimension: { readonly name: DimensionName }): string
  /** The quota's reservations of calls in flight. */
  held(subject: Subject): string
} {
  const base = `${redisNamespace(prefix)}rl:`
  const enc = encodeURIComponent
  return {
    base,
    counter: (subject, dimension) =>
      `${base}${enc(subject.keyId)}:${enc(subject.model)}:${DIMENSION_CODE[dimension.name]}`,
    held: (subject) => `${base}${enc(subject.keyId)}:${enc(subject.model)}:${HELD_CODE}`,
  }
}

/** The counters' keys, then a held counter's for each lifetime dimension. */
function keysOf(
  keys: ReturnType<typeof limiterKeys>,
  subject: Subject,
  dimensions: readonly { readonly name: DimensionName; readonly windowed: boolean }[],
): string[] {
  return [
    ...dimensions.map((d) => keys.counter(subject, d)),
    ...dimensions.filter((d) => !d.windowed).map(() => keys.held(subject)),
  ]
}

function integers(reply: unknown, length: number): number[] {
  if (!Array.isArray(reply) || reply.length !== length || !reply.every((v) => typeof v === 'number')) {
    throw new Error(`unexpected reply from the rate-limit script: ${JSON.stringify(reply)}`)
  }
  return reply
}

function stateAt(now: number, used: number, ttl: number): CounterState {
  // A lifetime counter (ttl -1) has no window; an empty window is full right now.
  if (ttl <= 0 || used <= 0) return { used: Math.max(used, 0), resetMs: 0, expiresAt: ttl > 0 ? now + ttl : 0 }
  return { used, resetMs: ttl, expiresAt: now + ttl }
}

export interface RedisCounters extends Counters {
  /** True when the master serving the counters' slot answers (on a cluster PING answers from any node). */
  reachable(): Promise<boolean>
  /**
   * Sends each script once in full (EVAL, with no dimension: it touches no key), so the
   * master serving the counters' slot has them cached. A fresh master (a start, a
   * failover: replicas do not keep the script cache) would otherwise meet the first burst
   * of calls with a NOSCRIPT each and a full EVAL after it.
   */
  warm(): Promise<void>
}

export function redisCounters(redis: RedisConnection, prefix: string, windowMs: number): RedisCounters {
  const keys = limiterKeys(prefix)

  return {
    kind: 'redis',
    async reachable() {
      return typeof (await redis.exists(`${keys.base}probe`)) === 'number'
    },
    async warm() {
      const probe = `${keys.base}probe`
      await Promise.all([
        redis.eval(SCRIPTS.admit.source, 1, probe, windowMs),
        redis.eval(SCRIPTS.settle.source, 1, probe, windowMs),
        redis.eval(SCRIPTS.peek.source, 1, probe),
      ])
    },
    async admit(subject, charges) {
      const args: (string | number)[] = [windowMs]
      for (const c of charges) args.push(c.limit, c.cost, c.windowed ? '1' : '0')
      const reply = integers(
        await runScript(redis, SCRIPTS.admit, keysOf(keys, subject, charges), args),
        2 + 2 * charges.length,
      )
      const now = reply[1] ?? 0
      const states = charges.map((c, i) => {
        const state = stateAt(now, reply[2 + 2 * i] ?? 0, reply[3 + 2 * i] ?? 0)
        // The quota never resets; the window is its held counter's, for the settle to match.
        return c.windowed ? state : { ...state, resetMs: 0 }
      })
      return { admitted: reply[0] === 1, states } satisfies AdmitResult
    },
    async settle(subject, adjustments) {
      if (adjustments.length === 0) return
      const args: (string | number)[] = [windowMs]
      for (const a of adjustments) args.push(a.delta, a.windowed ? '1' : '0', a.expiresAt, a.reserved)
      await runScript(redis, SCRIPTS.settle, keysOf(keys, subject, adjustments), args)
    },
    async peek(subject, dimensions) {
      if (dimensions.length === 0) return []
      const reply = integers(
        await runScript(
          redis,
          SCRIPTS.peek,
          keysOf(keys, subject, dimensions),
          dimensions.map((d) => (d.windowed ? '1' : '0')),
        ),
        1 + 2 * dimensions.length,
      )
      const now = reply[0] ?? 0
      return dimensions.map((_, i) => stateAt(now, reply[1 + 2 * i] ?? 0, reply[2 + 2 * i] ?? 0))
    },
  }
}

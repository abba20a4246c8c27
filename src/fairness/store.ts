// Where the fair-share counters (vtc.ts) live: in this process (the embedded store), or in
// Redis, three hashes per scope on one slot (counters, when each party was last charged,
// when each was last read waiting in a gateway's capacity line), shared by every instance.
// The last lets a gateway see that a party further below its share waits on another
// gateway (queue/capacity-line.ts holds back for it). Charges are one script (a batch of a
// model's, or one party's alone), so two gateways charging at once both count, and the lift
// of a party that comes back reads the same active set it writes to.
import { fairNamespace, runScript, script, unexpected, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { charge, effectiveCounter, FORGET_MS, type PartyState } from './vtc.ts'

export interface FairStore {
  /**
   * Charges each party its `delta` weighted tokens in `scope`, in order (vtc.ts charge; one
   * script on Redis); each charge's new counter, in order.
   */
  chargeMany(
    scope: string,
    charges: ReadonlyArray<readonly [string, number]>,
    now: number,
    activeMs: number,
  ): Promise<number[]>
  /**
   * The counters `parties` are ranked by in `scope` now (vtc.ts effectiveCounter), in order,
   * and the least counter of the parties waiting on other instances (seen waiting there
   * within WAITING_MS; undefined when none is). Marks `parties` as waiting here.
   */
  read(scope: string, parties: readonly string[], now: number, activeMs: number): Promise<Ranking>
}

export interface Ranking {
  readonly counters: readonly number[]
  readonly elsewhere: number | undefined
}

/** A party another instance read as waiting this recently still waits there. */
export const WAITING_MS = 500

/** The embedded store keeps at most this many scopes (the least recently charged go first). */
const MAX_MEMORY_SCOPES = 10_000

export function memoryFairStore(): FairStore {
  const scopes = new Map<string, Map<string, PartyState>>()
  return {
    async chargeMany(scope, charges, now, activeMs) {
      const states = scopes.get(scope) ?? new Map<string, PartyState>()
      // Re-inserted: the Map's order is the order of last charges.
      scopes.delete(scope)
      scopes.set(scope, states)
      if (scopes.size > MAX_MEMORY_SCOPES) {
        const oldest = scopes.keys().next().value
        if (oldest !== undefined) scopes.delete(oldest)
      }
      return charges.map(([party, delta]) => charge(states, party, delta, now, activeMs))
    },
    async read(scope, parties, now, activeMs) {
      const states = scopes.get(scope) ?? new Map<string, PartyState>()
      // One process: nobody waits elsewhere.
      return { counters: parties.map((party) => effectiveCounter(states, party, now, activeMs)), elsewhere: undefined }
    },
  }
}

// The floor of the active parties other than ARGV[1] (vtc.ts activeFloor); forgets the idle
// ones past ARGV[5] when `forget` is set. KEYS[1] counters, KEYS[2] last charged.
const FLOOR = `
local function floorOf(party, now, active, forget)
  local floor = nil
  local seen = redis.call('HGETALL', KEYS[2])
  for i = 1, #seen, 2 do
    local other, at = seen[i], tonumber(seen[i + 1])
    if other ~= party then
      if now - at <= active then
        local c = tonumber(redis.call('HGET', KEYS[1], other)) or 0
        if floor == nil or c < floor then floor = c end
      elseif forget and now - at > forget then
        redis.call('HDEL', KEYS[1], other)
        redis.call('HDEL', KEYS[2], other)
      end
    end
  end
  return floor
end
local function effective(party, now, active, forget)
  local c = tonumber(redis.call('HGET', KEYS[1], party)) or 0
  local at = tonumber(redis.call('HGET', KEYS[2], party))
  if at ~= nil and now - at <= active then return c end
  local floor = floorOf(party, now, active, forget)
  if floor ~= nil and floor > c then return floor end
  return c
end
`

// ARGV: now, activeMs, forgetMs, then party and delta pairs: each charge in order (vtc.ts
// charge). Returns each charge's new counter, in order.
const CHARGE = script(`${FLOOR}
local now, active, forget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV, 2 do
  local c = effective(ARGV[i], now, active, forget) + tonumber(ARGV[i + 1])
  local s = string.format('%.17g', c)
  redis.call('HSET', KEYS[1], ARGV[i], s)
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  out[#out + 1] = s
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return out
`)

// KEYS[3] when each party was last read waiting. ARGV: now, activeMs, waitingMs, forgetMs,
// then the parties waiting here. Returns their counters, in order, and the least counter of
// those waiting elsewhere ('' for none).
const READ = script(`${FLOOR}
local now, active, waiting = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out, here = {}, {}
for i = 5, #ARGV do
  here[ARGV[i]] = true
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[1])
  out[#out + 1] = string.format('%.17g', effective(ARGV[i], now, active, nil))
end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
local elsewhere = nil
local seen = redis.call('HGETALL', KEYS[3])
for i = 1, #seen, 2 do
  local party, at = seen[i], tonumber(seen[i + 1])
  if not here[party] then
    if now - at <= waiting then
      local c = effective(party, now, active, nil)
      if elsewhere == nil or c < elsewhere then elsewhere = c end
    elseif now - at > tonumber(ARGV[4]) then
      redis.call('HDEL', KEYS[3], party)
    end
  end
end
return { out, elsewhere == nil and '' or string.format('%.17g', elsewhere) }
`)

export function redisFairStore(redis: RedisConnection, prefix: string): FairStore {
  const keysOf = (scope: string): string[] => {
    const ns = fairNamespace(prefix, scope)
    return [`${ns}vtc`, `${ns}at`, `${ns}waiting`]
  }
  return {
    async chargeMany(scope, charges, now, activeMs) {
      const args = [Math.round(now), activeMs, FORGET_MS, ...charges.flat()]
      const reply = await withRedis(redis, () => runScript(redis, CHARGE, keysOf(scope), args))
      if (!Array.isArray(reply) || reply.length !== charges.length) throw unexpected('fair-share charges', reply)
      return reply.map((v) => Number(v))
    },
    async read(scope, parties, now, activeMs) {
      const args = [Math.round(now), activeMs, WAITING_MS, FORGET_MS, ...parties]
      const reply = await withRedis(redis, () => runScript(redis, READ, keysOf(scope), args))
      const [counters, elsewhere] = Array.isArray(reply) ? (reply as [unknown, unknown]) : [[], '']
      if (!Array.isArray(counters) || counters.length !== parties.length) throw unexpected('fair-share counters', reply)
      return {
        counters: counters.map((v) => Number(v)),
        elsewhere: elsewhere === '' || elsewhere === undefined ? undefined : Number(elsewhere),
      }
    },
  }
}

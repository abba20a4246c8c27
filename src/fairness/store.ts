// Where the fair-share counters (vtc.ts) live: in this process (the embedded store), or in
// Redis, three hashes per scope on one slot (counters, when each party was last charged,
// when each was last read waiting in a gateway's capacity line), shared by every instance.
// The last lets a gateway see that a party further below its share waits on another
// gateway (queue/capacity-line.ts holds back for it). A charge is one script, so two gateways charging at once both
// count, and the lift of a party that comes back reads the same active set it writes to.
import { fairNamespace, runScript, script, unexpected, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { charge, effectiveCounter, FORGET_MS, type PartyState } from './vtc.ts'
import { CONTEND_MS, lowestContending, type Standing } from './contention.ts'

export interface FairStore {
  /**
   * Charges each party its `delta` weighted tokens in `scope`, in order (vtc.ts charge; one
   * script on Redis); in the same
   * answer, where the parties stand (contention.ts Standing: the charged ones' counters and
   * the two lowest of those charged within `contendMs`), so /v2 can tell who is above its
   * share without a round trip of its own.
   */
  chargeMany(
    scope: string,
    charges: ReadonlyArray<readonly [string, number]>,
    now: number,
    activeMs: number,
    contendMs?: number,
  ): Promise<Standing>
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
    async chargeMany(scope, charges, now, activeMs, contendMs = CONTEND_MS) {
      const states = scopes.get(scope) ?? new Map<string, PartyState>()
      // Re-inserted: the Map's order is the order of last charges.
      scopes.delete(scope)
      scopes.set(scope, states)
      if (scopes.size > MAX_MEMORY_SCOPES) {
        const oldest = scopes.keys().next().value
        if (oldest !== undefined) scopes.delete(oldest)
      }
      const charged = charges.map(([party, delta]): readonly [string, number] => [
        party,
        charge(states, party, delta, now, activeMs),
      ])
      return { charged, lowest: lowestContending(states, now, contendMs) }
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

// ARGV: now, activeMs, forgetMs, contendMs, then party and delta pairs: each charge, in
// order (vtc.ts charge). Returns the charged parties' new counters (party, counter, ...) and the two lowest
// counters of the parties charged within contendMs (contention.ts lowestContending), lowest
// first. That walk reads every party's last charge: one HGETALL of a hash the floor already
// walks, bounded by the parties seen within FORGET_MS.
const CHARGE = script(`${FLOOR}
local now, active, forget, contend = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local charged = {}
for i = 5, #ARGV, 2 do
  local c = effective(ARGV[i], now, active, forget) + tonumber(ARGV[i + 1])
  local text = string.format('%.17g', c)
  redis.call('HSET', KEYS[1], ARGV[i], text)
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  charged[#charged + 1] = ARGV[i]
  charged[#charged + 1] = text
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local p1, c1, p2, c2 = nil, nil, nil, nil
local seen = redis.call('HGETALL', KEYS[2])
for i = 1, #seen, 2 do
  if now - tonumber(seen[i + 1]) <= contend then
    local c = tonumber(redis.call('HGET', KEYS[1], seen[i])) or 0
    if c1 == nil or c < c1 then
      p2, c2, p1, c1 = p1, c1, seen[i], c
    elseif c2 == nil or c < c2 then
      p2, c2 = seen[i], c
    end
  end
end
local lowest = {}
if p1 ~= nil then lowest = { p1, string.format('%.17g', c1) } end
if p2 ~= nil then lowest[3], lowest[4] = p2, string.format('%.17g', c2) end
return { charged, lowest }
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
    async chargeMany(scope, charges, now, activeMs, contendMs = CONTEND_MS) {
      const args = [Math.round(now), activeMs, FORGET_MS, contendMs, ...charges.flat()]
      const reply = await withRedis(redis, () => runScript(redis, CHARGE, keysOf(scope), args))
      const [charged, lowest] = Array.isArray(reply) ? (reply as [unknown, unknown]) : [undefined, undefined]
      if (!Array.isArray(charged) || !Array.isArray(lowest)) throw unexpected('fair-share charges', reply)
      return { charged: pairsOf(charged), lowest: pairsOf(lowest) }
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

/** party, counter, party, counter… as pairs. */
function pairsOf(flat: readonly unknown[]): Array<readonly [string, number]> {
  const pairs: Array<readonly [string, number]> = []
  for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([String(flat[i]), Number(flat[i + 1])])
  return pairs
}

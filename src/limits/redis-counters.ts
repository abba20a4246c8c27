// Counters in Redis. Each dimension is a plain integer key with a TTL: the layout of
// rate-limiter-flexible's RateLimiterRedis (SET NX + INCRBY + PTTL, fixed window that
// opens with the first call), so its get()/delete() read these keys. Unlike the library's
// one-key script, ours checks every dimension of the (key, model) and consumes all or
// none, in one EVALSHA: one round trip per admission, nothing to roll back on refusal.
//
// Where the counters live on a cluster (store/redis-kit.ts): a key's counters and its key
// and owner budgets on its owner's slot, so ADMIT and SETTLE stay one script each on
// that slot and the fleet's owners spread over the masters. The one exception is a tenant
// budget, which spans owners and lives on its tenant's slot: a call under one reserves
// there first (ADMIT with no dimension), then runs the key's ADMIT without it, and
// releases the tenant reservation (RELEASE) if the key's admission refuses; its settle is
// two SETTLEs, one per slot. Only calls under a tenant budget pay the second script.
//
// Counters were all under `{tg}` before (issue #25). The windowed ones need no migration:
// they start again in the new slots within a minute. The lifetime ones (the quota, budgets'
// spent and fired) are carried over once at start (limiter-migration.ts).
import type { RedisConnection } from '../store/redis-client.ts'
import { isCluster } from '../store/redis-client.ts'
import { identityNamespace, redisNamespace, runScript, script, tenantNamespace } from '../store/redis-kit.ts'
import { turnWrites } from '../store/redis-turn-writes.ts'
import { turnBatches } from '../turn-batches.ts'
import type { Adjustment, Charge, CounterState, Dimension, DimensionName } from './dimensions.ts'
import {
  EMPTY_BUDGET,
  firedName,
  type BudgetCharge,
  type BudgetCrossing,
  type BudgetHome,
  type BudgetSettle,
  type BudgetState,
} from './budget-charges.ts'
import { counterCode, type AdmitResult, type Counters, type HeldCall, type Subject } from './counters.ts'
import { interactiveOf, pooled } from './pools.ts'
import { DEFAULT_LEASE_MS, holdMember, HOLDS_LUA } from './holds.ts'
import type { OnceCharge } from './port.ts'

// The charges of one admission, prepended to ADMIT and ADMIT_TURN (after HOLDS_LUA).
// check(k, a, n, now) reads n charges whose counters are KEYS[k..k+n-1], followed by the
// holds (set and sum: holds.ts) of the lifetime ones, and whose triples start at ARGV[a];
// it returns whether they fit, what each has used, its ttl and key, and `last`, the last
// KEYS index read. take(c, a, n, window, now, lease) consumes them: a windowed charge adds
// to its counter, a lifetime one (the quota) is held for the call until its settle (its
// triple's third element is then the call's hold member, not '1').
// A batch line's windowed charge (third element 'p': pools.ts) is on its pool's counter, and
// its key's interactive counter (the next extra KEY, in dimension order with the quota's
// holds) counts in its fit; c.soon is then the earlier of the two windows' resets, what a
// refusal reports (some room is back then); reported(c, i, admitted) picks it.
const CHARGES = `
local function check(k, a, n, now)
  local c = { admitted = 1, used = {}, ttl = {}, soon = {}, key = {}, held = {}, last = k + n - 1 }
  for i = 1, n do
    local at = a + 3 * (i - 1)
    local limit, cost = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
    local kind = ARGV[at + 2]
    if kind == '1' or kind == 'p' then
      c.key[i] = KEYS[k + i - 1]
      c.used[i] = tonumber(redis.call('GET', c.key[i]) or '0')
      c.ttl[i] = redis.call('PTTL', c.key[i])
      if c.ttl[i] < 0 then c.used[i] = 0; c.ttl[i] = 0 end
      c.soon[i] = c.ttl[i]
      if kind == 'p' then
        c.last = c.last + 1
        local other = tonumber(redis.call('GET', KEYS[c.last]) or '0')
        local ttl = redis.call('PTTL', KEYS[c.last])
        if c.used[i] <= 0 then c.soon[i] = 0 end
        if ttl > 0 and other > 0 then
          c.used[i] = c.used[i] + other
          if c.soon[i] <= 0 or ttl < c.soon[i] then c.soon[i] = ttl end
        end
      end
      if cost > 0 and c.used[i] + cost > limit then c.admitted = 0 end
    else
      c.held[i] = { KEYS[c.last + 1], KEYS[c.last + 2] }
      c.last = c.last + 2
      c.ttl[i] = 0
      c.soon[i] = 0
      c.used[i] = tonumber(redis.call('GET', KEYS[k + i - 1]) or '0') + heldOn(c.held[i][1], c.held[i][2], now)
      if c.used[i] >= limit then c.admitted = 0 end
    end
  end
  return c
end
local function take(c, a, n, window, now, lease)
  for i = 1, n do
    local at = a + 3 * (i - 1)
    local cost = tonumber(ARGV[at + 1])
    if c.held[i] ~= nil then
      if cost > 0 then hold(c.held[i][1], c.held[i][2], ARGV[at + 2], cost, now, lease) end
    elseif c.ttl[i] == 0 then
      redis.call('SET', c.key[i], cost, 'PX', window)
      c.ttl[i] = window
    else
      redis.call('INCRBY', c.key[i], cost)
    end
    c.used[i] = c.used[i] + cost
  end
end
local function reported(c, i, admitted)
  if admitted == 1 then return c.ttl[i] end
  return c.soon[i]
end
`

// KEYS: one counter per dimension, then the holds (set and sum: holds.ts) of each lifetime
// dimension (the quota), in the same order, then per budget its spent counter and its holds. ARGV[1]: window ms; ARGV[2]: n, the dimensions; ARGV[3]: a
// hold's lease, ms; per dimension i the triple ARGV[3i+1] limit, ARGV[3i+2] cost,
// ARGV[3i+3] '1' (windowed) or the call's hold member (lifetime); then per budget j the
// triple amount, cost (nano-units), the call's hold member.
// The fit rule is dimensions.ts fits(): windowed refuses when cost > 0 and used + cost
// > limit; the lifetime quota refuses when used + held >= limit. A lifetime dimension's
// cost is the call's hold (kept until its settle, lapsing with its lease if its instance
// dies: holds.ts), never added to the lifetime counter itself. A budget's is
// budget-charges.ts budgetFits(): spent + held + cost <= amount (a free call: spent +
// held < amount); its cost is the call's hold, kept until its settle (holds.ts).
// Returns {admitted, now, used_1, ttl_1, ..., spent_1, held_1, ...}: used after
// consuming (or as found when refused; used + held for the quota), ttl in ms (0 no open
// window, and for the quota), now from Redis's clock.
const ADMIT = `${HOLDS_LUA}${CHARGES}
local window = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[2] or '0')
local lease = tonumber(ARGV[3])
local nb = math.floor((#ARGV - 3 - 3 * n) / 3)
local c = check(1, 4, n, now)
local admitted = c.admitted
local h = c.last
local spent, held = {}, {}
local b0 = 3 * n + 4
for j = 1, nb do
  local amount, cost = tonumber(ARGV[b0 + 3 * j - 3]), tonumber(ARGV[b0 + 3 * j - 2])
  spent[j] = tonumber(redis.call('GET', KEYS[h + 3 * j - 2]) or '0')
  held[j] = heldOn(KEYS[h + 3 * j - 1], KEYS[h + 3 * j], now)
  local total = spent[j] + held[j]
  if (cost > 0 and total + cost > amount) or (cost <= 0 and total >= amount) then admitted = 0 end
end
if admitted == 1 then
  take(c, 4, n, window, now, lease)
  for j = 1, nb do
    local cost = tonumber(ARGV[b0 + 3 * j - 2])
    if cost > 0 then
      hold(KEYS[h + 3 * j - 1], KEYS[h + 3 * j], ARGV[b0 + 3 * j - 1], cost, now, lease)
      held[j] = held[j] + cost
    end
  end
end
local out = { admitted, now }
for i = 1, n do out[2 * i + 1] = c.used[i]; out[2 * i + 2] = reported(c, i, admitted) end
for j = 1, nb do
  out[2 * n + 2 * j + 1] = spent[j]; out[2 * n + 2 * j + 2] = held[j]
end
return out
`

// The admissions without budgets made on one slot in one turn of the event loop, one after
// the other as ADMIT would take them. ARGV[1]: window ms; ARGV[2]: m, the admissions;
// ARGV[3]: a hold's lease, ms; then per admission its n and its n triples. KEYS: per
// admission its counters, then the holds of its lifetime ones. Returns per admission, one
// after the other, ADMIT's {admitted, now, used_1, ttl_1, ...}.
const ADMIT_TURN = `${HOLDS_LUA}${CHARGES}
local window = tonumber(ARGV[1])
local lease = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
local k, a = 1, 4
for _ = 1, tonumber(ARGV[2]) do
  local n = tonumber(ARGV[a])
  local c = check(k, a + 1, n, now)
  if c.admitted == 1 then take(c, a + 1, n, window, now, lease) end
  out[#out + 1] = c.admitted
  out[#out + 1] = now
  for i = 1, n do
    out[#out + 1] = c.used[i]
    out[#out + 1] = reported(c, i, c.admitted)
  end
  k, a = c.last + 1, a + 1 + 3 * n
end
return out
`

// KEYS: counters, then the holds (set and sum) of each lifetime dimension, then per budget
// its spent counter, its holds and its fired set. ARGV[1]: window ms; ARGV[2]: n; per
// dimension i: ARGV[4i-1] delta, ARGV[4i] '1' (windowed) or the call's hold member
// (lifetime), ARGV[4i+1] the window end seen at admission (Redis clock, ms), ARGV[4i+2]
// what was reserved; then per budget six: real
// cost, reserved, the call's hold member, how long the spent counter lives (0: forever),
// amount, thresholds ("50,80,100").
// A budget commits the real cost, releases the call's hold (once: holds.ts), and adds to
// its fired set (HSETNX: only the first settle to reach a threshold in the
// period and revision gets a 1) every threshold the spend has reached.
// A settle under a once id (limits/port.ts OnceCharge) has one ARGV more after the budgets,
// how long its id is kept (ms), and its marker as the last KEY: the budgets commit only if
// the marker was not there (SET NX, in the same step); a repeat releases its holds only.
// Returns {spent_1, ..., j, threshold, j, threshold, ...}: the crossings this settle is first to.
const SETTLE = `${HOLDS_LUA}
local window = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[2] or '0')
local nb = math.floor((#ARGV - 2 - 4 * n) / 6)
local commits = true
if nb > 0 and (#ARGV - 2 - 4 * n) % 6 == 1 then
  commits = redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', ARGV[#ARGV]) ~= false
end
local h = n
for i = 1, n do
  local delta, expected, reserved = tonumber(ARGV[4 * i - 1]), tonumber(ARGV[4 * i + 1]), tonumber(ARGV[4 * i + 2])
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  if ARGV[4 * i] == '1' then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl > 0 and expected > 0 and math.abs(now + ttl - expected) * 2 < window then
      redis.call('INCRBY', KEYS[i], math.max(delta, -current))
    elseif delta > 0 then
      if ttl > 0 then redis.call('INCRBY', KEYS[i], delta) else redis.call('SET', KEYS[i], delta, 'PX', window) end
    end
  else
    -- Commit what the call used; release its hold (once).
    redis.call('INCRBY', KEYS[i], math.max(reserved + delta, -current))
    if reserved > 0 then unhold(KEYS[h + 1], KEYS[h + 2], ARGV[4 * i], reserved) end
    h = h + 2
  end
end
local out = {}
local crossed = {}
local b0 = 4 * n + 3
for j = 1, nb do
  local b = b0 + 6 * (j - 1)
  local real, reserved = tonumber(ARGV[b]), tonumber(ARGV[b + 1])
  if not commits then real = 0 end
  local life, amount = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local sk, fk = KEYS[h + 4 * j - 3], KEYS[h + 4 * j]
  local spent = redis.call('INCRBY', sk, real)
  if life > 0 and redis.call('PTTL', sk) < 0 then redis.call('PEXPIRE', sk, life) end
  if reserved > 0 then unhold(KEYS[h + 4 * j - 2], KEYS[h + 4 * j - 1], ARGV[b + 2], reserved) end
  if spent > 0 then
    for p in string.gmatch(ARGV[b + 5], '[^,]+') do
      if spent * 100 >= tonumber(p) * amount and redis.call('HSETNX', fk, p, '1') == 1 then
        crossed[#crossed + 1] = j
        crossed[#crossed + 1] = tonumber(p)
      end
    end
    if life > 0 and redis.call('PTTL', fk) < 0 then redis.call('PEXPIRE', fk, life) end
  end
  out[j] = spent
end
for k = 1, #crossed do out[nb + k] = crossed[k] end
return out
`

// KEYS: per budget its holds (set and sum). ARGV: per budget j the pair reserved, the
// call's hold member. Gives back the holds of a call the key's admission then refused
// (nothing committed; once, like SETTLE's).
const RELEASE = `${HOLDS_LUA}
for j = 1, #KEYS / 2 do
  unhold(KEYS[2 * j - 1], KEYS[2 * j], ARGV[2 * j], tonumber(ARGV[2 * j - 1]))
end
return 'ok'
`

// KEYS: per hold its budget's holds (set and sum). ARGV[1]: the lease, ms; per hold j the
// pair member, cost. Renews the leases of calls still running here (holds.ts).
const RENEW = `${HOLDS_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
for j = 1, #KEYS / 2 do
  hold(KEYS[2 * j - 1], KEYS[2 * j], ARGV[2 * j], tonumber(ARGV[2 * j + 1]), now, lease)
end
return 'ok'
`

// KEYS: per budget its spent counter and its holds (set and sum). Returns {now, spent_1,
// held_1, ...}; leases that ended are swept on the way.
const PEEK_BUDGETS = `${HOLDS_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = { now }
for j = 1, #KEYS / 3 do
  out[2 * j] = tonumber(redis.call('GET', KEYS[3 * j - 2]) or '0')
  out[2 * j + 1] = heldOn(KEYS[3 * j - 1], KEYS[3 * j], now)
end
return out
`

// KEYS: counters, then per dimension in order its extra keys: the holds (set and sum) of a
// lifetime one, a batch line's key's interactive counter (pools.ts); ARGV[i]: windowed
// ('1'), a batch line's windowed ('p') or lifetime. Returns {now, used_1, ttl_1, ...} (the
// quota: used + held; a batch line's: with the interactive use, and the earlier reset).
const PEEK = `${HOLDS_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = { now }
local h = #ARGV
for i = 1, #ARGV do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  local ttl = -1
  if ARGV[i] == '1' or ARGV[i] == 'p' then
    ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 then used = 0; ttl = 0 end
    if ARGV[i] == 'p' then
      local other = tonumber(redis.call('GET', KEYS[h + 1]) or '0')
      local left = redis.call('PTTL', KEYS[h + 1])
      h = h + 1
      if used <= 0 then ttl = 0 end
      if left > 0 and other > 0 then
        used = used + other
        if ttl <= 0 or left < ttl then ttl = left end
      end
    end
  else
    used = used + heldOn(KEYS[h + 1], KEYS[h + 2], now)
    h = h + 2
  end
  out[2 * i] = used
  out[2 * i + 1] = ttl
end
return out
`

const SCRIPTS = {
  admit: script(ADMIT),
  admitTurn: script(ADMIT_TURN),
  settle: script(SETTLE),
  peek: script(PEEK),
  peekBudgets: script(PEEK_BUDGETS),
  release: script(RELEASE),
  renew: script(RENEW),
}

/** The namespace of a budget's counters (budget-charges.ts BudgetHome). */
function homeNamespace(prefix: string, home: BudgetHome): string {
  return 'tenant' in home ? tenantNamespace(prefix, home.tenant) : identityNamespace(prefix, home)
}

/** The admissions of one slot made in one turn, sent as one ADMIT_TURN (redisCounters admitInTurn). */
interface TurnAdmissions {
  readonly names: string[]
  /** The window, the number of admissions (set when sent), then each admission's n and triples. */
  readonly args: (string | number)[]
  admissions: number
  /** The reply's length so far: where the next admission's reply starts. */
  replied: number
}

/** The settles of one slot made in one turn, sent as one SETTLE (redisCounters settleInTurn): one counter per adjustment. */
interface TurnSettles {
  readonly counters: string[]
  readonly held: string[]
  readonly args: (string | number)[]
}

/** Keys whose counters' names limiterKeys keeps. */
const NAMED_KEYS = 10_000

/** Key names under the gateway's prefix, each on its owner's (or tenant's) slot: see store/redis-kit.ts. */
export function limiterKeys(prefix: string): {
  /** `<prefix>{tg}:rl:`: the reachability probe, and where every counter was before issue #25. */
  readonly base: string
  /** The namespace (and so the slot) of a subject's counters. */
  slot(subject: Subject): string
  counter(subject: Subject, dimension: { readonly name: DimensionName }): string
  /** The quota's holds of calls in flight (set and sum: holds.ts). */
  quotaHolds(subject: Subject): { holds: string; held: string }
  /** The namespace (and so the slot) of a budget's counters. */
  budgetSlot(charge: Pick<BudgetCharge, 'home'>): string
  /** The marker of a once-settle's budgets on slot `ns` (a budgetSlot): its id was committed there. */
  once(ns: string, id: string): string
  /** A budget's counters in its period: spent, the holds of calls in flight (set and sum: holds.ts), fired (thresholds reported). */
  budget(charge: Pick<BudgetCharge, 'counter' | 'spec' | 'home'>): {
    spent: string
    holds: string
    held: string
    fired: string
  }
} {
  const base = `${redisNamespace(prefix)}rl:`
  const enc = encodeURIComponent
  // A subject's names are built once (twelve uses a call: the admission's and the settle's),
  // by key and model (and the key's owner, which names the slot); the memory is dropped whole
  // when it holds too many keys.
  const named = new Map<string, Map<string, { readonly owner: string | undefined; readonly name: string }>>()
  const of = (subject: Subject): string => {
    let models = named.get(subject.keyId)
    if (models === undefined) {
      if (named.size >= NAMED_KEYS) named.clear()
      models = new Map()
      named.set(subject.keyId, models)
    }
    const known = models.get(subject.model)
    if (known !== undefined && known.owner === subject.owner) return known.name
    const name = `${identityNamespace(prefix, subject)}rl:${enc(subject.keyId)}:${enc(subject.model)}:`
    models.set(subject.model, { owner: subject.owner, name })
    return name
  }
  return {
    base,
    slot: (subject) => identityNamespace(prefix, subject),
    // A batch line's windowed counters beside its key's interactive ones, on the same slot (pools.ts).
    counter: (subject, dimension) => `${of(subject)}${counterCode(subject, dimension.name)}`,
    // `h` was the windowed counter these replaced (it lapses by itself).
    quotaHolds: (subject) => ({ holds: `${of(subject)}hl`, held: `${of(subject)}ht` }),
    budgetSlot: (charge) => homeNamespace(prefix, charge.home),
    once: (ns, id) => `${ns}rl:once:${enc(id)}`,
    budget: (charge) => {
      const at = `${homeNamespace(prefix, charge.home)}rl:bg:`
      // The holds are `:hl` and `:ht`; `:h` was the windowed counter they replaced (it lapses by itself).
      return {
        spent: `${at}${charge.counter}:s`,
        holds: `${at}${charge.counter}:hl`,
        held: `${at}${charge.counter}:ht`,
        fired: `${at}${firedName(charge)}`,
      }
    },
  }
}

/** Indexes of the items on the subject's slot, and of the others grouped by slot (in order). */
function bySlot<T>(
  items: readonly T[],
  slotOf: (item: T) => string,
  home: string,
): { here: number[]; away: number[][] } {
  const here: number[] = []
  const away = new Map<string, number[]>()
  for (const [i, item] of items.entries()) {
    const slot = slotOf(item)
    if (slot === home) here.push(i)
    else away.set(slot, [...(away.get(slot) ?? []), i])
  }
  return { here, away: [...away.values()] }
}

/**
 * The counters' keys, then per dimension in order its extra keys: the holds (set and sum) of
 * a lifetime one, and (`reading`: an admission or a peek, not a settle) the key's interactive
 * counter beside a batch line's windowed one (pools.ts).
 */
function keysOf(
  keys: ReturnType<typeof limiterKeys>,
  subject: Subject,
  dimensions: readonly { readonly name: DimensionName; readonly windowed: boolean }[],
  reading = false,
): string[] {
  return [
    ...dimensions.map((d) => keys.counter(subject, d)),
    ...dimensions.flatMap((d) => {
      if (d.windowed) return reading && pooled(subject, d) ? [keys.counter(interactiveOf(subject), d)] : []
      const q = keys.quotaHolds(subject)
      return [q.holds, q.held]
    }),
  ]
}

/** A charge's third script argument in a settle: '1' for a windowed counter, the call's hold member for a lifetime one. */
const kindOf = (c: { readonly windowed: boolean; readonly cost: number }, hold: string): string =>
  c.windowed ? '1' : holdMember(hold, c.cost)

/** As kindOf, in an admission or a peek of `subject`: 'p' for a batch line's windowed counter (pools.ts). */
const readKindOf = (
  subject: Subject,
  c: { readonly name: DimensionName; readonly windowed: boolean; readonly cost: number },
  hold: string,
): string => (c.windowed && pooled(subject, c) ? 'p' : kindOf(c, hold))

/** ADMIT's reply for one admission, from `at` in `reply`. */
function admitResult(
  reply: readonly number[],
  at: number,
  charges: readonly Charge[],
  budgets: readonly BudgetCharge[],
): AdmitResult {
  const now = reply[at + 1] ?? 0
  const states = charges.map((c, i) => {
    const state = stateAt(now, reply[at + 2 + 2 * i] ?? 0, reply[at + 3 + 2 * i] ?? 0)
    // The quota never resets; the window is its held counter's, for the settle to match.
    return c.windowed ? state : { ...state, resetMs: 0 }
  })
  const after = at + 2 + 2 * charges.length
  return {
    admitted: reply[at] === 1,
    states,
    budgets: budgets.map((_, j) => budgetStateAt(reply, after + 2 * j)),
  }
}

function integers(reply: unknown, length: number, atLeast = false): number[] {
  if (
    !Array.isArray(reply) ||
    (atLeast ? reply.length < length : reply.length !== length) ||
    !reply.every((v) => typeof v === 'number')
  ) {
    throw new Error(`unexpected reply from the rate-limit script: ${JSON.stringify(reply)}`)
  }
  return reply
}

function stateAt(now: number, used: number, ttl: number): CounterState {
  // A lifetime counter (ttl -1) has no window; an empty window is full right now.
  if (ttl <= 0 || used <= 0) return { used: Math.max(used, 0), resetMs: 0, expiresAt: ttl > 0 ? now + ttl : 0 }
  return { used, resetMs: ttl, expiresAt: now + ttl }
}

function budgetStateAt(reply: readonly number[], at: number): BudgetState {
  return { spent: Math.max(reply[at] ?? 0, 0), held: Math.max(reply[at + 1] ?? 0, 0) }
}

export interface RedisCounters extends Counters {
  /**
   * True when the counters' masters answer: on a cluster every master (counters live on
   * every one, by owner), each asked itself; otherwise a read of a key (the server, or
   * Sentinel's master).
   */
  reachable(): Promise<boolean>
  /** Renews the leases of these calls' holds (calls still running here: holds.ts). */
  renew(calls: readonly HeldCall[]): Promise<void>
  /**
   * Loads each script into every master (SCRIPT LOAD), so they have them cached. A fresh
   * master (a start, a failover: replicas do not keep the script cache) would otherwise
   * meet the first burst of calls with a NOSCRIPT each and a full EVAL after it.
   */
  warm(): Promise<void>
}

/**
 * Counters on `redis`. Settles go on `settlements` when given: a connection that sends the
 * writes of one event-loop turn together. On one server a turn's admissions join them (they
 * are sent at the turn's end either way: turnBatches); on a cluster they stay on `redis`,
 * which sends each at once: they have a deadline.
 */
export function redisCounters(
  redis: RedisConnection,
  prefix: string,
  windowMs: number,
  settlements: RedisConnection = redis,
  leaseMs: number = DEFAULT_LEASE_MS,
): RedisCounters {
  const keys = limiterKeys(prefix)
  const corkTurn = turnWrites(redis)
  // On one server a turn's admissions go on the settlements connection, whose socket is corked
  // for the turn: they leave in the turn's one write with its settles and usage rows
  // (turn-batches.ts), one system call where there were two. On a cluster that connection
  // pipelines (ioredis's auto-pipelining), which would hold an admission behind a pipeline in flight.
  const admitting = !isCluster(redis) && !isCluster(settlements) ? settlements : redis

  /**
   * The admissions without budgets made in one turn of the event loop, by slot: one
   * ADMIT_TURN each, sent at the end of the turn, when the corked admissions would have left
   * anyway (the limiter's deadline starts after it: outage.ts bounded). Each admission is
   * taken as ADMIT takes it, in the order they were made.
   */
  const admissionsOf = turnBatches(
    (): TurnAdmissions => ({ names: [], args: [windowMs, 0, leaseMs], admissions: 0, replied: 0 }),
    async ({ names, args, admissions, replied }) => {
      args[1] = admissions
      return integers(await runScript(admitting, SCRIPTS.admitTurn, names, args), replied)
    },
  )
  function admitInTurn(subject: Subject, charges: readonly Charge[], hold: string): Promise<AdmitResult> {
    const { batch, sent } = admissionsOf(keys.slot(subject))
    const at = batch.replied
    batch.replied += 2 + 2 * charges.length
    batch.admissions += 1
    batch.names.push(...keysOf(keys, subject, charges, true))
    batch.args.push(charges.length)
    for (const c of charges) batch.args.push(c.limit, c.cost, readKindOf(subject, c, hold))
    return sent.then((reply) => admitResult(reply, at, charges, []))
  }

  /** One ADMIT on one slot: a subject's charges (none: a tenant's reservation) and budgets there. */
  async function admitOn(
    subject: Subject | null,
    charges: readonly Charge[],
    budgets: readonly BudgetCharge[],
    hold: string,
  ): Promise<AdmitResult> {
    const args: (string | number)[] = [windowMs, charges.length, leaseMs]
    for (const c of charges)
      args.push(c.limit, c.cost, subject === null ? kindOf(c, hold) : readKindOf(subject, c, hold))
    const names = subject === null ? [] : keysOf(keys, subject, charges, true)
    for (const b of budgets) {
      args.push(b.spec.amountNanos, b.cost, holdMember(b.hold, b.cost))
      const k = keys.budget(b)
      names.push(k.spent, k.holds, k.held)
    }
    corkTurn()
    const reply = integers(
      await runScript(redis, SCRIPTS.admit, names, args),
      2 + 2 * charges.length + 2 * budgets.length,
    )
    return admitResult(reply, 0, charges, budgets)
  }

  /** Gives back reservations made on another slot (a tenant's) that the key's admission then refused. */
  async function release(budgets: readonly BudgetCharge[]): Promise<void> {
    await runScript(
      redis,
      SCRIPTS.release,
      budgets.flatMap((b) => {
        const k = keys.budget(b)
        return [k.holds, k.held]
      }),
      budgets.flatMap((b) => [b.cost, holdMember(b.hold, b.cost)]),
    )
  }

  /**
   * The settles without budgets made in one turn of the event loop, by slot: one SETTLE each
   * at the end of the turn (the script takes any number of adjustments, each on its own keys:
   * the counters in order, then the held counters of the lifetime ones, in the same order).
   * Under concurrency a turn ends several calls of a key, and each was a script of its own.
   */
  const settlesOf = turnBatches(
    (): TurnSettles => ({ counters: [], held: [], args: [] }),
    async ({ counters, held, args }) => {
      const reply = await runScript(
        settlements,
        SCRIPTS.settle,
        [...counters, ...held],
        [windowMs, counters.length, ...args],
      )
      integers(reply, 0, true)
    },
  )
  function settleInTurn(subject: Subject, adjustments: readonly Adjustment[]): Promise<void> {
    const { batch, sent } = settlesOf(keys.slot(subject))
    for (const a of adjustments) {
      batch.counters.push(keys.counter(subject, a))
      if (!a.windowed) {
        const q = keys.quotaHolds(subject)
        batch.held.push(q.holds, q.held)
      }
      batch.args.push(
        a.delta,
        kindOf({ windowed: a.windowed, cost: a.reserved }, a.hold ?? ''),
        a.expiresAt,
        a.reserved,
      )
    }
    return sent
  }

  /** One SETTLE on one slot (its budgets' under a once id: the id's marker on that slot); crossings indexed into `budgets`. */
  async function settleOn(
    subject: Subject | null,
    adjustments: readonly Adjustment[],
    budgets: readonly BudgetSettle[],
    once?: OnceCharge,
  ): Promise<BudgetCrossing[]> {
    if (adjustments.length === 0 && budgets.length === 0) return []
    const args: (string | number)[] = [windowMs, adjustments.length]
    for (const a of adjustments)
      args.push(a.delta, kindOf({ windowed: a.windowed, cost: a.reserved }, a.hold ?? ''), a.expiresAt, a.reserved)
    const names = subject === null ? [] : keysOf(keys, subject, adjustments)
    for (const b of budgets) {
      const c = b.charge
      args.push(b.real, c.cost, holdMember(c.hold, c.cost), c.ttlMs, c.spec.amountNanos, c.spec.thresholds.join(','))
      const k = keys.budget(c)
      names.push(k.spent, k.holds, k.held, k.fired)
    }
    const first = budgets[0]
    if (once !== undefined && first !== undefined) {
      names.push(keys.once(keys.budgetSlot(first.charge), once.id))
      args.push(Math.max(1, Math.round(once.keepMs)))
    }
    const reply = integers(await runScript(settlements, SCRIPTS.settle, names, args), budgets.length, true)
    const crossings: BudgetCrossing[] = []
    for (let k = budgets.length; k + 1 < reply.length; k += 2) {
      const index = (reply[k] ?? 1) - 1
      crossings.push({ index, threshold: reply[k + 1] ?? 0, spent: reply[index] ?? 0 })
    }
    return crossings
  }

  async function peekBudgetsOn(budgets: readonly BudgetCharge[]): Promise<BudgetState[]> {
    const names = budgets.flatMap((b) => {
      const k = keys.budget(b)
      return [k.spent, k.holds, k.held]
    })
    const reply = integers(await runScript(redis, SCRIPTS.peekBudgets, names, []), 1 + 2 * budgets.length)
    return budgets.map((_, j) => budgetStateAt(reply, 1 + 2 * j))
  }

  async function peek(subject: Subject, dimensions: readonly Dimension[]): Promise<CounterState[]> {
    if (dimensions.length === 0) return []
    const reply = integers(
      await runScript(
        redis,
        SCRIPTS.peek,
        keysOf(keys, subject, dimensions, true),
        dimensions.map((d) => (d.windowed ? readKindOf(subject, { ...d, cost: 0 }, '') : '0')),
      ),
      1 + 2 * dimensions.length,
    )
    const now = reply[0] ?? 0
    return dimensions.map((_, i) => stateAt(now, reply[1 + 2 * i] ?? 0, reply[2 + 2 * i] ?? 0))
  }

  const pick = <T>(items: readonly T[], at: readonly number[]): T[] => at.map((i) => items[i] as T)

  return {
    kind: 'redis',
    async reachable() {
      if (!isCluster(redis)) {
        // Both connections that admit: the one a turn's admissions use may be the settlements'.
        const replies = await Promise.all([...new Set([redis, admitting])].map((c) => c.exists(`${keys.base}probe`)))
        return replies.every((reply) => typeof reply === 'number')
      }
      const masters = redis.nodes('master')
      const replies = await Promise.all(masters.map((node) => node.ping()))
      return masters.length > 0 && replies.every((reply) => reply === 'PONG')
    },
    async renew(calls) {
      // Each hold as its set, its sum, its member and its cost, grouped by slot: one script a
      // slot (the holds of one owner, or of one tenant, share it).
      const held: Array<{ slot: string; keys: [string, string]; member: string; cost: number }> = []
      for (const call of calls) {
        if (call.quota > 0) {
          const q = keys.quotaHolds(call.subject)
          held.push({
            slot: keys.slot(call.subject),
            keys: [q.holds, q.held],
            member: holdMember(call.hold, call.quota),
            cost: call.quota,
          })
        }
        for (const b of call.budgets) {
          if (b.cost <= 0) continue
          const k = keys.budget(b)
          held.push({
            slot: keys.budgetSlot(b),
            keys: [k.holds, k.held],
            member: holdMember(b.hold, b.cost),
            cost: b.cost,
          })
        }
      }
      const groups = bySlot(held, (h) => h.slot, '')
      await Promise.all(
        groups.away.map((at) =>
          runScript(
            settlements,
            SCRIPTS.renew,
            pick(held, at).flatMap((h) => h.keys),
            [leaseMs, ...pick(held, at).flatMap((h) => [h.member, h.cost])],
          ),
        ),
      )
    },
    async warm() {
      // The counters are on every master now (by owner): each gets every script.
      const nodes = isCluster(redis) ? redis.nodes('master') : [redis]
      await Promise.all(nodes.flatMap((node) => Object.values(SCRIPTS).map((s) => node.script('LOAD', s.source))))
    },
    async admit(subject, charges, budgets = [], hold = '') {
      if (budgets.length === 0 && charges.length > 0) return admitInTurn(subject, charges, hold)
      const { here, away } = bySlot(budgets, (b) => keys.budgetSlot(b), keys.slot(subject))
      if (away.length === 0) return admitOn(subject, charges, budgets, hold)
      // A tenant budget: reserve on its slot first, then the key's own admission.
      const found: BudgetState[] = []
      const reserved = await Promise.all(away.map((at) => admitOn(null, [], pick(budgets, at), hold)))
      for (const [g, at] of away.entries())
        for (const [j, i] of at.entries()) found[i] = reserved[g]?.budgets[j] ?? EMPTY_BUDGET
      const ownBudgets = pick(budgets, here)
      let own: AdmitResult
      if (reserved.every((r) => r.admitted)) {
        // Should this throw (Redis away), the tenant's hold lapses with its lease (nothing renews it).
        own =
          charges.length === 0 && ownBudgets.length === 0
            ? { admitted: true, states: [], budgets: [] }
            : await admitOn(subject, charges, ownBudgets, hold)
      } else {
        // Refused by the tenant: the key's counters as they stand, for the headers and the refusal.
        const [states, ownStates] = await Promise.all([
          peek(subject, charges),
          ownBudgets.length === 0 ? Promise.resolve([]) : peekBudgetsOn(ownBudgets),
        ])
        own = {
          admitted: false,
          states: states.map((s, i) => (charges[i]?.windowed === false ? { ...s, resetMs: 0 } : s)),
          budgets: ownStates,
        }
      }
      if (!own.admitted) {
        // What was reserved on another slot goes back. Should that fail, the hold lapses
        // with its lease: refused calls held budget for a while, the safe side.
        await Promise.all(
          away.map((at, g) =>
            reserved[g]?.admitted === true ? release(pick(budgets, at)).catch(() => undefined) : undefined,
          ),
        )
      }
      for (const [j, i] of here.entries()) found[i] = own.budgets[j] ?? EMPTY_BUDGET
      return { admitted: own.admitted, states: own.states, budgets: found } satisfies AdmitResult
    },
    async settle(subject, adjustments, budgets = [], once) {
      if (adjustments.length === 0 && budgets.length === 0) return []
      if (budgets.length === 0) {
        await settleInTurn(subject, adjustments)
        return []
      }
      const { here, away } = bySlot(budgets, (b) => keys.budgetSlot(b.charge), keys.slot(subject))
      const groups = [here, ...away]
      const replies = await Promise.all(
        groups.map((at, g) => settleOn(g === 0 ? subject : null, g === 0 ? adjustments : [], pick(budgets, at), once)),
      )
      return replies.flatMap((crossings, g) => crossings.map((c) => ({ ...c, index: groups[g]?.[c.index] ?? c.index })))
    },
    async peekBudgets(budgets) {
      if (budgets.length === 0) return []
      const first = budgets[0]
      const { here, away } = bySlot(budgets, (b) => keys.budgetSlot(b), first ? keys.budgetSlot(first) : '')
      const groups = [here, ...away]
      const replies = await Promise.all(groups.map((at) => peekBudgetsOn(pick(budgets, at))))
      const out: BudgetState[] = []
      for (const [g, at] of groups.entries())
        for (const [j, i] of at.entries()) out[i] = replies[g]?.[j] ?? EMPTY_BUDGET
      return out
    },
    peek,
  }
}

// Deployment capacity in Redis, shared by every instance: one EVALSHA per acquire checks
// all of a model's candidate deployments and takes the chosen one's slot, so three
// instances racing for the last in-flight slot cannot all win. The rule is memory.ts's,
// line for line (the contract tests hold both to it).
//
// Per deployment, under `<prefix>{c:<pool>}:cap:<id>:`, where the pool is the set of
// deployments one call may choose among (create.ts poolsOf: a model's deployments, joined
// with another model's when they share one). One hash tag per pool keeps ACQUIRE one script
// on a cluster, and spreads the pools (and so the per-call scripts) over its masters:
//   c  cooldown: the epoch ms it ends, expiring then
//   f  in-flight: a sorted set of lease ids scored by when each frees itself, so a killed
//      instance's slots free themselves after leaseTtlMs (expired members are dropped
//      before counting)
//   l  learned: a hash of rr/ra (remaining requests, until when it holds), rl (the whole quota
//      of requests, when stated) and tr/ta/tl (tokens)
//   r  requests, t tokens: hashes of bucket index → count, the window's buckets
// Times are the injected clock's (the instances' own, NTP-close), not Redis's TIME, so a
// test can hold a cooldown to the millisecond.
//
// Nothing here lasts: windows of a minute, cooldowns and learned figures of seconds, leases
// that free themselves after leaseTtlMs. So state is not carried over when its slot changes:
// a reload that joins or splits pools, and an upgrade from the single `{tg}` layout (issue
// #25: `<prefix>{tg}:cap:`), start the moved deployments' counts afresh. Until the old
// counts run out (a minute; leases held then, at most leaseTtlMs) a deployment may be sent up
// to twice its declared figures, and the gateways of an upgrade still running the old layout
// count apart from the new; the upstream's own limits still hold (a 429 cools it down).
import type { RedisConnection } from '../store/redis-client.ts'
import { capacityNamespace, redisNamespace, runScript, script, withRedis, type Script } from '../store/redis-kit.ts'
import type {
  CandidateSpec,
  CapacityRules,
  CapacityStore,
  DeploymentState,
  RefusalReason,
  StoreAcquired,
} from './port.ts'
import { DEFAULT_RULES } from './port.ts'

const KEYS_PER_DEPLOYMENT = 5

// KEYS: c, f, l, r, t per candidate. ARGV: now, lease id, tokens, random, bucket ms,
// buckets, busy retry ms, lease ttl ms, learned hold ms; then weight, rpm, tpm,
// maxConcurrent per candidate.
//
// A taught figure that reached its reset is not simply forgotten: every caller that was
// told to come back then would find the deployment unlimited at once and rush it (most of
// them into a 429). It is renewed for a hold. On a fixed window (the deployment's `window:
// fixed`: its reset is when the limit is whole again, as OpenAI, Azure and Anthropic document
// it) whose answer stated its whole quota (x-ratelimit-limit-*, kept in rl/tl), with that
// quota, so a burst into the fresh window is served up to its room; less the calls granted
// before and not answered yet (ua, ut: they may reach the upstream in the new window), and
// at least one call. Otherwise (a sliding log, whose reset frees only its oldest calls), with
// what was left plus one call. The next answer teaches the rest. A
// renewed figure whose hold passes with nothing taught is dropped (rn/tn mark renewal).
// The hash also keeps the running totals of requests (sq) and tokens (sk) granted, which
// RELEASE corrects an answer with.
// It keeps too the calls (ua) and tokens (ut) granted and not answered yet, counted while
// a figure is live (a release then reaches the store anyway) and forgotten when none is.
// Returns {1, chosen index (0-based), bucket, requests granted, tokens granted, unanswered
// calls and tokens before this one, counted (1/0)} or {0, reason (1 cooling, 2 full, 3 too
// large), retry at or -1}.
const ACQUIRE = script(
  `
local now, lease, tokens, rand = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local bucketMs, B, busy, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local hold = tonumber(ARGV[9])
local cur = math.floor(now / bucketMs)
local n = (#ARGV - 9) / 4
local per = math.max(tokens, 1)

local function window(key, cost, limit)
  local flat = redis.call('HGETALL', key)
  local counts, used = {}, 0
  for j = 1, #flat, 2 do
    local index = tonumber(flat[j])
    if index < cur - B then
      redis.call('HDEL', key, flat[j])
    else
      local c = tonumber(flat[j + 1])
      counts[index] = c
      used = used + c
    end
  end
  if used + cost <= limit then return used, nil end
  local left = used
  for index = cur - B, cur do
    left = left - (counts[index] or 0)
    if left + cost <= limit then return used, (index + B + 1) * bucketMs end
  end
  return used, (cur + B + 1) * bucketMs
end

local function learned(key, field, till)
  local v = redis.call('HMGET', key, field, till)
  if v[1] and v[2] and tonumber(v[2]) > now then return tonumber(v[1]), tonumber(v[2]) end
  return nil, nil
end

-- A taught figure past its reset is renewed for a hold with its whole quota less the calls
-- unanswered (at least cost), or, no quota stated, with what was left plus cost; a renewed one is dropped.
local function renew(key, field, till, mark, cost, whole, unanswered)
  local v = redis.call('HMGET', key, field, till, mark, whole, unanswered)
  if not (v[1] and v[2]) or tonumber(v[2]) > now then return end
  if v[3] then
    redis.call('HDEL', key, field, till, mark, whole)
    return
  end
  local left = math.max(tonumber(v[1]), 0) + cost
  if v[4] then left = math.max(tonumber(v[4]) - tonumber(v[5] or '0'), cost) end
  redis.call('HSET', key, field, left, till, now + hold, mark, 1)
  if redis.call('PTTL', key) < hold then redis.call('PEXPIRE', key, hold) end
end

local stand = {}
for i = 1, n do
  local a, k = 9 + 4 * (i - 1), KEYS_PER * (i - 1)
  local s = { weight = tonumber(ARGV[a + 1]), rpm = tonumber(ARGV[a + 2]), tpm = tonumber(ARGV[a + 3]), maxc = tonumber(ARGV[a + 4]),
    large = false, blocked = false, cooling = false, freeAt = now, headroom = math.huge }
  local function block(at)
    s.blocked = true
    if at > s.freeAt then s.freeAt = at end
  end
  if s.tpm > 0 and tokens > s.tpm then
    s.large = true
    s.blocked = true
  else
    local cool = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
    if cool > now then s.cooling = true; block(cool) end
    if s.rpm > 0 then
      local used, at = window(KEYS[k + 4], 1, s.rpm)
      if at then block(at) end
      s.headroom = math.min(s.headroom, s.rpm - used)
    end
    if s.tpm > 0 then
      local used, at = window(KEYS[k + 5], tokens, s.tpm)
      if at then block(at) end
      s.headroom = math.min(s.headroom, math.floor((s.tpm - used) / per))
    end
    if s.maxc > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 2], '-inf', now)
      local f = redis.call('ZCARD', KEYS[k + 2])
      if f >= s.maxc then block(now + busy) end
      s.headroom = math.min(s.headroom, s.maxc - f)
    end
    renew(KEYS[k + 3], 'rr', 'ra', 'rn', 1, 'rl', 'ua')
    renew(KEYS[k + 3], 'tr', 'ta', 'tn', tokens, 'tl', 'ut')
    local rr, ra = learned(KEYS[k + 3], 'rr', 'ra')
    if rr then
      s.rr = true
      if rr < 1 then block(ra) end
      s.headroom = math.min(s.headroom, rr)
    end
    local tr, ta = learned(KEYS[k + 3], 'tr', 'ta')
    if tr then
      s.tr = true
      if tr < tokens then block(ta) end
      s.headroom = math.min(s.headroom, math.floor(tr / per))
    end
    if s.headroom < 0 then s.headroom = 0 end
  end
  stand[i] = s
end

local open, finite = {}, nil
for i = 1, n do
  local s = stand[i]
  if not s.blocked and s.headroom >= 1 then
    open[#open + 1] = i
    if s.headroom ~= math.huge and (finite == nil or s.headroom > finite) then finite = s.headroom end
  end
end
if #open == 0 then
  local retry, all_large, all_cooling = nil, true, true
  for i = 1, n do
    local s = stand[i]
    if not s.large then
      -- A call waits for this one: its next release that makes room says so (RELEASE publishes).
      local l = KEYS[KEYS_PER * (i - 1) + 3]
      redis.call('HSET', l, 'w', 1)
      if redis.call('PTTL', l) < ttl then redis.call('PEXPIRE', l, ttl) end
      all_large = false
      if not s.cooling then all_cooling = false end
      if retry == nil or s.freeAt < retry then retry = s.freeAt end
    end
  end
  if all_large then return { 0, 3, -1 } end
  if all_cooling then return { 0, 1, retry } end
  return { 0, 2, retry }
end
local unlimited = finite or 1
local scores, total = {}, 0
for j, i in ipairs(open) do
  local s = stand[i]
  local h = s.headroom
  if h == math.huge then h = unlimited end
  scores[j] = math.max(0, s.weight) * h
  total = total + scores[j]
end
local chosen = open[1]
if total > 0 then
  local target = rand * total
  chosen = open[#open]
  for j, i in ipairs(open) do
    target = target - scores[j]
    if target < 0 then chosen = i; break end
  end
end

local s, k = stand[chosen], KEYS_PER * (chosen - 1)
if s.rpm > 0 then
  redis.call('HINCRBY', KEYS[k + 4], cur, 1)
  redis.call('PEXPIRE', KEYS[k + 4], (B + 2) * bucketMs)
end
if s.tpm > 0 then
  redis.call('HINCRBY', KEYS[k + 5], cur, tokens)
  redis.call('PEXPIRE', KEYS[k + 5], (B + 2) * bucketMs)
end
if s.maxc > 0 then
  redis.call('ZADD', KEYS[k + 2], now + ttl, lease)
  redis.call('PEXPIRE', KEYS[k + 2], ttl)
end
if s.rr then redis.call('HINCRBY', KEYS[k + 3], 'rr', -1) end
if s.tr then redis.call('HINCRBY', KEYS[k + 3], 'tr', 0 - tokens) end
local l = KEYS[k + 3]
local sq = redis.call('HINCRBY', l, 'sq', 1)
local sk = redis.call('HINCRBY', l, 'sk', tokens)
local u = redis.call('HMGET', l, 'ua', 'ut')
local ua, ut = tonumber(u[1] or '0'), tonumber(u[2] or '0')
local counted = 0
if s.rr or s.tr then
  counted = 1
  redis.call('HINCRBY', l, 'ua', 1)
  redis.call('HINCRBY', l, 'ut', tokens)
elseif ua > 0 or ut > 0 then
  -- Nothing learned any more: whatever was left unanswered (a lost instance's calls) is forgotten.
  redis.call('HDEL', l, 'ua', 'ut')
end
if redis.call('PTTL', l) < ttl then redis.call('PEXPIRE', l, ttl) end
return { 1, chosen - 1, cur, sq, sk, ua, ut, counted }
`.replaceAll('KEYS_PER', String(KEYS_PER_DEPLOYMENT)),
)

// KEYS: c, f, l, r, t of one deployment. ARGV: now, lease id ('' none), bucket, bucket ms,
// buckets, rpm, tpm, requests delta, tokens delta, learned ('1' or '0'), cooldown until,
// remaining requests, until, remaining tokens, until ('' where unknown), learned hold ms,
// the lease's grant mark ('' when not from a lease): requests and tokens granted, calls and
// tokens unanswered before it, its own tokens, counted ('1' or '0'); the room channel and
// the deployment's id. When a call was refused on this deployment ('w', set by ACQUIRE) and
// this release made room (a slot freed, a reservation given back, a figure taught with
// something left), it publishes the id on the room channel, once per refusal. Then: announce
// ('1': this instance's first lesson about the deployment, published on the learned channel
// so the other instances start asking about it) and that channel; then the whole quota of
// requests and of tokens ('' where not stated, or not a fixed window's), and the earliest
// each reset can be ('' where none was named; port.ts LearnedUpdate).
const RELEASE = script(`
local now = tonumber(ARGV[1])
local room = false
if ARGV[2] ~= '' and redis.call('ZREM', KEYS[2], ARGV[2]) == 1 then room = true end
if tonumber(ARGV[8]) < 0 or tonumber(ARGV[9]) < 0 then room = true end
if ARGV[22] == '1' then
  if redis.call('HINCRBY', KEYS[3], 'ua', -1) < 0 then redis.call('HSET', KEYS[3], 'ua', 0) end
  if redis.call('HINCRBY', KEYS[3], 'ut', 0 - tonumber(ARGV[21])) < 0 then redis.call('HSET', KEYS[3], 'ut', 0) end
end
local bucket, bucketMs, B = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cur = math.floor(now / bucketMs)
local function add(key, delta)
  if delta == 0 then return end
  if bucket >= cur - B then
    if redis.call('HINCRBY', key, bucket, delta) < 0 then redis.call('HSET', key, bucket, 0) end
  elseif delta > 0 then
    redis.call('HINCRBY', key, cur, delta)
  else
    return
  end
  redis.call('PEXPIRE', key, (B + 2) * bucketMs)
end
if tonumber(ARGV[6]) > 0 then add(KEYS[4], tonumber(ARGV[8])) end
if tonumber(ARGV[7]) > 0 then add(KEYS[5], tonumber(ARGV[9])) end
-- Someone was refused here and room may have come back: the gateways' waiting lines hear of it.
local function tell()
  if room and redis.call('HDEL', KEYS[3], 'w') == 1 then redis.call('PUBLISH', ARGV[23], ARGV[24]) end
  return 1
end
if ARGV[10] ~= '1' then return tell() end
-- The first lesson this instance stores about the deployment: the others start asking about it.
if ARGV[25] == '1' then redis.call('PUBLISH', ARGV[26], ARGV[24]) end
local hold = tonumber(ARGV[16])
if ARGV[11] ~= '' then
  local till = tonumber(ARGV[11])
  if till > now and till > tonumber(redis.call('GET', KEYS[1]) or '0') then
    redis.call('SET', KEYS[1], ARGV[11], 'PX', math.ceil(till - now))
  end
end
local keep = 0
local function learn(field, value, tillField, till, renewed, mark, total, markBefore, unanswered, wholeField, whole, from)
  if value == '' then return end
  local at = now + hold
  if till ~= '' then at = tonumber(till) end
  local left = tonumber(value)
  local had = redis.call('HMGET', KEYS[3], field, tillField, renewed)
  local live = had[1] and had[2] and tonumber(had[2]) > now
  if mark == '' and live and tonumber(had[1]) < left then
    -- Not from a call granted here: it only lowers a live figure.
    return
  end
  -- A fixed window: an answer whose reset may be the one the figure held (renewed: the one it
  -- was renewed at) speaks of the window that ended. It would put back that window's count
  -- until a reset just past, where the whole limit would be given out a second time.
  if whole ~= '' and had[1] and had[2] and (had[3] or not live) then
    local boundary = tonumber(had[2])
    if had[3] then boundary = boundary - hold end
    local earliest = at
    if from ~= '' then earliest = tonumber(from) end
    if earliest <= boundary then return end
  end
  if mark ~= '' then
    -- What the answer says was left, less what may not have been counted when the upstream
    -- answered: the calls granted after its call, and those granted before it that are still
    -- unanswered (a refused one is never counted; counting it is only cautious).
    local since = tonumber(redis.call('HGET', KEYS[3], total) or '0') - tonumber(mark)
    if since > 0 then left = left - since end
    local said = left
    local before = math.min(tonumber(markBefore), tonumber(redis.call('HGET', KEYS[3], unanswered) or '0'))
    if before > 0 then left = left - before end
    -- A fixed window: the calls granted before it and unanswered were most likely counted in
    -- what it says (sent first), and taking them off again would waste them (a burst into a
    -- fresh window). A live figure has had every call granted here taken off since it was
    -- taught, so up to it, what the answer says less the calls granted after it holds; beyond
    -- it (another client of the upstream spent some), the cautious count does. Both would
    -- have to be wrong at once (a call sent first that arrived after it, and another client's
    -- spending) for the upstream to be sent one too many.
    if whole ~= '' and live then
      local held = math.min(tonumber(had[1]), said)
      if held > left then left = held end
    end
  end
  if had[1] and had[2] then
    -- An answer older than the figure held (a late release under load): a reset not after the
    -- renewal that already gave out what came back at it is dropped (a renewed figure holds
    -- from its renewal for a hold); one before the held reset only lowers the count. Either
    -- way the reset never moves back, which would give out again what came back at it.
    local stored = tonumber(had[2])
    if had[3] then
      if at <= stored - hold then return end
    elseif at < stored then
      if left < tonumber(had[1]) then redis.call('HSET', KEYS[3], field, left) end
      return
    end
  end
  redis.call('HSET', KEYS[3], field, left, tillField, at)
  -- The whole quota comes back at the reset only on a fixed window that named it (capacity.ts).
  if whole ~= '' then redis.call('HSET', KEYS[3], wholeField, whole) else redis.call('HDEL', KEYS[3], wholeField) end
  redis.call('HDEL', KEYS[3], renewed)
  if left >= 1 then room = true end
  if at - now > keep then keep = at - now end
end
learn('rr', ARGV[12], 'ra', ARGV[13], 'rn', ARGV[17], 'sq', ARGV[19], 'ua', 'rl', ARGV[27], ARGV[29])
learn('tr', ARGV[14], 'ta', ARGV[15], 'tn', ARGV[18], 'sk', ARGV[20], 'ut', 'tl', ARGV[28], ARGV[30])
-- Kept a hold past the reset, so that the first call after it finds the figure and renews it.
if keep > 0 and redis.call('PTTL', KEYS[3]) < keep + hold then redis.call('PEXPIRE', KEYS[3], math.ceil(keep + hold)) end
return tell()
`)

// KEYS: f. ARGV: lease id, now, lease ttl ms. Returns 1 if the lease still held its slot.
const RENEW = script(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 1
`)

// KEYS: c, f, l, r, t per deployment. ARGV: now, bucket ms, buckets. Returns per
// deployment: in flight, requests, tokens, cooling until (0 none), has rr, rr, has tr, tr,
// until when rr holds, until when tr holds.
const INSPECT_FIELDS = 10
type Tuple<T, N extends number, R extends T[] = []> = R['length'] extends N ? R : Tuple<T, N, [...R, T]>
const INSPECT = script(
  `
local now, bucketMs, B = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = math.floor(now / bucketMs)
local function sum(key)
  local flat, used = redis.call('HGETALL', key), 0
  for j = 1, #flat, 2 do
    if tonumber(flat[j]) >= cur - B then used = used + tonumber(flat[j + 1]) end
  end
  return used
end
local out = {}
for k = 0, #KEYS - 1, KEYS_PER do
  local cool = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
  if cool <= now then cool = 0 end
  local l = redis.call('HMGET', KEYS[k + 3], 'rr', 'ra', 'tr', 'ta')
  local hasR = (l[1] and l[2] and tonumber(l[2]) > now) and 1 or 0
  local hasT = (l[3] and l[4] and tonumber(l[4]) > now) and 1 or 0
  local row = { redis.call('ZCOUNT', KEYS[k + 2], '(' .. now, '+inf'), sum(KEYS[k + 4]), sum(KEYS[k + 5]), cool,
    hasR, hasR == 1 and tonumber(l[1]) or 0, hasT, hasT == 1 and tonumber(l[3]) or 0,
    hasR == 1 and tonumber(l[2]) or 0, hasT == 1 and tonumber(l[4]) or 0 }
  for _, v in ipairs(row) do out[#out + 1] = v end
end
return out
`.replaceAll('KEYS_PER', String(KEYS_PER_DEPLOYMENT)),
)

/** The pool of a candidate that names none (CandidateSpec.pool). */
const ALL = '*'

/** Key names of a deployment (c, f, l, r, t), on its pool's slot. */
export function capacityKeys(prefix: string): { of(candidate: Pick<CandidateSpec, 'id' | 'pool'>): string[] } {
  // A bad prefix is refused now, not at the first call.
  capacityNamespace(prefix, ALL)
  return {
    of: ({ id, pool = ALL }) => {
      const at = `${capacityNamespace(prefix, pool)}cap:${encodeURIComponent(id)}:`
      return [`${at}c`, `${at}f`, `${at}l`, `${at}r`, `${at}t`]
    },
  }
}

/** One call picks within one pool (create.ts poolsOf), in one script on its slot. */
function checkOnePool(candidates: readonly CandidateSpec[]): void {
  const pools = new Set(candidates.map((c) => c.pool ?? ALL))
  if (pools.size > 1)
    throw new TypeError(`capacity candidates ${candidates.map((c) => c.id).join(', ')} are not of one pool`)
}

/** The channel on which a release that made room on a deployment a call waits for names it. */
export function capacityRoomChannel(prefix: string): string {
  return `${redisNamespace(prefix)}cap:room`
}

/** The channel on which an instance names a deployment it learned a limit of for the first time. */
export function capacityLearnedChannel(prefix: string): string {
  return `${redisNamespace(prefix)}cap:learned`
}

function integers(what: string, reply: unknown, length?: number): number[] {
  if (
    !Array.isArray(reply) ||
    (length !== undefined && reply.length !== length) ||
    !reply.every((v) => typeof v === 'number')
  ) {
    throw new TypeError(`the capacity ${what} script answered ${JSON.stringify(reply)}`)
  }
  return reply
}

const REASONS: Readonly<Record<number, RefusalReason>> = { 1: 'cooling_down', 2: 'full', 3: 'too_large' }

export interface RedisCapacityStore extends CapacityStore {
  /** Sends each script once in full, so the master has them cached before the first call. */
  warm(): Promise<void>
}

export function redisCapacityStore(
  redis: RedisConnection,
  prefix: string,
  rules: CapacityRules = DEFAULT_RULES,
): RedisCapacityStore {
  const keys = capacityKeys(prefix)
  const room = capacityRoomChannel(prefix)
  const learnedChannel = capacityLearnedChannel(prefix)
  const bucketMs = Math.ceil(rules.windowMs / rules.buckets)
  // Waits for the connection (a fresh one is not up yet); a Redis that is away is StoreUnavailableError.
  const run = (s: Script, keyNames: readonly string[], args: readonly (string | number)[]): Promise<unknown> =>
    withRedis(redis, () => runScript(redis, s, keyNames, args))
  const keysOf = (candidates: readonly CandidateSpec[]): string[] => candidates.flatMap((c) => keys.of(c))
  const orEmpty = (n: number | null): string | number => (n === null ? '' : n)

  return {
    kind: 'redis',
    rules,
    async warm() {
      await withRedis(redis, () =>
        Promise.all([ACQUIRE, RELEASE, RENEW, INSPECT].map((s) => redis.script('LOAD', s.source))),
      )
    },
    async acquire(request): Promise<StoreAcquired> {
      const args: (string | number)[] = [
        request.now,
        request.leaseId,
        request.tokens,
        request.random,
        bucketMs,
        rules.buckets,
        rules.busyRetryMs,
        rules.leaseTtlMs,
        rules.learnedHoldMs,
      ]
      for (const c of request.candidates) args.push(c.weight, c.rpm, c.tpm, c.maxConcurrent)
      checkOnePool(request.candidates)
      const reply = integers('acquire', await run(ACQUIRE, keysOf(request.candidates), args))
      const [ok, a, b, requests, tokens, unanswered, unansweredTokens, counted] = reply as [
        number,
        number,
        number,
        number?,
        number?,
        number?,
        number?,
        number?,
      ]
      if (ok === 1 && counted !== undefined)
        return {
          ok: true,
          index: a,
          bucket: b,
          granted: {
            requests: requests ?? 0,
            tokens: tokens ?? 0,
            unanswered: unanswered ?? 0,
            unansweredTokens: unansweredTokens ?? 0,
            own: request.tokens,
            counted: counted === 1,
          },
        }
      if (ok === 1) throw new TypeError(`the capacity acquire script answered ${JSON.stringify(reply)}`)
      return { ok: false, reason: REASONS[a] ?? 'full', retryAt: b < 0 ? null : b }
    },
    async release(release) {
      const c = release.candidate
      const l = release.learned
      const args: (string | number)[] = [
        release.now,
        release.leaseId ?? '',
        release.bucket,
        bucketMs,
        rules.buckets,
        c.rpm,
        c.tpm,
        release.requestsDelta,
        release.tokensDelta,
        l === null ? '0' : '1',
        orEmpty(l?.cooldownUntil ?? null),
        orEmpty(l?.requestsRemaining ?? null),
        orEmpty(l?.requestsResetAt ?? null),
        orEmpty(l?.tokensRemaining ?? null),
        orEmpty(l?.tokensResetAt ?? null),
        rules.learnedHoldMs,
        orEmpty(release.granted?.requests ?? null),
        orEmpty(release.granted?.tokens ?? null),
        orEmpty(release.granted?.unanswered ?? null),
        orEmpty(release.granted?.unansweredTokens ?? null),
        orEmpty(release.granted?.own ?? null),
        release.granted?.counted === true ? '1' : '0',
        room,
        c.id,
        release.announce === true ? '1' : '0',
        learnedChannel,
        orEmpty(l?.requestsLimit ?? null),
        orEmpty(l?.tokensLimit ?? null),
        orEmpty(l?.requestsResetFrom ?? null),
        orEmpty(l?.tokensResetFrom ?? null),
      ]
      await run(RELEASE, keys.of(c), args)
    },
    async renew(candidate, leaseId, now) {
      const flights = keys.of(candidate)[1] as string
      return (await run(RENEW, [flights], [leaseId, now, rules.leaseTtlMs])) === 1
    },
    async inspect(candidates, now): Promise<DeploymentState[]> {
      if (candidates.length === 0) return []
      // One script per pool (the deployments of all models span several).
      const pools = new Map<string, number[]>()
      for (const [i, c] of candidates.entries()) pools.set(c.pool ?? ALL, [...(pools.get(c.pool ?? ALL) ?? []), i])
      const rows: number[][] = []
      await Promise.all(
        [...pools.values()].map(async (at) => {
          const some = at.map((i) => candidates[i] as CandidateSpec)
          const reply = integers(
            'inspect',
            await run(INSPECT, keysOf(some), [now, bucketMs, rules.buckets]),
            INSPECT_FIELDS * some.length,
          )
          for (const [j, i] of at.entries()) rows[i] = reply.slice(INSPECT_FIELDS * j, INSPECT_FIELDS * (j + 1))
        }),
      )
      return candidates.map((c, i) => {
        const row = rows[i] ?? []
        const [inFlight, requests, tokens, cooling, hasR, rr, hasT, tr, ra, ta] = row as Tuple<number, 10>
        return {
          deploymentId: c.id,
          inFlight,
          requests,
          tokens,
          coolingUntil: cooling > 0 ? cooling : null,
          learnedRequests: hasR === 1 ? rr : null,
          learnedTokens: hasT === 1 ? tr : null,
          learnedRequestsUntil: hasR === 1 ? ra : null,
          learnedTokensUntil: hasT === 1 ? ta : null,
        }
      })
    },
  }
}

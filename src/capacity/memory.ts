// Deployment capacity in this process: the embedded gateway's store. Same rule as the
// Lua in redis.ts (the contract tests hold both to it); atomic for free, since each call
// runs to its end without awaiting anything.
import type {
  CandidateSpec,
  CapacityRules,
  CapacityStore,
  DeploymentState,
  StoreAcquire,
  StoreAcquired,
  StoreRelease,
} from './port.ts'
import { DEFAULT_RULES } from './port.ts'

interface Learned {
  remaining: number
  /** It holds until then (epoch ms). */
  until: number
  /** Renewed at its reset for a hold (see redis.ts): when that passes with nothing taught, it is dropped. */
  renewed: boolean
  /** The whole quota (x-ratelimit-limit-*), on a fixed window that stated it: what comes back at the reset. */
  limit: number | null
}

interface Deployment {
  coolingUntil: number
  /** Lease id → when the slot frees itself. */
  readonly flights: Map<string, number>
  /** Bucket index → count. */
  readonly requests: Map<number, number>
  readonly tokens: Map<number, number>
  requestsLearned: Learned | null
  tokensLearned: Learned | null
  /** Requests and tokens granted so far: an answer is corrected by what was granted after its call (see redis.ts). */
  grantedRequests: number
  grantedTokens: number
  /** Calls granted and not answered yet (their lease not released), and their tokens. */
  unanswered: number
  unansweredTokens: number
}

/** Where a candidate stands for one call. */
interface Standing {
  readonly tooLarge: boolean
  readonly blocked: boolean
  readonly cooling: boolean
  /** When it may have room (meaningful when blocked). */
  readonly freeAt: number
  /** Calls like this one that still fit; Infinity when nothing limits it. */
  readonly headroom: number
}

export function memoryCapacityStore(rules: CapacityRules = DEFAULT_RULES): CapacityStore {
  const deployments = new Map<string, Deployment>()
  const bucketMs = Math.ceil(rules.windowMs / rules.buckets)

  function deployment(id: string): Deployment {
    let d = deployments.get(id)
    if (d === undefined) {
      d = {
        coolingUntil: 0,
        flights: new Map(),
        requests: new Map(),
        tokens: new Map(),
        requestsLearned: null,
        tokensLearned: null,
        grantedRequests: 0,
        grantedTokens: 0,
        unanswered: 0,
        unansweredTokens: 0,
      }
      deployments.set(id, d)
    }
    return d
  }

  /** Drops buckets that left the window; returns the count and, if `cost` does not fit under `limit`, when it will. */
  function window(
    buckets: Map<number, number>,
    now: number,
    cost: number,
    limit: number,
  ): { used: number; freeAt: number | null } {
    const current = Math.floor(now / bucketMs)
    let used = 0
    for (const [index, count] of buckets) {
      if (index < current - rules.buckets) buckets.delete(index)
      else used += count
    }
    if (used + cost <= limit) return { used, freeAt: null }
    let left = used
    for (let index = current - rules.buckets; index <= current; index++) {
      left -= buckets.get(index) ?? 0
      if (left + cost <= limit) return { used, freeAt: (index + rules.buckets + 1) * bucketMs }
    }
    return { used, freeAt: (current + rules.buckets + 1) * bucketMs }
  }

  function flightsAt(d: Deployment, now: number): number {
    for (const [lease, expiry] of d.flights) if (expiry <= now) d.flights.delete(lease)
    return d.flights.size
  }

  function learned(l: Learned | null, now: number): Learned | null {
    return l !== null && l.until > now ? l : null
  }

  /**
   * A taught figure past its reset is renewed for a hold (see redis.ts): on a fixed window
   * whose answer stated its limit (`limit`, set only then), with that whole limit less the
   * calls granted before and not answered yet (they may reach it in the new window), and at
   * least one call (`cost`); otherwise with what was left of it plus one call. The next
   * answer teaches the rest. A renewed figure past its hold is dropped.
   */
  function renewed(l: Learned | null, now: number, cost: number, unanswered: number): Learned | null {
    if (l === null || l.until > now) return l
    if (l.renewed) return null
    const remaining = l.limit === null ? Math.max(l.remaining, 0) + cost : Math.max(l.limit - unanswered, cost)
    return { remaining, until: now + rules.learnedHoldMs, renewed: true, limit: l.limit }
  }

  function stand(c: CandidateSpec, d: Deployment, now: number, tokens: number): Standing {
    if (c.tpm > 0 && tokens > c.tpm)
      return { tooLarge: true, blocked: true, cooling: false, freeAt: Infinity, headroom: 0 }
    const per = Math.max(tokens, 1)
    let blocked = false
    let freeAt = now
    let headroom = Infinity
    const block = (at: number): void => {
      blocked = true
      freeAt = Math.max(freeAt, at)
    }
    const cooling = d.coolingUntil > now
    if (cooling) block(d.coolingUntil)
    d.requestsLearned = renewed(d.requestsLearned, now, 1, d.unanswered)
    d.tokensLearned = renewed(d.tokensLearned, now, tokens, d.unansweredTokens)
    if (c.rpm > 0) {
      const w = window(d.requests, now, 1, c.rpm)
      if (w.freeAt !== null) block(w.freeAt)
      headroom = Math.min(headroom, c.rpm - w.used)
    }
    if (c.tpm > 0) {
      const w = window(d.tokens, now, tokens, c.tpm)
      if (w.freeAt !== null) block(w.freeAt)
      headroom = Math.min(headroom, Math.floor((c.tpm - w.used) / per))
    }
    if (c.maxConcurrent > 0) {
      const n = flightsAt(d, now)
      if (n >= c.maxConcurrent) block(now + rules.busyRetryMs)
      headroom = Math.min(headroom, c.maxConcurrent - n)
    }
    const r = learned(d.requestsLearned, now)
    if (r !== null) {
      if (r.remaining < 1) block(r.until)
      headroom = Math.min(headroom, r.remaining)
    }
    const t = learned(d.tokensLearned, now)
    if (t !== null) {
      if (t.remaining < tokens) block(t.until)
      headroom = Math.min(headroom, Math.floor(t.remaining / per))
    }
    return { tooLarge: false, blocked, cooling, freeAt, headroom: Math.max(headroom, 0) }
  }

  function add(buckets: Map<number, number>, index: number, delta: number, now: number): void {
    const current = Math.floor(now / bucketMs)
    if (index >= current - rules.buckets) buckets.set(index, Math.max(0, (buckets.get(index) ?? 0) + delta))
    else if (delta > 0) buckets.set(current, (buckets.get(current) ?? 0) + delta)
  }

  return {
    kind: 'memory',
    rules,
    async acquire(request: StoreAcquire): Promise<StoreAcquired> {
      const { now, tokens } = request
      const standings = request.candidates.map((c) => stand(c, deployment(c.id), now, tokens))
      const index = pick(request.candidates, standings, request.random)
      if (index === null) return refusal(standings)
      const c = request.candidates[index] as CandidateSpec
      const d = deployment(c.id)
      const bucket = Math.floor(now / bucketMs)
      if (c.rpm > 0) add(d.requests, bucket, 1, now)
      if (c.tpm > 0) add(d.tokens, bucket, tokens, now)
      if (c.maxConcurrent > 0) d.flights.set(request.leaseId, now + rules.leaseTtlMs)
      const { unanswered, unansweredTokens } = d
      const r = learned(d.requestsLearned, now)
      if (r !== null) r.remaining -= 1
      const t = learned(d.tokensLearned, now)
      if (t !== null) t.remaining -= tokens
      const counted = r !== null || t !== null
      d.grantedRequests += 1
      d.grantedTokens += tokens
      if (counted) {
        d.unanswered += 1
        d.unansweredTokens += tokens
      } else if (unanswered > 0 && d.requestsLearned === null && d.tokensLearned === null) {
        // Nothing learned any more: whatever was left unanswered (a lost instance's calls) is forgotten.
        d.unanswered = 0
        d.unansweredTokens = 0
      }
      return {
        ok: true,
        index,
        bucket,
        granted: {
          requests: d.grantedRequests,
          tokens: d.grantedTokens,
          unanswered,
          unansweredTokens,
          own: tokens,
          counted,
        },
      }
    },
    async release(release: StoreRelease): Promise<void> {
      const { now, candidate: c } = release
      const d = deployment(c.id)
      if (release.leaseId !== null) d.flights.delete(release.leaseId)
      if (release.granted?.counted === true) {
        d.unanswered = Math.max(0, d.unanswered - 1)
        d.unansweredTokens = Math.max(0, d.unansweredTokens - release.granted.own)
      }
      if (c.rpm > 0 && release.requestsDelta !== 0) add(d.requests, release.bucket, release.requestsDelta, now)
      if (c.tpm > 0 && release.tokensDelta !== 0) add(d.tokens, release.bucket, release.tokensDelta, now)
      const l = release.learned
      if (l === null) return
      if (l.cooldownUntil !== null && l.cooldownUntil > now) d.coolingUntil = Math.max(d.coolingUntil, l.cooldownUntil)
      // What an answer says was left, less what may not have been counted when the upstream
      // answered: the calls granted after its call, and those granted before it that are
      // still unanswered (a refused one is never counted; counting it is only cautious).
      const since = release.granted
      const before = since === null ? 0 : Math.min(since.unanswered, d.unanswered)
      const beforeTokens = since === null ? 0 : Math.min(since.unansweredTokens, d.unansweredTokens)
      const learn = (
        had: Learned | null,
        remaining: number,
        until: number | null,
        from: number | null | undefined,
        after: number | null,
        before: number,
        limit: number | null | undefined,
      ): Learned => {
        const at = until ?? now + rules.learnedHoldMs
        const whole = limit ?? null
        // Not from a call granted here (an observation outside a lease): it only lowers a live figure.
        if (after === null && had !== null && had.until > now && had.remaining < remaining) return had
        // A fixed window (see redis.ts): an answer whose reset may be the one the figure held
        // (renewed: the one it was renewed at) speaks of the window that ended. It would put
        // back that window's count until a reset just past, where the whole limit would be
        // given out a second time.
        if (whole !== null && had !== null && (had.renewed || had.until <= now)) {
          const boundary = had.renewed ? had.until - rules.learnedHoldMs : had.until
          if ((from ?? at) <= boundary) return had
        }
        let left = after === null ? remaining : remaining - Math.max(0, after) - before
        // A fixed window: the calls granted before it and unanswered were most likely counted
        // in what it says (sent first), and taking them off again would waste them (a burst
        // into a fresh window). A live figure has had every call granted here taken off since
        // it was taught, so up to it, what the answer says less the calls granted after it
        // holds; beyond it (another client of the upstream spent some), the cautious count
        // does. See redis.ts.
        if (whole !== null && after !== null && had !== null && had.until > now)
          left = Math.max(left, Math.min(had.remaining, remaining - Math.max(0, after)))
        // An answer older than the figure held (a late release under load): a reset not after the
        // renewal that already gave out what came back at it is dropped (a renewed figure holds
        // from its renewal for a hold); one before the held reset only lowers the count. Either
        // way the reset never moves back, which would give out again what came back at it.
        if (had !== null && (had.renewed ? at <= had.until - rules.learnedHoldMs : at < had.until))
          return had.renewed || had.remaining <= left ? had : { ...had, remaining: left }
        return { remaining: left, until: at, renewed: false, limit: whole }
      }
      if (l.requestsRemaining !== null)
        d.requestsLearned = learn(
          d.requestsLearned,
          l.requestsRemaining,
          l.requestsResetAt,
          l.requestsResetFrom,
          since === null ? null : d.grantedRequests - since.requests,
          before,
          l.requestsLimit,
        )
      if (l.tokensRemaining !== null)
        d.tokensLearned = learn(
          d.tokensLearned,
          l.tokensRemaining,
          l.tokensResetAt,
          l.tokensResetFrom,
          since === null ? null : d.grantedTokens - since.tokens,
          beforeTokens,
          l.tokensLimit,
        )
    },
    async renew({ id: deploymentId }: CandidateSpec, leaseId: string, now: number): Promise<boolean> {
      const d = deployment(deploymentId)
      const expiry = d.flights.get(leaseId)
      if (expiry === undefined || expiry <= now) return false
      d.flights.set(leaseId, now + rules.leaseTtlMs)
      return true
    },
    async inspect(candidates: readonly CandidateSpec[], now: number): Promise<DeploymentState[]> {
      return candidates.map((c) => {
        const d = deployment(c.id)
        return {
          deploymentId: c.id,
          inFlight: flightsAt(d, now),
          requests: window(d.requests, now, 0, Infinity).used,
          tokens: window(d.tokens, now, 0, Infinity).used,
          coolingUntil: d.coolingUntil > now ? d.coolingUntil : null,
          learnedRequests: learned(d.requestsLearned, now)?.remaining ?? null,
          learnedTokens: learned(d.tokensLearned, now)?.remaining ?? null,
          learnedRequestsUntil: learned(d.requestsLearned, now)?.until ?? null,
          learnedTokensUntil: learned(d.tokensLearned, now)?.until ?? null,
        }
      })
    },
  }
}

/**
 * The weighted pick among candidates with room: weight × headroom, where a candidate that
 * nothing limits counts as much headroom as the roomiest limited one (1 if none is).
 */
function pick(candidates: readonly CandidateSpec[], standings: readonly Standing[], random: number): number | null {
  const open = standings.flatMap((s, i) => (s.blocked || s.headroom < 1 ? [] : [i]))
  if (open.length === 0) return null
  const finite = open.map((i) => standings[i]?.headroom ?? 0).filter((h) => Number.isFinite(h))
  const unlimited = finite.length === 0 ? 1 : Math.max(...finite)
  const scores = open.map((i) => {
    const h = standings[i]?.headroom ?? 0
    return Math.max(0, candidates[i]?.weight ?? 0) * (Number.isFinite(h) ? h : unlimited)
  })
  const total = scores.reduce((a, b) => a + b, 0)
  if (total <= 0) return open[0] ?? null
  let target = random * total
  for (const [k, i] of open.entries()) {
    target -= scores[k] ?? 0
    if (target < 0) return i
  }
  return open[open.length - 1] ?? null
}

function refusal(standings: readonly Standing[]): StoreAcquired {
  const fitting = standings.filter((s) => !s.tooLarge)
  if (fitting.length === 0) return { ok: false, reason: 'too_large', retryAt: null }
  const retryAt = Math.min(...fitting.map((s) => s.freeAt))
  return { ok: false, reason: fitting.every((s) => s.cooling) ? 'cooling_down' : 'full', retryAt }
}

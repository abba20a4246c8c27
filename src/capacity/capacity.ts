// The DeploymentCapacity the corridor holds, over either store. It keeps here what must
// not differ between stores: which deployments are worth a store call at all (those with
// a declared limit, and those this instance has learned something about), the leases and
// their release-once rule, and what happens when the store fails (pick by weight and go:
// the upstream's own limits still hold, and the next response teaches the rest).
//
// A deployment becomes tracked on the first response that teaches something (a quota
// header, a 429, a 503), on this instance or, announced over the store's pub/sub, on
// another (learnedElsewhere). Until then it does not ask the store: a deployment never
// limited anywhere costs no store call.
import { randomUUID } from 'node:crypto'
import type {
  Acquisition,
  CandidateSpec,
  CapacityEstimate,
  CapacityLease,
  CapacityStore,
  CapacityUsage,
  DeploymentCapacity,
  DeploymentDeclaration,
  GrantMark,
  LearnedUpdate,
} from './port.ts'
import { teaches, type UpstreamObservation } from './upstream-headers.ts'

export interface CapacityOptions {
  /** Declarations by deployment id; a deployment absent here has weight 1 and no limits. */
  readonly deployments: Readonly<Record<string, DeploymentDeclaration>>
  /** Each deployment's pool (create.ts poolsOf); without it, all are one pool. */
  readonly pools?: Readonly<Record<string, string>>
  readonly now?: () => number
  /** A number in [0, 1) per weighted pick. */
  readonly random?: () => number
  /** Store failures, for the log and metrics; the call goes on without capacity. */
  readonly onError?: (error: unknown) => void
  /**
   * A deployment was found with no room: every candidate of a pick full or cooling down, or
   * a response that set it cooling. Called each time (the events sample it). Should not throw.
   */
  readonly onSaturated?: (deploymentId: string, reason: 'full' | 'cooling_down', until: number | null) => void
  /**
   * The deployments this instance has learned something about, kept across the capacities a
   * reload builds (runtime/build.ts) so that a new configuration does not forget them.
   */
  readonly learned?: Set<string>
  /**
   * Who hears that a deployment has room again (the queue's capacity line), kept across the
   * capacities a reload builds like `learned`, so a listener added at boot hears them all.
   */
  readonly roomListeners?: Set<(deploymentId: string) => void>
}

const positive = (n: number | undefined): number =>
  typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0

function specOf(id: string, declaration: DeploymentDeclaration | undefined, pool: string | undefined): CandidateSpec {
  const weight = declaration?.weight
  return {
    id,
    ...(pool === undefined ? {} : { pool }),
    weight: typeof weight === 'number' && Number.isFinite(weight) && weight >= 0 ? weight : 1,
    rpm: positive(declaration?.rpm),
    tpm: positive(declaration?.tpm),
    maxConcurrent: positive(declaration?.maxConcurrent),
    window: declaration?.window === 'fixed' ? 'fixed' : 'sliding',
  }
}

/**
 * What an observation teaches the store. `inFlightMs`: how long before the answer arrived its
 * call was sent (0 outside a lease). The whole quota goes along only for a fixed window whose
 * answer named its reset: a reset that is the time until the limit is whole again (port.ts
 * DeploymentDeclaration.window); a figure held for want of a reset is no reset at all.
 */
function learnedFrom(o: UpstreamObservation, window: CandidateSpec['window'], inFlightMs: number): LearnedUpdate {
  const fixed = window === 'fixed'
  const whole = (d: UpstreamObservation['requests']): number | null =>
    fixed && d !== null && d.resetAt !== null ? d.limit : null
  const from = (d: UpstreamObservation['requests']): number | null =>
    d === null || d.resetAt === null ? null : d.resetAt - Math.max(0, inFlightMs)
  return {
    cooldownUntil: o.cooldownUntil,
    requestsRemaining: o.requests?.remaining ?? null,
    requestsResetAt: o.requests?.resetAt ?? null,
    requestsLimit: whole(o.requests),
    requestsResetFrom: from(o.requests),
    tokensRemaining: o.tokens?.remaining ?? null,
    tokensResetAt: o.tokens?.resetAt ?? null,
    tokensLimit: whole(o.tokens),
    tokensResetFrom: from(o.tokens),
  }
}

/** A pick by weight alone, for calls that need no store. */
function byWeight(specs: readonly CandidateSpec[], random: number): CandidateSpec | undefined {
  const total = specs.reduce((sum, s) => sum + s.weight, 0)
  if (total <= 0) return specs[0]
  let target = random * total
  for (const s of specs) {
    target -= s.weight
    if (target < 0) return s
  }
  return specs[specs.length - 1]
}

/**
 * A candidate as a call of `share` sees it: each declared limit cut to that share (at least
 * 1), the tpm never below the call's own tokens (a call too large for the share but not for
 * the deployment is refused as full, and may wait; never as too large). The store's counters
 * are the deployment's own: a call of a higher class still sees the whole limit.
 */
function shareOf(c: CandidateSpec, share: number, tokens: number): CandidateSpec {
  const cut = (limit: number): number => (limit > 0 ? Math.max(1, Math.floor(limit * share)) : 0)
  return {
    ...c,
    rpm: cut(c.rpm),
    tpm: c.tpm > 0 ? Math.max(cut(c.tpm), Math.min(c.tpm, tokens)) : 0,
    maxConcurrent: cut(c.maxConcurrent),
  }
}

export function createDeploymentCapacity(store: CapacityStore, options: CapacityOptions): DeploymentCapacity {
  const now = options.now ?? Date.now
  const random = options.random ?? Math.random
  const onError = options.onError ?? ((): void => {})
  // A deployment the pools do not name (none of the models' own) is a pool of its own.
  const poolOf = (id: string): string | undefined =>
    options.pools === undefined ? undefined : (options.pools[id] ?? id)
  const specs = new Map<string, CandidateSpec>()
  const declared = new Set<string>()
  const learnedIds = options.learned ?? new Set<string>()
  for (const [id, declaration] of Object.entries(options.deployments)) {
    const spec = specOf(id, declaration, poolOf(id))
    specs.set(id, spec)
    if (spec.rpm > 0 || spec.tpm > 0 || spec.maxConcurrent > 0) declared.add(id)
  }
  const tracked = (id: string): boolean => declared.has(id) || learnedIds.has(id)
  const spec = (id: string): CandidateSpec => specs.get(id) ?? specOf(id, undefined, poolOf(id))
  const roomListeners = options.roomListeners ?? new Set<(deploymentId: string) => void>()

  async function apply(
    candidate: CandidateSpec,
    leaseId: string | null,
    bucket: number,
    requestsDelta: number,
    tokensDelta: number,
    observation: UpstreamObservation | null,
    granted: GrantMark | null = null,
    inFlightMs = 0,
  ): Promise<void> {
    const learned =
      observation !== null && teaches(observation) ? learnedFrom(observation, candidate.window, inFlightMs) : null
    const announce = learned !== null && !tracked(candidate.id)
    if (learned !== null) learnedIds.add(candidate.id)
    if (learned?.cooldownUntil != null && learned.cooldownUntil > now())
      options.onSaturated?.(candidate.id, 'cooling_down', learned.cooldownUntil)
    // Nothing held that the store must free, nothing to correct, nothing learned: no call.
    const holds = leaseId !== null && (candidate.maxConcurrent > 0 || granted?.counted === true)
    const corrects = (candidate.rpm > 0 && requestsDelta !== 0) || (candidate.tpm > 0 && tokensDelta !== 0)
    if (!holds && !corrects && learned === null) return
    try {
      await store.release({
        now: now(),
        candidate,
        leaseId,
        bucket,
        requestsDelta,
        tokensDelta,
        learned,
        granted,
        announce,
      })
    } catch (error) {
      onError(error)
      return
    }
    if (holds || requestsDelta < 0 || tokensDelta < 0 || (learned !== null && observation?.refused !== true))
      for (const listener of roomListeners) listener(candidate.id)
  }

  function lease(
    candidate: CandidateSpec,
    held: {
      readonly leaseId: string
      readonly bucket: number
      readonly tokens: number
      readonly granted: GrantMark
    } | null,
  ): CapacityLease {
    let observation: UpstreamObservation | null = null
    // The call's time in flight when its answer arrived: the upstream's reset is read at the
    // answer's arrival, and may have been timed as early as the call's sending.
    const sentAt = now()
    let inFlightMs = 0
    let released = false
    let renewal: NodeJS.Timeout | undefined
    async function renew(): Promise<boolean> {
      if (held === null || released || candidate.maxConcurrent === 0) return false
      try {
        return await store.renew(candidate, held.leaseId, now())
      } catch (error) {
        onError(error)
        return false
      }
    }
    // A stream may outlive any ttl: keep its slot while it runs. The timer holds the process open for no one.
    const every = Math.max(1, Math.floor(store.rules.leaseTtlMs / 3))
    const schedule = (): void => {
      renewal = setTimeout(
        () =>
          void renew().then((held) => {
            if (held && !released) schedule()
          }),
        every,
      )
      renewal.unref()
    }
    if (held !== null && candidate.maxConcurrent > 0) schedule()
    return {
      deploymentId: candidate.id,
      tracked: held !== null,
      observe(o) {
        observation = o
        inFlightMs = now() - sentAt
      },
      async release(actual?: CapacityUsage) {
        if (released) return
        released = true
        clearTimeout(renewal)
        if (held === null) return await apply(candidate, null, 0, 0, 0, observation, null, inFlightMs)
        // A refused call never ran: it gives back its request and its tokens.
        const refused = observation?.refused === true
        const tokensUsed = refused
          ? 0
          : actual !== undefined && Number.isFinite(actual.tokens)
            ? Math.max(0, Math.ceil(actual.tokens))
            : held.tokens
        await apply(
          candidate,
          held.leaseId,
          held.bucket,
          refused ? -1 : 0,
          tokensUsed - held.tokens,
          observation,
          held.granted,
          inFlightMs,
        )
      },
      renew,
    }
  }

  return {
    kind: store.kind,
    async acquire(deploymentIds, estimate: CapacityEstimate): Promise<Acquisition> {
      const candidates = deploymentIds.map(spec)
      const first = byWeight(candidates, random())
      if (first === undefined) return { ok: false, reason: 'full', retryAt: null }
      if (!candidates.some((c) => tracked(c.id))) return { ok: true, lease: lease(first, null) }
      const tokens = Number.isFinite(estimate.tokens) ? Math.max(0, Math.ceil(estimate.tokens)) : 0
      const leaseId = randomUUID()
      try {
        const share = estimate.share ?? 1
        const asked = share > 0 && share < 1 ? candidates.map((c) => shareOf(c, share, tokens)) : candidates
        // The lease keeps the deployment's own spec (`candidates`): what it frees is the deployment's.
        const got = await store.acquire({ now: now(), leaseId, tokens, random: random(), candidates: asked })
        if (!got.ok) {
          const { reason } = got
          // A call refused on its share only (flex) says nothing of the deployment's own room.
          if (reason !== 'too_large' && asked === candidates)
            for (const c of candidates) options.onSaturated?.(c.id, reason, got.retryAt)
          return got
        }
        const chosen = candidates[got.index]
        if (chosen === undefined)
          throw new TypeError(`the capacity store picked candidate ${got.index} of ${candidates.length}`)
        return { ok: true, lease: lease(chosen, { leaseId, bucket: got.bucket, tokens, granted: got.granted }) }
      } catch (error) {
        onError(error)
        return { ok: true, lease: lease(first, null) }
      }
    },
    async observe(deploymentId, observation) {
      await apply(spec(deploymentId), null, 0, 0, 0, observation)
    },
    async inspect(deploymentIds) {
      return await store.inspect(deploymentIds.map(spec), now())
    },
    learnedElsewhere(deploymentId) {
      learnedIds.add(deploymentId)
    },
    onRoom(listener) {
      roomListeners.add(listener)
      return () => {
        roomListeners.delete(listener)
      }
    },
  }
}

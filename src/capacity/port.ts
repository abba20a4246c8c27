// The capacity of the deployments Tollgate fronts, as a port. A deployment may declare
// rpm, tpm and maxConcurrent; its responses teach more (upstream-headers.ts). Before a
// call, acquire() picks among a model's deployments one with room, weighted by its
// configured weight times its headroom, takes an in-flight slot and reserves the call's
// estimate, all or nothing; the lease it hands back is released when the call ends.
//
// Two layers: DeploymentCapacity is what the corridor holds (capacity.ts builds it, once,
// over either store); CapacityStore is what a store must do atomically (memory.ts,
// redis.ts). The split keeps the one promise the corridor cares about in one place: a
// deployment with no declared or learned limits costs nothing, not even a store call.
import type { UpstreamObservation } from './upstream-headers.ts'

/** What a deployment declares in the config. Absent or 0: no such limit. */
export interface DeploymentDeclaration {
  /** Share of the traffic among a model's deployments, before headroom; defaults to 1. */
  readonly weight?: number
  readonly rpm?: number
  /** Tokens per minute, counted as the upstream counts them (Azure: prompt + max_tokens at arrival). */
  readonly tpm?: number
  /** Calls in flight at once: the natural limit of a self-hosted vLLM, Ollama or llama.cpp. */
  readonly maxConcurrent?: number
  /**
   * What the upstream's reset means (x-ratelimit-reset-*, anthropic-ratelimit-*-reset).
   * 'fixed': the time until the limit is whole again, as OpenAI, Azure and Anthropic document
   * it (a fixed window's end, a bucket full again): at the reset the deployment has its whole
   * stated limit. 'sliding' (the default, the cautious reading): the time until some of it
   * frees, as a sliding log's oldest call leaving: at the reset one call's worth comes back
   * and the next answer says the rest.
   */
  readonly window?: WindowKind
}

export type WindowKind = 'fixed' | 'sliding'

export interface CapacityEstimate {
  /** Tokens the call is expected to use, as the upstream will count them. */
  readonly tokens: number
  /**
   * The share of each deployment's declared rpm, tpm and maxConcurrent the call may fill
   * (a flex call: its tier's flexShare, priority/classes.ts): the rest stays for the calls
   * of higher classes, so flex is the first refused as a deployment fills up. Absent: 1.
   */
  readonly share?: number
}

export interface CapacityUsage {
  /** Tokens the call used, as the upstream counts them; replaces the estimate. */
  readonly tokens: number
}

export type RefusalReason =
  /** Every candidate is cooling down after a 429 or 503. */
  | 'cooling_down'
  /** Every candidate is out of requests, tokens or in-flight slots (or cooling down). */
  | 'full'
  /** The call's estimate is larger than any candidate's whole tpm: it can never fit. */
  | 'too_large'

export type Acquisition =
  | { readonly ok: true; readonly lease: CapacityLease }
  | {
      readonly ok: false
      readonly reason: RefusalReason
      /**
       * When the first candidate may have room again (epoch ms); null for 'too_large'. A
       * candidate full of in-flight calls frees when one ends, which nothing can foretell:
       * it says "now + busyRetryMs".
       */
      readonly retryAt: number | null
    }

export interface CapacityLease {
  readonly deploymentId: string
  /** False for a deployment with no declared or learned limits: its lease holds nothing in the store. */
  readonly tracked: boolean
  /**
   * Remembers what a response taught (its headers, or a refusal); applied with release(), in
   * the same round trip. The latest observation wins.
   */
  observe(observation: UpstreamObservation): void
  /**
   * Frees the in-flight slot and applies the observation. After a refusal (observe() of a
   * 429 or 503) the call did not run: its reservation is returned and the deployment cools
   * down for the time the upstream named. Otherwise `actual` (when given) replaces the
   * estimate. At most one store round trip; none for an untracked deployment that learned
   * nothing. Never throws (a store error goes to onError). Calling it twice does nothing.
   */
  release(actual?: CapacityUsage): Promise<void>
  /**
   * Pushes the in-flight slot's expiry leaseTtlMs from now. Done by itself every
   * leaseTtlMs / 3 while the lease is held on a deployment with maxConcurrent (a stream
   * may outlive any ttl); false if the slot had already expired. Never throws.
   */
  renew(): Promise<boolean>
}

/** One deployment as a store sees it: its state, for /admin/backends and metrics. */
export interface DeploymentState {
  readonly deploymentId: string
  readonly inFlight: number
  /** Requests and tokens counted in the current window (declared limits only). */
  readonly requests: number
  readonly tokens: number
  /** Until when it cools down (epoch ms), or null. */
  readonly coolingUntil: number | null
  /** What the upstream last said is left, while that still holds. */
  readonly learnedRequests: number | null
  readonly learnedTokens: number | null
  /** Until when each learned figure holds (epoch ms): the upstream's reset, or learnedHoldMs after it spoke. */
  readonly learnedRequestsUntil: number | null
  readonly learnedTokensUntil: number | null
}

export interface DeploymentCapacity {
  readonly kind: 'memory' | 'redis'
  /**
   * Picks among `deploymentIds` (a model's deployments, in configured order) one with room
   * for `estimate`, skipping those cooling down or full, and takes its slot. Unknown ids
   * are deployments without declarations. One store round trip when any candidate is
   * tracked, none otherwise. If the store fails, the pick is made by weight alone (fail
   * open: the upstream's own limits still hold) and the error goes to onError.
   */
  acquire(deploymentIds: readonly string[], estimate: CapacityEstimate): Promise<Acquisition>
  /** Applies an observation outside any lease (a health probe, a response to an untracked call). */
  observe(deploymentId: string, observation: UpstreamObservation): Promise<void>
  /** Each deployment's state, in the order asked. */
  inspect(deploymentIds: readonly string[]): Promise<DeploymentState[]>
  /**
   * Tells `listener` of each release on this instance that may have made room on a
   * deployment (a slot freed, a reservation given back, an answer that taught the figures).
   * Other instances' releases arrive over the store's room channel (redis.ts), where the
   * queue listens. Returns the way to stop listening.
   */
  onRoom(listener: (deploymentId: string) => void): () => void
  /**
   * Another instance learned a limit of this deployment (a 429, a quota header): this one
   * asks the store about it from now on, without waiting for a refusal of its own. The
   * Redis store announces a deployment's first lesson on each instance (redis.ts); the
   * queue's subscription delivers it here.
   */
  learnedElsewhere(deploymentId: string): void
}

// The store's side.

/** The rules every instance must share (they shape the keys' contents). */
export interface CapacityRules {
  /** The rpm/tpm window. */
  readonly windowMs: number
  /**
   * The window is counted in this many buckets, plus the current one: the count covers
   * between windowMs and windowMs + one bucket, never less, so the gateway never sends
   * more in any windowMs than the upstream's sliding window allows.
   */
  readonly buckets: number
  /** How long a full in-flight count is reported to last (see Acquisition.retryAt). */
  readonly busyRetryMs: number
  /** How long a learned "remaining" holds when the upstream named no reset (Azure names none). */
  readonly learnedHoldMs: number
  /** An in-flight slot frees itself this long after it was taken, should its instance die first. */
  readonly leaseTtlMs: number
}

export const DEFAULT_RULES: CapacityRules = Object.freeze({
  windowMs: 60_000,
  buckets: 6,
  busyRetryMs: 250,
  learnedHoldMs: 1000,
  leaseTtlMs: 10 * 60_000,
})

/** A candidate as the store checks it: declared limits, 0 when none. */
export interface CandidateSpec {
  readonly id: string
  /**
   * The deployments a call may choose among together (create.ts poolsOf): a store that
   * shards keeps a pool's state on one slot, so that one script can pick. Absent: the one
   * pool of every deployment (a capacity built without pools).
   */
  readonly pool?: string
  readonly weight: number
  readonly rpm: number
  readonly tpm: number
  readonly maxConcurrent: number
  /** What its upstream's reset means (DeploymentDeclaration.window); absent: 'sliding'. */
  readonly window?: WindowKind
}

export interface StoreAcquire {
  readonly now: number
  readonly leaseId: string
  readonly tokens: number
  /** A number in [0, 1) for the weighted pick (injected, so tests are deterministic). */
  readonly random: number
  readonly candidates: readonly CandidateSpec[]
}

/**
 * The deployment's running totals of requests and tokens granted, just after a grant, and
 * how many calls granted before it were still unanswered. An answer to that call says what
 * was left when the upstream counted it; the calls granted after it (the totals' growth
 * since), and those granted before it but not answered yet (they may reach the upstream
 * after it), may not have been counted, so they come off.
 */
export interface GrantMark {
  readonly requests: number
  readonly tokens: number
  /** Calls, and their tokens, granted before this one and unanswered at its grant. */
  readonly unanswered: number
  readonly unansweredTokens: number
  /** This call's own reservation (it is unanswered until released). */
  readonly own: number
  /**
   * Whether this call is counted among the unanswered: only while the deployment has a
   * learned figure (whose answers then reach the store anyway), so its release must too.
   */
  readonly counted: boolean
}

export type StoreAcquired =
  | {
      readonly ok: true
      readonly index: number
      /** The bucket the reservation went to. */
      readonly bucket: number
      readonly granted: GrantMark
    }
  | { readonly ok: false; readonly reason: RefusalReason; readonly retryAt: number | null }

/** What an observation leaves in the store. */
export interface LearnedUpdate {
  readonly cooldownUntil: number | null
  readonly requestsRemaining: number | null
  readonly requestsResetAt: number | null
  /**
   * The whole quota (x-ratelimit-limit-*), given only for a fixed window (the deployment's
   * `window: fixed`) whose answer named its reset: what the deployment has again at the reset.
   * Absent or null: the cautious renewal (what was left plus one call).
   */
  readonly requestsLimit?: number | null
  /**
   * The earliest the upstream's reset can be (epoch ms): the reset read at the answer's
   * arrival, less the call's time in flight (the upstream counted the call, and timed its
   * reset, somewhere between its sending and its answer). A fixed window's answer whose
   * earliest reset is not after the reset the store already renewed at speaks of the window
   * that ended. Absent: requestsResetAt.
   */
  readonly requestsResetFrom?: number | null
  readonly tokensRemaining: number | null
  readonly tokensResetAt: number | null
  readonly tokensLimit?: number | null
  readonly tokensResetFrom?: number | null
}

export interface StoreRelease {
  readonly now: number
  readonly candidate: CandidateSpec
  /** The lease to free, or null when only applying an observation. */
  readonly leaseId: string | null
  readonly bucket: number
  /** Added to the bucket the reservation went to (or the current one, if that left the window and the delta is positive). */
  readonly requestsDelta: number
  readonly tokensDelta: number
  readonly learned: LearnedUpdate | null
  /** The lease's grant mark, when the observation answers a call granted by acquire(); null otherwise. */
  readonly granted: GrantMark | null
  /** The first lesson this instance stores about the deployment: the other instances are told (Redis). */
  readonly announce?: boolean
}

export interface CapacityStore {
  readonly kind: 'memory' | 'redis'
  readonly rules: CapacityRules
  acquire(request: StoreAcquire): Promise<StoreAcquired>
  release(release: StoreRelease): Promise<void>
  /** Moves a held slot's expiry to now + leaseTtlMs; false if the lease no longer holds it. */
  renew(candidate: CandidateSpec, leaseId: string, now: number): Promise<boolean>
  inspect(candidates: readonly CandidateSpec[], now: number): Promise<DeploymentState[]>
}

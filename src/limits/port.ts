// The limiter port: admit a call on an estimate, then settle it with the real usage.
import type { ModelLimits, ServiceClass } from '../config/schema.ts'
import type { Usage } from '../backends/port.ts'
import type { BudgetSubject } from '../budgets/book.ts'
import type { BudgetScope, BudgetSpec } from '../budgets/port.ts'
import type { BudgetPeriod } from '../budgets/period.ts'
import type { OutputReservationView, ReservationSubject } from '../reservations/view.ts'

export interface AdmissionRequest {
  readonly keyId: string
  /** The key's owner (the key id when it has none): owner and tenant budgets apply through it. */
  readonly owner?: string
  readonly tier: string
  readonly model: string
  readonly limits: ModelLimits
  /** Estimated prompt tokens and reserved completion tokens. */
  readonly estimate: Usage
  /**
   * Said after a refusal on a token limit: how the reservation came about and how to make
   * it smaller (e.g. that the request set no max_tokens and got the default).
   */
  readonly reservationNote?: string
  /** Its priority class (priority/classes.ts): where it waits in a /queue line. Limits already carry its share. */
  readonly serviceClass?: ServiceClass
  /** How long its caller can wait in a /queue line, when it said (queue/deadline.ts). */
  readonly maxWaitMs?: number
  /** The request named no output cap: `estimate` holds the gateway's reservation for these replies. */
  readonly uncapped?: { readonly replies: number }
  /**
   * What the windowed token limits (tpm, input_tpm, output_tpm) reserve, where it differs from
   * `estimate` (a learned output reservation: reservations/); budgets and the quota hold `estimate`.
   */
  readonly rateEstimate?: Usage
  /**
   * A batch's line: counted on its key's batch pool, apart from the key's interactive calls,
   * and admitted only in the room they leave of each rate limit (pools.ts).
   */
  readonly batch?: true
}

/** What Limiter.spendBudgets spends, and whose budgets. */
export interface BudgetSpend extends Pick<AdmissionRequest, 'keyId' | 'owner' | 'tier' | 'model'> {
  /** Exact, in integer nano-units. */
  readonly costNanos: number
  /** Spent once under this id, however often it is spent again (SettleHow.once). */
  readonly once?: OnceCharge
}

/**
 * A charge that counts once however often its call runs: a stored request run again after
 * its gateway died between its charge and its result (queue/charge-once.ts). Its budget
 * spend and its usage row are written under `id`, and a second write under the same id is
 * skipped, for `keepMs` from the first. Rate limits are not part of it: a run again uses
 * rate-limit room again.
 */
export interface OnceCharge {
  readonly id: string
  readonly keepMs: number
}

export type RateLimitHeaders = Readonly<Record<string, string>>

export interface Admission {
  /** x-ratelimit-* headers describing the state after this admission. */
  readonly headers: RateLimitHeaders
  /** Reconciles the reservation with what really flowed. Never throws. */
  settle(usage: Usage, how?: SettleHow): Promise<void>
}

export interface SettleHow {
  /**
   * No upstream acted on the call: the gateway refused it itself (every deployment full, or
   * refusing; none reachable; its credential refused). It gives back its request too, as if
   * it had never been admitted.
   */
  readonly withdrawn?: boolean
  /** The budgets' spend counts once under this id (a run again reconciles its rate limits, and spends nothing). */
  readonly once?: OnceCharge
}

/** Where enforcement stands: on Redis, in memory (embedded), or a stand-in while Redis is away. */
export type LimiterMode = 'redis' | 'memory' | 'insurance' | 'fail_open' | 'fail_closed'

export interface LimiterHealth {
  readonly mode: LimiterMode
  /** False while Redis is unreachable and a stand-in (insurance, fail-open, fail-closed) decides. */
  readonly healthy: boolean
  /** Outages seen since start. */
  readonly outages: number
  /** ISO time the current outage began, or null. */
  readonly downSince: string | null
}

export interface Limiter {
  /** Admits or throws GatewayError 429 (rate_limit_* or insufficient_quota). */
  admit(request: AdmissionRequest): Promise<Admission>
  /**
   * Refuses at once, with admit's own 429, what admission could never grant however long
   * the caller waited: a call larger than a whole window, or a spent quota. Consumes
   * nothing. Answers the headers of the current state (as peek does). Absent on limiters
   * where nothing ever fails that way.
   */
  check?(request: AdmissionRequest): Promise<RateLimitHeaders>
  /**
   * The request as admit() would reserve it on the windowed limits (a learned output
   * reservation in `rateEstimate`: reservations/), without admitting anything: what a /queue
   * call's predicted wait is counted in (queue/deadline.ts). Absent: as it is.
   */
  asReserved?(request: AdmissionRequest): Promise<AdmissionRequest>
  /**
   * Spends exactly `costNanos` from the budgets that apply to a key, and nothing of its rate
   * limits (a cached reply a tier charges a share for: src/cache/). Checked and held in one
   * atomic step like an admission, then committed; throws admission's budget refusal when a
   * budget cannot cover it. A cost of 0 touches nothing. Absent: no budgets.
   */
  spendBudgets?(request: BudgetSpend): Promise<void>
  /** Headers of the current state without consuming anything (for refusals after auth). */
  peek(request: Omit<AdmissionRequest, 'estimate'>): Promise<RateLimitHeaders>
  /** Where the budgets that apply to a key stand (the admin API, the portal, the CLI); absent: no budgets. */
  budgetStatus?(subject: BudgetSubject): Promise<BudgetStatus[]>
  /**
   * Where these budgets stand. A key budget's counters are kept with its key's owner's:
   * `owners` names them (key id → owner); a key missing from it is its own owner.
   */
  budgetStatusOf?(specs: readonly BudgetSpec[], owners?: ReadonlyMap<string, string>): Promise<BudgetStatus[]>
  /** What a call naming no output cap reserves now on the token-rate limits (reservations/); absent: the fixed reservation. */
  outputReservation?(subject: ReservationSubject): Promise<OutputReservationView>
  /** For /readyz and metrics; absent on limiters without a store. */
  health?(): LimiterHealth
  close(): Promise<void>
}

/** Admits everything; used where no limits apply. */
export const unlimited: Limiter = {
  admit: async () => ({ headers: {}, settle: async () => undefined }),
  peek: async () => ({}),
  close: async () => undefined,
}

/** A budget as it stands in its current period; money in currency units. */
export interface BudgetStatus {
  readonly scope: BudgetScope
  readonly id: string
  readonly origin: 'set' | 'plan'
  readonly period: BudgetPeriod
  readonly time_zone: string
  readonly amount: number
  readonly spent: number
  /** Held by calls in flight. */
  readonly reserved: number
  readonly remaining: number
  readonly currency: string
  /** ISO; null for a lifetime budget. */
  readonly period_start: string | null
  readonly resets_at: string | null
  readonly thresholds: readonly number[]
}

// The counter store behind the limiter: one atomic check-and-consume over every dimension
// of a (key, model), a reconciliation, and a read. Redis (shared by all instances) and
// memory (rate-limiter-flexible's RateLimiterMemory: the embedded store, and the
// insurance while Redis is away) implement it with the same rule (dimensions.ts).
import type { BudgetCharge, BudgetCrossing, BudgetSettle, BudgetState } from './budget-charges.ts'
import type { Adjustment, Charge, CounterState, Dimension, DimensionName } from './dimensions.ts'
import type { OnceCharge } from './port.ts'
import { POOL_CODE, pooled, type Pool } from './pools.ts'

/**
 * Whose counters: one API key on one model ('*' for endpoints without a model). On Redis
 * they live on the owner's slot (store/redis-kit.ts identityNamespace), so a key's calls
 * spread the fleet's load over a cluster's masters by owner.
 */
export interface Subject {
  readonly keyId: string
  readonly model: string
  /** The key's owner; absent (or the key id): the key is its own. */
  readonly owner?: string | undefined
  /** A batch's line: its windowed counters are the batch pool's, apart from the key's interactive calls (pools.ts). */
  readonly pool?: Pool | undefined
}

export interface AdmitResult {
  /** All charges were consumed, or (false) none was. */
  readonly admitted: boolean
  /** Per charge, in order: the counter after consuming, or as it stood when refused. */
  readonly states: readonly CounterState[]
  /** Per budget charge, in order: as it stands after consuming, or as found when refused. */
  readonly budgets: readonly BudgetState[]
}

/** A call's holds, as the instance that admitted it renews them while it runs (holds.ts). */
export interface HeldCall {
  readonly subject: Subject
  /** The call's hold id (its budget charges carry the same). */
  readonly hold: string
  /** What it holds on its key's quota; 0: none. */
  readonly quota: number
  readonly budgets: readonly BudgetCharge[]
}

export interface Counters {
  readonly kind: 'redis' | 'memory'
  /**
   * Consumes every charge and budget charge if each fits, otherwise nothing: one atomic
   * step. A lifetime charge (the quota) is held for the call under `hold` until its settle.
   */
  admit(
    subject: Subject,
    charges: readonly Charge[],
    budgets?: readonly BudgetCharge[],
    hold?: string,
  ): Promise<AdmitResult>
  /**
   * Applies real-minus-reserved. A windowed give-back only lands in the window the
   * reservation was made in: once that window has reset there is nothing to give back.
   * Overuse is charged to the current window either way. Counters never go below zero.
   * Budgets commit the real cost, release the reservation, and answer the thresholds this
   * settle is the first to reach (in the same atomic step: exactly one settle reports each).
   * Under `once`, the budgets commit only if no settle under its id did before (in the same
   * step); a repeat still releases its holds. Rate limits are reconciled either way.
   */
  settle(
    subject: Subject,
    adjustments: readonly Adjustment[],
    budgets?: readonly BudgetSettle[],
    once?: OnceCharge,
  ): Promise<BudgetCrossing[]>
  /** The counters as they stand, without consuming. */
  peek(subject: Subject, dimensions: readonly Dimension[]): Promise<CounterState[]>
  /** Budgets as they stand, without consuming (the charges' costs are ignored). */
  peekBudgets(budgets: readonly BudgetCharge[]): Promise<BudgetState[]>
}

/** One letter per dimension in key names. */
export const DIMENSION_CODE: Readonly<Record<DimensionName, string>> = {
  requests: 'r',
  tokens: 't',
  input_tokens: 'i',
  output_tokens: 'o',
  quota: 'q',
}

/** A counter's code in key names: its dimension's, after its pool's for a batch line's (pools.ts). */
export function counterCode(subject: Pick<Subject, 'pool'>, name: DimensionName): string {
  return subject.pool !== undefined && pooled(subject, { name })
    ? `${POOL_CODE[subject.pool]}${DIMENSION_CODE[name]}`
    : DIMENSION_CODE[name]
}

/** Key-name suffix of the quota's holds in memory: reservations of calls not yet settled. */
export const HELD_CODE = 'h'

/** A reservation and a settle are in the same window when their window ends agree to within half a window. */
export function sameWindow(expiresAt: number, expected: number, windowMs: number): boolean {
  return expected > 0 && Math.abs(expiresAt - expected) * 2 < windowMs
}

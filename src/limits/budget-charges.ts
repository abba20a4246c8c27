// Budgets as one more dimension of admission: what a call reserves on each budget that
// applies (its estimated cost, in nano-units), the one rule that decides whether it fits,
// and what settling commits (the real cost). Both counter stores apply exactly this rule,
// in the same atomic step as the rate limits of the (key, model).
//
// A budget's counters are named by its scope, id, period and the period's start, so a new
// period begins at zero without anything being reset: spent (the real cost of settled
// calls, kept until a day after the period ends), held (reservations of calls in flight,
// each one a hold of its own that lasts until its call settles: holds.ts; a hold whose
// instance died lapses with its lease, never with a rate-limit window), and the thresholds
// already reported in the period under the budget's revision.
//
// On Redis a budget's counters live on the slot of whom it spends for (store/redis-kit.ts):
// a key or owner budget on the owner's, next to the key's rate-limit counters (one script
// admits both); a tenant budget, which spans owners, on its tenant's.
import type { BudgetSpec } from '../budgets/port.ts'
import { periodOf, type PeriodSpan } from '../budgets/period.ts'
import type { Identity } from '../store/redis-kit.ts'

/** A period's counters outlive it by this much (a late settle still lands; the admin can look back). */
export const SPENT_GRACE_MS = 86_400_000

export interface BudgetCharge {
  readonly spec: BudgetSpec
  readonly span: PeriodSpan
  /** The counters' name under the limiter's namespace, without the part that says which. */
  readonly counter: string
  /** Estimated cost of the call, nano-units. */
  readonly cost: number
  /** How long the spent counter is kept from now; 0: forever (the lifetime). */
  readonly ttlMs: number
  /** Where its counters live: a tenant budget on its tenant, a key or owner budget with the owner. */
  readonly home: BudgetHome
  /** The call's hold (holds.ts), the same on every budget of the call; '' where nothing is held (a peek). */
  readonly hold: string
}

/** A tenant, or the owner (the key when it has none) whose slot also holds the key's counters. */
export type BudgetHome = { readonly tenant: string } | Identity

export interface BudgetState {
  /** Real cost of settled calls in the period, nano-units. */
  readonly spent: number
  /** Reserved by calls in flight (this one included once admitted). */
  readonly held: number
}

export interface BudgetSettle {
  readonly charge: BudgetCharge
  /** What the call really cost, nano-units. */
  readonly real: number
}

/** A threshold reached by a settle, reported by exactly one settle in the whole fleet. */
export interface BudgetCrossing {
  /** Index of the settle (and charge) that crossed it. */
  readonly index: number
  readonly threshold: number
  /** Spent after the settle, nano-units. */
  readonly spent: number
}

export const EMPTY_BUDGET: BudgetState = Object.freeze({ spent: 0, held: 0 })

export function budgetCounter(spec: BudgetSpec, span: PeriodSpan): string {
  return `${spec.scope}:${encodeURIComponent(spec.id)}:${spec.period}:${span.start}`
}

/** The fired-thresholds set of a counter under a revision (a new revision re-arms them). */
export function firedName(charge: Pick<BudgetCharge, 'counter' | 'spec'>): string {
  return `${charge.counter}:f:${encodeURIComponent(charge.spec.revision)}`
}

/**
 * Where a budget's counters live, for calls of `identity`. Read without a call (the admin
 * views), a key budget needs `owners` to name its key's owner; a key missing from it is
 * its own owner.
 */
export function budgetHome(
  spec: Pick<BudgetSpec, 'scope' | 'id'>,
  identity?: Identity,
  owners?: ReadonlyMap<string, string>,
): BudgetHome {
  if (spec.scope === 'tenant') return { tenant: spec.id }
  if (spec.scope === 'owner') return { keyId: identity?.keyId ?? '', owner: spec.id }
  // A key budget applies to its own key's calls only: with the caller's counters.
  return identity ?? { keyId: spec.id, owner: owners?.get(spec.id) }
}

export function budgetChargesOf(
  specs: readonly BudgetSpec[],
  cost: number,
  now: number,
  identity?: Identity,
  owners?: ReadonlyMap<string, string>,
  hold = '',
): BudgetCharge[] {
  return specs.map((spec) => {
    const span = periodOf(spec.period, spec.timeZone, now)
    return {
      spec,
      span,
      counter: budgetCounter(spec, span),
      cost,
      ttlMs: Number.isFinite(span.end) ? Math.max(span.end - now, 0) + SPENT_GRACE_MS : 0,
      home: budgetHome(spec, identity, owners),
      hold,
    }
  })
}

/**
 * Whether the call's estimated cost fits: what was spent, what calls in flight hold and
 * this call's estimate stay within the amount. A call that costs nothing fits unless the
 * budget is used up (an amount of 0 admits nothing).
 */
export function budgetFits(charge: Pick<BudgetCharge, 'cost' | 'spec'>, state: BudgetState): boolean {
  const total = state.spent + state.held
  const amount = charge.spec.amountNanos
  return charge.cost > 0 ? total + charge.cost <= amount : total < amount
}

/** Refused whatever calls in flight give back: only the period's end (or a larger amount) helps. */
export function budgetExhausted(charge: Pick<BudgetCharge, 'cost' | 'spec'>, state: BudgetState): boolean {
  const amount = charge.spec.amountNanos
  return charge.cost > 0 ? state.spent + charge.cost > amount : state.spent >= amount
}

/** Thresholds the spend has reached: spent ≥ p % of the amount (nothing while nothing is spent). */
export function reached(thresholds: readonly number[], spent: number, amount: number): number[] {
  if (spent <= 0) return []
  return thresholds.filter((p) => spent * 100 >= p * amount)
}

// The dimensions a (tier, model) can be limited on, what one call costs on each, and the
// one rule that decides whether a call fits. Both counter stores (the Redis script and
// the in-memory one) apply exactly this rule, so they refuse the same calls.
import type { Usage } from '../backends/port.ts'
import type { ModelLimits } from '../config/schema.ts'

export type DimensionName = 'requests' | 'tokens' | 'input_tokens' | 'output_tokens' | 'quota'

export interface Dimension {
  readonly name: DimensionName
  readonly limit: number
  /** Windowed counters reset with the window; the lifetime quota never does. */
  readonly windowed: boolean
}

/** A dimension with what this call reserves on it. */
export interface Charge extends Dimension {
  readonly cost: number
}

/** A counter as the store holds it. */
export interface CounterState {
  /** Consumed in the current window (or ever, for the quota). */
  readonly used: number
  /** Time until the window is back to full; 0 when nothing is consumed. */
  readonly resetMs: number
  /** When the current window ends, on the store's clock; 0 when no window is open. */
  readonly expiresAt: number
}

const ORDER: readonly (readonly [DimensionName, keyof ModelLimits, boolean])[] = [
  ['requests', 'rpm', true],
  ['tokens', 'tpm', true],
  ['input_tokens', 'input_tpm', true],
  ['output_tokens', 'output_tpm', true],
  ['quota', 'quota', false],
]

/** The dimensions set in these limits (unset = unlimited, so absent), in a fixed order. */
export function dimensionsOf(limits: ModelLimits): Dimension[] {
  const out: Dimension[] = []
  for (const [name, field, windowed] of ORDER) {
    const limit = limits[field]
    if (typeof limit === 'number' && limit > 0) out.push({ name, limit, windowed })
  }
  return out
}

/** What a call with this usage counts on one dimension: one request, or its tokens. */
export function costOn(name: DimensionName, usage: Usage): number {
  switch (name) {
    case 'requests':
      return 1
    case 'tokens':
      return usage.inputTokens + usage.outputTokens
    case 'input_tokens':
      return usage.inputTokens
    case 'output_tokens':
      return usage.outputTokens
    case 'quota':
      return usage.inputTokens + usage.outputTokens
  }
}

/** `rate`: what the windowed dimensions reserve (a learned output reservation); the quota holds `estimate`. */
export function chargesOf(limits: ModelLimits, estimate: Usage, rate: Usage = estimate): Charge[] {
  return dimensionsOf(limits).map((d) => ({ ...d, cost: costOn(d.name, d.windowed ? rate : estimate) }))
}

/**
 * Whether a charge fits on a counter. A windowed dimension refuses when the call would
 * take it past its limit (a call that adds nothing always fits); the lifetime quota
 * refuses once it is spent, and otherwise lets the last call run over (it is reconciled
 * to what really flowed).
 */
export function fits(charge: Charge, used: number): boolean {
  return charge.windowed ? charge.cost === 0 || used + charge.cost <= charge.limit : used < charge.limit
}

/**
 * A reconciliation: what to add to (or give back on) one dimension after the call.
 *
 * A windowed dimension is corrected by `delta`. The lifetime quota keeps what calls used
 * apart from what calls in flight reserved: each call's reservation is a hold of its own
 * (holds.ts), kept until its settle (on Redis, lapsing with its lease if its instance
 * dies, never with a window); settling commits the real usage (reserved + delta) and
 * releases the hold, once.
 */
export interface Adjustment {
  readonly name: DimensionName
  readonly windowed: boolean
  readonly delta: number
  /** What the call reserved on this dimension (the lifetime quota releases its hold of it). */
  readonly reserved: number
  /** The call's hold id (the lifetime quota's hold is released by it: holds.ts); absent: none. */
  readonly hold?: string
  /** The window the reservation was made in (CounterState.expiresAt at admission). */
  readonly expiresAt: number
}

/**
 * Real usage minus the reservation, per token dimension; requests keep their one point,
 * unless the call was `withdrawn` (no upstream acted on it: port.ts SettleHow).
 */
export function adjustmentsFor(
  charges: readonly Charge[],
  states: readonly CounterState[],
  usage: Usage,
  withdrawn = false,
  hold = '',
): Adjustment[] {
  const out: Adjustment[] = []
  charges.forEach((charge, i) => {
    if (charge.name === 'requests' && !withdrawn) return
    const delta = (charge.name === 'requests' ? 0 : costOn(charge.name, usage)) - charge.cost
    // The quota always settles: its reservation moves from held to used.
    if (delta !== 0 || !charge.windowed) {
      out.push({
        name: charge.name,
        windowed: charge.windowed,
        delta,
        reserved: charge.cost,
        hold,
        expiresAt: states[i]?.expiresAt ?? 0,
      })
    }
  })
  return out
}

// Money is kept in integer nano-units (10⁻⁹ of the plan's currency) from the meter up:
// sums of integers are exact, where sums of floats pick up noise (0.0042713000000000004).
// A call costs price-per-million × tokens ÷ 10⁶; in nano-units that is price × tokens ×
// 1000, an integer for any price with up to three decimals (the catalogue's have two) and
// rounded to the nearest nano-unit otherwise. 2⁵³ nano-units is 9 million currency units:
// far beyond one key's spend on one model in one day, the largest sum a row holds.
import type { ModelLimits } from '../config/schema.ts'

export const NANOS_PER_UNIT = 1_000_000_000

/** Nano-units of one call at the limits' prices per million tokens. */
export function costNanos(limits: Pick<ModelLimits, 'input_price' | 'output_price'>, inputTokens: number, outputTokens: number): number {
  // Prices as integer micro-units per million tokens: exact for up to six decimals.
  const input = Math.round((limits.input_price ?? 0) * 1e6)
  const output = Math.round((limits.output_price ?? 0) * 1e6)
  return Math.round((input * inputTokens + output * outputTokens) / 1000)
}

/**
 * Nano-units as a number of currency units, for JSON: an integer divided by a power of ten
 * prints as the short decimal it is (4271300 → 0.0042713).
 */
export function toUnits(nanos: number): number {
  return nanos / NANOS_PER_UNIT
}

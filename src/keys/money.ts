// Money is kept in integer nano-units (10⁻⁹ of the plan's currency) from the meter up:
// sums of integers are exact, where sums of floats pick up noise (0.0042713000000000004).
// A call costs price-per-million × tokens ÷ 10⁶; in nano-units that is price × tokens ×
// 1000, an integer for any price with up to three decimals (the catalogue's have two) and
// rounded to the nearest nano-unit otherwise. 2⁵³ nano-units is 9 million currency units:
// far beyond one key's spend on one model in one day, the largest sum a row holds.
// This is also the one place money is written out: for people (formatAmount, formatMoney:
// the portal, the CLI) and for machines (exactAmount: the CSV), always with the plans'
// currency named beside it (planCurrency).
import type { Usage } from '../backends/port.ts'
import type { ModelLimits } from '../config/schema.ts'
import { cacheMultipliers, MULTIPLIER_SCALE } from './cache-prices.ts'

export const NANOS_PER_UNIT = 1_000_000_000

/** Nano-units of one call at the limits' prices per million tokens. */
export function costNanos(
  limits: Pick<ModelLimits, 'input_price' | 'output_price'>,
  inputTokens: number,
  outputTokens: number,
): number {
  // Prices as integer micro-units per million tokens: exact for up to six decimals.
  const input = Math.round((limits.input_price ?? 0) * 1e6)
  const output = Math.round((limits.output_price ?? 0) * 1e6)
  return Math.round((input * inputTokens + output * outputTokens) / 1000)
}

/** What one call costs, nano-units: the whole, and (within it) its prompt cache's reads and writes. */
export interface CallCost {
  readonly totalNanos: number
  readonly cacheReadNanos: number
  readonly cacheWriteNanos: number
}

export const NO_COST: CallCost = Object.freeze({ totalNanos: 0, cacheReadNanos: 0, cacheWriteNanos: 0 })

type PricedLimits = Pick<
  ModelLimits,
  'input_price' | 'output_price' | 'cache_read_multiplier' | 'cache_write_multiplier'
>

/** `scaled ÷ divisor` rounded half up, as Math.round does: amounts of money are never negative. */
export function halfUp(scaled: bigint, divisor: bigint): number {
  return Number((scaled * 2n + divisor) / (divisor * 2n))
}

/**
 * The cost of a call to `model` with `usage`: the uncached input (the prompt less its cache
 * parts) and the output at their prices, as costNanos, plus each cache part at the input
 * price times its multiplier (cache-prices.ts). Each cache part is its own exact integer:
 * price (micro-units per million) × tokens × multiplier (ten-thousandths) ÷ 10⁷, rounded
 * to the nearest nano-unit, in BigInt, since the product outgrows 2⁵³ long before a sum
 * of nano-units does. A call without cache parts costs exactly what costNanos says.
 */
export function callCost(limits: PricedLimits, model: string, usage: Usage): CallCost {
  const input = usage.inputTokens
  const read = Math.min(usage.cacheReadTokens ?? 0, input)
  const write = Math.min(usage.cacheWriteTokens ?? 0, input - read)
  const base = costNanos(limits, input - read - write, usage.outputTokens)
  if (read === 0 && write === 0) return { totalNanos: base, cacheReadNanos: 0, cacheWriteNanos: 0 }
  const multipliers = cacheMultipliers(model, limits)
  const price = BigInt(Math.round((limits.input_price ?? 0) * 1e6))
  const part = (tokens: number, multiplier: number): number => {
    const scaled = price * BigInt(tokens) * BigInt(multiplier)
    // Half up, as Math.round does for the base.
    return halfUp(scaled, BigInt(1000 * MULTIPLIER_SCALE))
  }
  const cacheReadNanos = part(read, multipliers.read)
  const cacheWriteNanos = part(write, multipliers.write)
  return { totalNanos: base + cacheReadNanos + cacheWriteNanos, cacheReadNanos, cacheWriteNanos }
}

/**
 * What a call is held at before its usage is known: its prompt at the dearest price any
 * of its tokens can have (the input price, or a cache write's when that is dearer, as
 * Anthropic's is), so the real cost never exceeds the hold.
 */
export function reservedCostNanos(
  limits: PricedLimits,
  model: string,
  inputTokens: number,
  outputTokens: number,
): number {
  const { write, read } = cacheMultipliers(model, limits)
  const dearest = Math.max(write, read)
  if (dearest <= MULTIPLIER_SCALE || (limits.input_price ?? 0) === 0)
    return costNanos(limits, inputTokens, outputTokens)
  return callCost(limits, model, {
    inputTokens,
    outputTokens,
    [write >= read ? 'cacheWriteTokens' : 'cacheReadTokens']: inputTokens,
  }).totalNanos
}

/**
 * Nano-units as a number of currency units, for JSON: an integer divided by a power of ten
 * prints as the short decimal it is (4271300 → 0.0042713).
 */
export function toUnits(nanos: number): number {
  return nanos / NANOS_PER_UNIT
}

/** The currency of plans that name none: the provider's catalogue prices in euros. */
export const DEFAULT_CURRENCY = 'EUR'

/** The ISO 4217 code every price and cost of these plans is in. */
export function planCurrency(plans: { readonly currency?: string | undefined }): string {
  return plans.currency ?? DEFAULT_CURRENCY
}

/**
 * An amount of currency units for people to read, the one way the portal, the CLI and the
 * CSV's readers see it. From one unit up: to the cent, with thousands grouped (1,234.50).
 * Below one: three significant digits, at least to the cent, trailing zeros past the cent
 * dropped (0.50, 0.123, 0.00036, 0.00000048): one call costs fractions of a cent, and a
 * non-zero amount is never printed as 0.00. Zero is 0.00.
 */
export function formatAmount(units: number): string {
  if (!Number.isFinite(units)) return String(units)
  if (units === 0) return '0.00'
  const size = Math.abs(units)
  if (size >= 1) return units.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
  const decimals = Math.min(20, Math.max(2, 2 - Math.floor(Math.log10(size))))
  return trimZeros(units.toFixed(decimals))
}

/** An amount with its currency beside it: "0.00036 EUR". */
export function formatMoney(units: number, currency: string): string {
  return `${formatAmount(units)} ${currency}`
}

/**
 * Nano-units as the exact decimal they are, for machines (the CSV): no exponent, no
 * grouping, no rounding (480 → 0.00000048, 1_500_000_000 → 1.50).
 */
export function exactAmount(nanos: number): string {
  const whole = Math.round(Math.abs(nanos))
  const units = Math.floor(whole / NANOS_PER_UNIT)
  const fraction = String(whole % NANOS_PER_UNIT).padStart(9, '0')
  return trimZeros(`${nanos < 0 && whole !== 0 ? '-' : ''}${units}.${fraction}`)
}

/** 0.000360 → 0.00036, 0.500 → 0.50: zeros past the second decimal go. */
function trimZeros(text: string): string {
  return text.replace(/(\.\d\d\d*?)0+$/, '$1')
}

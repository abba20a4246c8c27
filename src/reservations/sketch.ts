// A small, mergeable, decaying quantile sketch of completion tokens (a DDSketch with
// exponential decay): log-spaced buckets whose counts are weights.
//
// A value v > 0 falls in bucket i = ceil(log_γ v) with γ = (1 + α) / (1 − α); every value of a
// bucket is within a relative error α of 2γ^i / (γ + 1), the value a quantile answers. Zero has
// a bucket of its own. Merging two sketches adds their buckets, so any number of instances can
// add to one sketch in a store (a hash of buckets) in any order, and read the same quantile.
//
// Decay without rewriting every bucket: an observation at time t weighs 2^((t − t0) / halfLife)
// against the sketch's epoch t0, so older ones weigh exponentially less relative to newer ones;
// a reader scales the weights back by 2^(−(now − t0) / halfLife) to read them as "observations
// of weight 1 each, decayed". Once the weights grow large the epoch moves forward (rebase),
// scaling every bucket down once. Quantiles do not depend on the scale at all; only the count
// (how many decayed observations there are) does.

/** Relative accuracy of a quantile: ±2 %. */
export const RELATIVE_ACCURACY = 0.02
const GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
const LOG_GAMMA = Math.log(GAMMA)
/** Weights above this (2^40) move the epoch forward. */
export const REBASE_ABOVE = 2 ** 40
/** The bucket of a zero. */
export const ZERO = 'z'

/** The bucket a count of tokens falls in (a field name of the store's hash). */
export function bucketOf(tokens: number): string {
  if (!(tokens > 0)) return ZERO
  return String(Math.ceil(Math.log(tokens) / LOG_GAMMA))
}

/** The value a bucket stands for: within RELATIVE_ACCURACY of every value in it. */
export function valueOf(bucket: string): number {
  if (bucket === ZERO) return 0
  const i = Number(bucket)
  return (2 * GAMMA ** i) / (GAMMA + 1)
}

/** How much an observation at `at` weighs against epoch `t0`. */
export function weightAt(at: number, t0: number, halfLifeMs: number): number {
  return 2 ** ((at - t0) / halfLifeMs)
}

export interface Sketch {
  /** Epoch of the weights (ms). */
  t0: number
  /** Weight per bucket, at epoch t0. */
  readonly buckets: Map<string, number>
}

export function emptySketch(t0: number): Sketch {
  return { t0, buckets: new Map() }
}

/** Adds one observation at time `at`; rebases the sketch when its weights grew large. */
export function observe(sketch: Sketch, tokens: number, at: number, halfLifeMs: number): void {
  let weight = weightAt(at, sketch.t0, halfLifeMs)
  if (weight > REBASE_ABOVE) {
    rebase(sketch, at, halfLifeMs)
    weight = 1
  }
  const bucket = bucketOf(tokens)
  sketch.buckets.set(bucket, (sketch.buckets.get(bucket) ?? 0) + weight)
}

/** Moves the epoch to `at`, scaling every bucket; buckets that decayed to nothing go. */
export function rebase(sketch: Sketch, at: number, halfLifeMs: number): void {
  const scale = 1 / weightAt(at, sketch.t0, halfLifeMs)
  for (const [bucket, weight] of sketch.buckets) {
    const scaled = weight * scale
    if (scaled < 1e-9) sketch.buckets.delete(bucket)
    else sketch.buckets.set(bucket, scaled)
  }
  sketch.t0 = at
}

/** Adds `other` into `into` (both read at into's epoch). */
export function merge(into: Sketch, other: Sketch, halfLifeMs: number): void {
  const scale = weightAt(other.t0, into.t0, halfLifeMs)
  for (const [bucket, weight] of other.buckets)
    into.buckets.set(bucket, (into.buckets.get(bucket) ?? 0) + weight * scale)
}

/** Decayed observations as of `now`: each counts 1 when new, half after one half-life. */
export function countOf(sketch: Sketch, now: number, halfLifeMs: number): number {
  let total = 0
  for (const weight of sketch.buckets.values()) total += weight
  return total / weightAt(now, sketch.t0, halfLifeMs)
}

/** The q-quantile (0 < q ≤ 1) of the observations, within RELATIVE_ACCURACY; undefined when empty. */
export function quantileOf(sketch: Sketch, q: number): number | undefined {
  let total = 0
  for (const weight of sketch.buckets.values()) total += weight
  if (!(total > 0)) return undefined
  const ordered = [...sketch.buckets.entries()].sort(([a], [b]) =>
    a === ZERO ? -1 : b === ZERO ? 1 : Number(a) - Number(b),
  )
  const rank = q * total
  let seen = 0
  for (const [bucket, weight] of ordered) {
    seen += weight
    if (seen >= rank * (1 - 1e-12)) return valueOf(bucket)
  }
  const last = ordered[ordered.length - 1]
  return last === undefined ? undefined : valueOf(last[0])
}

/**
 * The length-weighted mean E[X²] / E[X]: the mean length of the calls running at a moment,
 * when a call runs for a time proportional to its length (a reply streams token by token).
 * Undefined when empty or all zero.
 */
export function lengthWeightedMeanOf(sketch: Sketch): number | undefined {
  let first = 0
  let second = 0
  for (const [bucket, weight] of sketch.buckets) {
    const v = valueOf(bucket)
    first += weight * v
    second += weight * v * v
  }
  return first > 0 ? second / first : undefined
}

// What a prompt cache's tokens cost, as multiples of the model's input price: a plan sets
// them per (tier, model) (cache_read_multiplier, cache_write_multiplier), and a model whose
// plan sets none is priced as its provider publishes (docs/models.md, "Cached tokens").
// The provider is told by the model's name, the one thing a plan's price is keyed by: the
// deployment that serves a call may change with failover, its price does not.
//
// The published rates (the providers' pricing pages, read for issue #38; prices change,
// and a plan that differs sets its own):
//  - Anthropic (claude-*): a cache read costs 0.1× the input price, a write 1.25× (the
//    default five-minute cache; one-hour writes cost 2×, which Anthropic's usage does not
//    tell apart in the totals Tollgate reads: set cache_write_multiplier: 2 for them).
//    https://docs.claude.com/en/docs/about-claude/pricing (prompt caching)
//  - OpenAI: caching is automatic and writes cost nothing extra (1×); a read costs 0.5×
//    on gpt-4o, o1 and o3-mini, 0.25× on gpt-4.1, o3 and o4-mini, 0.1× on gpt-5 (and
//    5.x). Open models that OpenAI does not serve (gpt-oss-*) are "any other model".
//    https://platform.openai.com/docs/pricing ("Cached input")
//  - Google (gemini-*): a read of cached content costs 0.25× on Gemini 2.0 and 1.5, 0.1×
//    on 2.5 and 3 (implicit and explicit caching alike); no per-token write (1×). The
//    hourly storage of an explicit cache is billed by Google per hour, not per call, and is
//    not a call's cost here. https://ai.google.dev/gemini-api/docs/pricing
//  - Any other model: 1× both ways, as every cached token was charged before plans could
//    price them: never less than the input price unless the plan says so.
import type { ModelLimits } from '../config/schema.ts'

/** Multipliers as integer ten-thousandths (0.1 → 1000, 1.25 → 12500): cost arithmetic stays in integers. */
export const MULTIPLIER_SCALE = 10_000

export interface CacheMultipliers {
  /** A cache read's price over the input price, in ten-thousandths. */
  readonly read: number
  /** A cache write's price over the input price, in ten-thousandths. */
  readonly write: number
}

const rate = (read: number, write: number): CacheMultipliers => ({
  read: Math.round(read * MULTIPLIER_SCALE),
  write: Math.round(write * MULTIPLIER_SCALE),
})

/** By model name, the first that matches (after any "vendor/" prefix). */
const PUBLISHED: ReadonlyArray<readonly [RegExp, CacheMultipliers]> = [
  [/^claude/i, rate(0.1, 1.25)],
  [/^gpt-5/i, rate(0.1, 1)],
  [/^(gpt-4o|o1|o3-mini)/i, rate(0.5, 1)],
  [/^(gpt-4\.1|o3|o4-mini)/i, rate(0.25, 1)],
  [/^gemini-(1\.|2\.0)/i, rate(0.25, 1)],
  [/^gemini/i, rate(0.1, 1)],
]

const AT_INPUT_PRICE = rate(1, 1)

/** What the provider of `model` publishes; 1× both ways for a model it cannot tell. */
export function publishedMultipliers(model: string): CacheMultipliers {
  const name = model.slice(model.lastIndexOf('/') + 1).trim()
  return PUBLISHED.find(([pattern]) => pattern.test(name))?.[1] ?? AT_INPUT_PRICE
}

/** The multipliers a call to `model` is charged at: the plan's, else the published ones. */
export function cacheMultipliers(
  model: string,
  limits: Pick<ModelLimits, 'cache_read_multiplier' | 'cache_write_multiplier'>,
): CacheMultipliers {
  const published = publishedMultipliers(model)
  const set = (value: number | undefined, fallback: number): number =>
    value === undefined ? fallback : Math.round(value * MULTIPLIER_SCALE)
  return {
    read: set(limits.cache_read_multiplier, published.read),
    write: set(limits.cache_write_multiplier, published.write),
  }
}

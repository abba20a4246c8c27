// x-ratelimit-* headers, as OpenAI sends them, for the dimensions a (key, model) has.
// "-tokens" describes tpm when the plan sets it; plans that only limit input and output
// tokens (the legacy catalogue's) show their input limit there, and every plan with
// input or output limits also gets the -input-tokens / -output-tokens triples.
import type { RateLimitHeaders } from './port.ts'
import type { CounterState, Dimension, DimensionName } from './dimensions.ts'
import { formatDuration } from './duration.ts'

/** A triple's header names, by the suffix they share: built once, not per call. */
interface TripleNames {
  readonly limit: string
  readonly remaining: string
  readonly reset: string
}

const namesOf = (suffix: string): TripleNames => ({
  limit: `x-ratelimit-limit-${suffix}`,
  remaining: `x-ratelimit-remaining-${suffix}`,
  reset: `x-ratelimit-reset-${suffix}`,
})

const TOKENS = namesOf('tokens')
const NAMES: Readonly<Partial<Record<DimensionName, TripleNames>>> = {
  requests: namesOf('requests'),
  tokens: TOKENS,
  input_tokens: namesOf('input-tokens'),
  output_tokens: namesOf('output-tokens'),
}

function triple(out: Record<string, string>, names: TripleNames, limit: number, state: CounterState | undefined): void {
  out[names.limit] = String(limit)
  if (state === undefined) return
  out[names.remaining] = String(Math.max(0, limit - state.used))
  out[names.reset] = formatDuration(state.resetMs)
}

/** Headers for these dimensions; without states (limits known, counters not) only the limits. */
export function rateLimitHeaders(dimensions: readonly Dimension[], states?: readonly CounterState[]): RateLimitHeaders {
  const out: Record<string, string> = {}
  const at = (name: DimensionName): number => dimensions.findIndex((d) => d.name === name)
  for (const [i, d] of dimensions.entries()) {
    const names = NAMES[d.name]
    if (names !== undefined) triple(out, names, d.limit, states?.[i])
  }
  if (at('tokens') === -1) {
    const stand = at('input_tokens') !== -1 ? at('input_tokens') : at('output_tokens')
    const d = dimensions[stand]
    if (d !== undefined) triple(out, TOKENS, d.limit, states?.[stand])
  }
  return out
}

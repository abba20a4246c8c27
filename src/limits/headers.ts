// x-ratelimit-* headers, as OpenAI sends them, for the dimensions a (key, model) has.
// "-tokens" describes tpm when the plan sets it; plans that only limit input and output
// tokens (the legacy catalogue's) show their input limit there, and every plan with
// input or output limits also gets the -input-tokens / -output-tokens triples.
import type { RateLimitHeaders } from './port.ts'
import type { CounterState, Dimension, DimensionName } from './dimensions.ts'
import { formatDuration } from './duration.ts'

const SUFFIX: Readonly<Partial<Record<DimensionName, string>>> = {
  requests: 'requests',
  tokens: 'tokens',
  input_tokens: 'input-tokens',
  output_tokens: 'output-tokens',
}

function triple(out: Record<string, string>, suffix: string, limit: number, state: CounterState | undefined): void {
  out[`x-ratelimit-limit-${suffix}`] = String(limit)
  if (state === undefined) return
  out[`x-ratelimit-remaining-${suffix}`] = String(Math.max(0, limit - state.used))
  out[`x-ratelimit-reset-${suffix}`] = formatDuration(state.resetMs)
}

/** Headers for these dimensions; without states (limits known, counters not) only the limits. */
export function rateLimitHeaders(dimensions: readonly Dimension[], states?: readonly CounterState[]): RateLimitHeaders {
  const out: Record<string, string> = {}
  const at = (name: DimensionName): number => dimensions.findIndex((d) => d.name === name)
  for (const [i, d] of dimensions.entries()) {
    const suffix = SUFFIX[d.name]
    if (suffix !== undefined) triple(out, suffix, d.limit, states?.[i])
  }
  if (at('tokens') === -1) {
    const stand = at('input_tokens') !== -1 ? at('input_tokens') : at('output_tokens')
    const d = dimensions[stand]
    if (d !== undefined) triple(out, 'tokens', d.limit, states?.[stand])
  }
  return out
}

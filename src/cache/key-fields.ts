// Which request fields do not change the answer, and so are left out of a reply's cache
// key (key.ts): one table, with the reason beside each. Everything not listed is part of
// the key, byte for byte after canonical ordering: a field we do not know might change the
// answer, so the safe default is to keep it. Only top-level fields are listed; nothing
// nested is ever dropped.
import type { Endpoint } from '../config/schema.ts'

/** The endpoints whose replies are cached: JSON in, one deterministic-enough reply out. */
export const CACHED_ENDPOINTS = ['chat.completions', 'completions', 'responses', 'embeddings'] as const
export type CachedEndpoint = (typeof CACHED_ENDPOINTS)[number]

export function isCachedEndpoint(endpoint: Endpoint): endpoint is CachedEndpoint {
  return (CACHED_ENDPOINTS as readonly string[]).includes(endpoint)
}

interface Exemption {
  readonly field: string
  /** Endpoints it is dropped for; absent: every cached endpoint. */
  readonly endpoints?: readonly CachedEndpoint[]
  readonly why: string
}

export const IGNORED_FIELDS: readonly Exemption[] = [
  { field: 'stream', why: 'the shape of the reply, not its content: a hit is replayed in the shape asked (replay.ts)' },
  {
    field: 'stream_options',
    why: 'include_usage and include_obfuscation change the chunks a stream carries, not the answer; replay honours include_usage',
  },
  { field: 'user', why: 'an end-user label for the provider’s abuse monitoring; the answer does not depend on it' },
  { field: 'safety_identifier', why: 'the successor of `user`: a label for abuse monitoring' },
  {
    field: 'prompt_cache_key',
    why: 'a routing hint for the provider’s prompt cache; the answer does not depend on it',
  },
  { field: 'metadata', why: 'tags kept with a stored object, for the caller’s own filtering' },
  {
    field: 'store',
    endpoints: ['chat.completions'],
    why: 'whether the provider keeps a copy for evals or distillation; a hit keeps none (docs/cache.md). Not dropped for responses: a stored response is never cached (policy.ts)',
  },
  { field: 'service_tier', why: 'the provider’s latency/price class for serving the call, not what it answers' },
]

/** The body without the fields that do not change the answer for `endpoint`. */
export function answerFields(endpoint: CachedEndpoint, body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(body)) {
    const rule = IGNORED_FIELDS.find((e) => e.field === name)
    const dropped = rule !== undefined && (rule.endpoints === undefined || rule.endpoints.includes(endpoint))
    if (!dropped) out[name] = value
  }
  return out
}

// Whether a call may be answered from the cache, and may be stored in it: the tier's
// rule for the call's model (plans: a tier's `cache`), what the client asked for
// (Cache-Control), and what the body says (sampling; a stored or background response).
import type { PlansConfig, TierCacheConfig } from '../config/schema.ts'
import { isCachedEndpoint, type CachedEndpoint } from './key-fields.ts'

export interface CacheRule {
  readonly ttlSeconds: number
  readonly sampled: boolean
  readonly chargeShare: number
  readonly scope: TierCacheConfig['scope']
  /** The semantic cache's rule, when it is on for the tier's model (semantic.ts). */
  readonly semantic?: SemanticRule
}

export interface SemanticRule {
  readonly embeddingModel: string
  readonly threshold: number
}

/** A model's `semantic` replaces the tier's whole; on once set, unless `enabled: false`; the schema requires its embedding model. */
function semanticOf(semantic: TierCacheConfig['semantic']): SemanticRule | undefined {
  if (semantic === undefined || semantic.enabled === false || semantic.embeddingModel === undefined) return undefined
  return { embeddingModel: semantic.embeddingModel, threshold: semantic.threshold ?? 0.95 }
}

/** The rule for a tier's model, or undefined when its replies are not cached. */
export function ruleOf(plans: PlansConfig, tier: string, model: string): CacheRule | undefined {
  const cache = plans.tiers[tier]?.cache
  if (cache === undefined) return undefined
  const own = cache.models[model] ?? {}
  if (!(own.enabled ?? cache.enabled)) return undefined
  const semantic = semanticOf(own.semantic ?? cache.semantic)
  return {
    ttlSeconds: own.ttlSeconds ?? cache.ttlSeconds,
    sampled: own.sampled ?? cache.sampled,
    chargeShare: own.chargeShare ?? cache.chargeShare,
    scope: own.scope ?? cache.scope,
    ...(semantic === undefined ? {} : { semantic }),
  }
}

/** What the client's Cache-Control asks: read a stored reply (not older than maxAge s), store this one. */
export interface ClientAsk {
  readonly read: boolean
  readonly store: boolean
  readonly maxAgeSeconds?: number
}

export function clientAsk(header: string | string[] | undefined): ClientAsk {
  const text = Array.isArray(header) ? header.join(',') : (header ?? '')
  let read = true
  let store = true
  let maxAgeSeconds: number | undefined
  for (const directive of text.toLowerCase().split(',')) {
    const [name = '', value] = directive.trim().split('=', 2)
    if (name === 'no-cache') read = false
    else if (name === 'no-store') read = store = false
    else if (name === 'max-age' && value !== undefined && /^\d+$/.test(value.trim()))
      maxAgeSeconds = Math.min(Number(value.trim()), Number.MAX_SAFE_INTEGER)
  }
  return { read, store, ...(maxAgeSeconds === undefined ? {} : { maxAgeSeconds }) }
}

/**
 * Why a body's reply is not cached, or null when it may be. Calls that sample are off
 * unless the rule says otherwise (OpenAI's default temperature is 1); a Responses call
 * that stores its response (the default) or runs in the background creates an object a
 * replay could not, so it always goes upstream.
 */
export function bodyBypass(endpoint: CachedEndpoint, body: Record<string, unknown>, rule: CacheRule): string | null {
  if (endpoint === 'responses' && (body.store !== false || body.background === true)) return 'stored response'
  if (endpoint === 'embeddings' || rule.sampled) return null
  return body.temperature === 0 ? null : 'sampling'
}

export { isCachedEndpoint }

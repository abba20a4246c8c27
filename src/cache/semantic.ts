// The semantic cache (docs/cache.md), second to the exact one: on an exact miss of a call
// whose tier and model turn it on, the prompt's last user turn (semantic-prompt.ts) is
// embedded through the gateway (semantic-embed.ts, metered to the caller), and the caller's
// scope's vectors of the same partition are searched for one at or above the rule's
// threshold (semantic-index.ts). A match names the exact key of a reply the exact cache
// holds for this scope, which is then served exactly as an exact hit is, with the
// similarity in a header. A miss keeps the vector; once its reply is stored under its exact
// key, the vector is added to the index pointing at it. Replies are only ever in the exact
// cache (sealed per scope), so a semantic match cannot reach anything an exact key of the
// same scope could not.
import type { Exchange, PreparedCall } from '../inference/call.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { Counter } from 'prom-client'
import type { EntryLabels, PurgeFilter } from './port.ts'
import type { SemanticRule } from './policy.ts'
import type { Sealer } from './seal.ts'
import { embed, type EmbedDeps } from './semantic-embed.ts'
import {
  createMemorySemanticIndex,
  nearest,
  type Match,
  type SemanticBounds,
  type SemanticIndex,
} from './semantic-index.ts'
import { partitionKey, semanticSplit, type SemanticEndpoint } from './semantic-prompt.ts'
import { createRedisSemanticIndex } from './semantic-redis.ts'

export const SIMILARITY_HEADER = 'x-tollgate-cache-similarity'
export const MATCH_HEADER = 'x-tollgate-cache-match'

/** Matches above the threshold tried in turn: the best one's reply may have expired or been evicted first. */
const TRIED = 3

/** What a lookup found: the vector to index if the call goes upstream, and a hit when there was one. */
export interface SemanticLookup<T> {
  readonly partition: string
  readonly vector: Float32Array
  /** A stored reply of a match (the most similar one still held), its headers set on the call's sink. */
  readonly hit?: { readonly entry: T; readonly match: Match }
}

export interface LookupAsk {
  readonly call: PreparedCall
  readonly exchange: Exchange
  readonly deps: EmbedDeps
  readonly rule: SemanticRule
  readonly scope: string
  readonly endpoint: SemanticEndpoint
}

export interface SemanticCache {
  /**
   * Embeds and searches; `open` reads the exact cache's entry a match names (undefined when it
   * is gone or too old for the call). undefined when the call has no text to embed or no vector.
   */
  lookup<T>(ask: LookupAsk, open: (key: string) => Promise<T | undefined>): Promise<SemanticLookup<T> | undefined>
  /** The reply of a looked-up call was stored under `key`: its vector points at it from now on. */
  index(scope: string, found: SemanticLookup<unknown>, key: string, ttlMs: number, labels: EntryLabels): Promise<void>
  purge(filter: PurgeFilter): Promise<number>
  close(): Promise<void>
}

export interface SemanticParts {
  readonly redis?: RedisConnection | undefined
  readonly prefix: string
  readonly bounds: SemanticBounds
  readonly secret: string
  readonly sealer: Sealer
  readonly metrics?: Pick<Metrics, 'registry'> | undefined
}

export function createSemanticCacheFromParts(parts: SemanticParts): SemanticCache {
  const index =
    parts.redis === undefined
      ? createMemorySemanticIndex(parts.bounds)
      : createRedisSemanticIndex(parts.redis, parts.prefix, parts.bounds, parts.sealer)
  return createSemanticCache(index, parts.secret, parts.bounds.scopeMaxVectors, parts.metrics)
}

export function createSemanticCache(
  index: SemanticIndex,
  secret: string,
  scopeMaxVectors: number,
  metrics?: Pick<Metrics, 'registry'>,
): SemanticCache {
  const lookups = new Counter({
    name: 'tollgate_response_cache_semantic_lookups_total',
    help: 'Semantic lookups after an exact miss: hit, miss, or skipped (no text to embed, no vector)',
    labelNames: ['result'],
    registers: metrics === undefined ? [] : [metrics.registry],
  })
  const vectorsAdded = new Counter({
    name: 'tollgate_response_cache_semantic_vectors_total',
    help: 'Vectors added to the semantic index (added) and removed before their time for its bounds (evicted)',
    labelNames: ['result'],
    registers: metrics === undefined ? [] : [metrics.registry],
  })
  return {
    async lookup({ call, exchange, deps, rule, scope, endpoint }, open) {
      if (call.body.kind !== 'json' || call.modelName === null) return undefined
      const split = semanticSplit(endpoint, call.body.value)
      if (split === undefined) {
        lookups.inc({ result: 'skipped' })
        return undefined
      }
      const embedded = await embed(deps, call, exchange, rule.embeddingModel, split.text)
      if ('failed' in embedded) {
        exchange.log.info({ reason: embedded.failed }, 'no embedding for the semantic cache; looked up exactly only')
        lookups.inc({ result: 'skipped' })
        return undefined
      }
      const partition = partitionKey(secret, {
        scope,
        endpoint,
        model: call.modelName,
        embeddingModel: rule.embeddingModel,
        rest: split.rest,
      })
      let candidates: Awaited<ReturnType<SemanticIndex['vectors']>> = []
      try {
        candidates = await index.vectors(scope, partition)
      } catch (err) {
        exchange.log.warn({ err: (err as Error).message }, 'the semantic index could not be read; a miss')
      }
      // Bounded by the add script or the memory bounds; a store somehow over them is searched no further.
      for (const match of nearest(embedded.vector, candidates.slice(0, scopeMaxVectors), rule.threshold, TRIED)) {
        const entry = await open(match.key)
        if (entry === undefined) continue
        lookups.inc({ result: 'hit' })
        exchange.sink.setHeader(MATCH_HEADER, 'semantic')
        exchange.sink.setHeader(SIMILARITY_HEADER, match.similarity.toFixed(4))
        return { partition, vector: embedded.vector, hit: { entry, match } }
      }
      lookups.inc({ result: 'miss' })
      return { partition, vector: embedded.vector }
    },
    async index(scope, found, key, ttlMs, labels) {
      const result = await index.add(scope, found.partition, key, found.vector, ttlMs, labels)
      if (result.stored) vectorsAdded.inc({ result: 'added' })
      if (result.evicted > 0) vectorsAdded.inc({ result: 'evicted' }, result.evicted)
    },
    purge: (filter) => index.purge(filter),
    close: () => index.close(),
  }
}

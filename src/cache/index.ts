// The response cache (docs/cache.md): one step of the corridor, after intake (so every id
// the body names is already the caller's) and before admission. A hit is answered here, in
// the shape the call asked for, without admission: free against the key's rate limits,
// metered as a request and spent from its budgets at the tier's share of the reply's price
// (0 by default: free). A miss goes on
// with its reply sink copied; once the reply ended whole it is assembled, sealed for its
// scope and stored. Entries are keyed and sealed per scope (key.ts, seal.ts), so no scope
// can name, let alone open, another's. On an exact miss, the semantic cache (semantic.ts) may
// find a stored reply of the same scope for a paraphrase.
import { randomBytes } from 'node:crypto'
import { NO_USAGE, type Usage } from '../backends/port.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { Config } from '../config/schema.ts'
import type { Meter } from '../keys/meter.ts'
import { callCost } from '../keys/money.ts'
import type { Principal } from '../keys/record.ts'
import type { Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import type { CallResult, Exchange, PreparedCall } from '../inference/call.ts'
import { showLimits } from '../inference/caller.ts'
import { streamAskOf } from '../inference/upstream-request.ts'
import { assembled } from './assemble.ts'
import { captureSink, type Captured } from './capture-sink.ts'
import { cacheKey } from './key.ts'
import { isCachedEndpoint, type CachedEndpoint } from './key-fields.ts'
import { createMemoryCacheStore } from './memory-store.ts'
import { cacheMetrics, type CacheMetrics } from './metrics.ts'
import { bodyBypass, clientAsk, ruleOf, type CacheRule } from './policy.ts'
import type { PurgeFilter, ResponseCacheStore } from './port.ts'
import { createRedisCacheStore } from './redis-store.ts'
import { refreshed, streamFrames } from './replay.ts'
import { createSealer, type Sealer } from './seal.ts'
import { createSemanticCacheFromParts, type SemanticCache, type SemanticLookup } from './semantic.ts'
import type { EmbedDeps } from './semantic-embed.ts'

export type { PurgeFilter } from './port.ts'

/** What the corridor lends the step: how a hit shows the limits and is metered, and itself (a semantic lookup's embedding). */
export interface StepDeps extends EmbedDeps {
  readonly limiter: Limiter
  readonly meter: Meter
}

/** A hit: `served`, the call is over. Otherwise the call goes on with `exchange` (a miss: its reply kept as it flows). */
export interface StepResult {
  readonly served?: CallResult
  readonly exchange: Exchange
}

export interface ResponseCache {
  /** The corridor's step, after intake and before admission: undefined when the cache has nothing to do with the call. */
  step(call: PreparedCall, exchange: Exchange, deps: StepDeps): Promise<StepResult | undefined>
  /** DELETE /admin/cache: removes the matching entries; resolves with how many. */
  purge(filter: PurgeFilter): Promise<number>
  close(): Promise<void>
}

/** What is sealed under a key. */
interface Entry {
  readonly v: 1
  readonly reply: Record<string, unknown>
  readonly usage: Usage
  /** Epoch ms. */
  readonly storedAt: number
}

export interface ResponseCacheParts {
  readonly redis?: RedisConnection | undefined
  readonly log: Logger
  readonly metrics?: Pick<Metrics, 'registry'>
  /** Entries are keyed and sealed under the key-hash secret. */
  readonly secrets: { readonly keyHashSecret: string | undefined }
  /** Which tenant an owner is in, when it is in one (budgets/book.ts reads the accounts). */
  readonly budgets?: Pick<BudgetBook, 'tenantOf'>
}

export const CACHE_HEADER = 'x-tollgate-cache'

/** The response cache the configuration asks for; its store is Redis when the gateway's is. */
export function createResponseCacheFromConfig(config: Config, parts: ResponseCacheParts): ResponseCache {
  const bounds = config.responseCache
  const store =
    parts.redis === undefined
      ? createMemoryCacheStore(bounds)
      : createRedisCacheStore(parts.redis, config.store.keyPrefix, bounds)
  // Without a configured secret (embedded, first boot), one per process: the memory store dies with it anyway.
  const secret = parts.secrets.keyHashSecret ?? randomBytes(32).toString('base64url')
  const sealer = createSealer(secret)
  const semantic = createSemanticCacheFromParts({
    redis: parts.redis,
    prefix: config.store.keyPrefix,
    bounds: bounds.semantic,
    secret,
    sealer,
    metrics: parts.metrics,
  })
  return createResponseCache({
    store,
    secret,
    sealer,
    semantic,
    log: parts.log,
    metrics: cacheMetrics(parts.metrics?.registry, () => store.bytes()),
    maxEntryBytes: bounds.maxEntryBytes,
    tenantOf: (owner) => parts.budgets?.tenantOf(owner),
  })
}

interface CacheDeps {
  readonly store: ResponseCacheStore
  readonly secret: string
  readonly sealer: Sealer
  readonly log: Logger
  readonly metrics: CacheMetrics
  readonly maxEntryBytes: number
  readonly tenantOf: (owner: string) => string | undefined
  readonly semantic?: SemanticCache
}

export function createResponseCache(d: CacheDeps): ResponseCache {
  return {
    async step(call, exchange, deps) {
      const { spec, body, modelName } = call
      const endpoint = spec.endpoint
      if (body.kind !== 'json' || modelName === null || !isCachedEndpoint(endpoint)) return undefined
      const rule = ruleOf(call.runtime.config.plans, call.resolved.tier, modelName)
      if (rule === undefined) return undefined
      const ask = clientAsk(exchange.client.req.headers['cache-control'])
      const sink = exchange.sink
      if (bodyBypass(endpoint, body.value, rule) !== null || !ask.store) {
        d.metrics.lookups.inc({ result: 'bypass', endpoint })
        sink.setHeader(CACHE_HEADER, 'bypass')
        return undefined
      }
      const tenant = d.tenantOf(call.principal.owner) ?? call.principal.owner
      const scope = scopeOf(rule, call.principal, tenant)
      const key = cacheKey(d.secret, { scope, endpoint, model: modelName, body: body.value })
      const open = async (at: string): Promise<Entry | undefined> => {
        const entry = await read(d, scope, at, exchange.log)
        const young = ask.maxAgeSeconds === undefined || Date.now() - (entry?.storedAt ?? 0) <= ask.maxAgeSeconds * 1000
        return young ? entry : undefined
      }
      let similar: SemanticLookup<Entry> | undefined
      if (ask.read) {
        const entry = await open(key)
        if (entry === undefined && rule.semantic !== undefined && endpoint !== 'embeddings')
          similar = await d.semantic?.lookup({ call, exchange, deps, rule: rule.semantic, scope, endpoint }, open)
        const hit = entry ?? similar?.hit?.entry
        if (hit !== undefined) {
          d.metrics.lookups.inc({ result: 'hit', endpoint })
          return { served: await serve(call, exchange, deps, endpoint, rule, hit), exchange }
        }
      }
      d.metrics.lookups.inc({ result: ask.read ? 'miss' : 'bypass', endpoint })
      sink.setHeader(CACHE_HEADER, ask.read ? 'miss' : 'bypass')
      const keep = (captured: Captured): void => {
        void store(d, { call, exchange, endpoint, rule, scope, key, tenant, similar }, captured).catch((err: unknown) =>
          exchange.log.warn({ err: (err as Error).message }, 'a reply could not be stored in the response cache'),
        )
      }
      return { exchange: { ...exchange, sink: captureSink(sink, d.maxEntryBytes, keep) } }
    },
    purge: async (filter) => {
      await d.semantic?.purge(filter)
      return await d.store.purge(filter)
    },
    close: async () => {
      await d.semantic?.close()
      await d.store.close()
    },
  }
}

/** The isolation scope a tier asks for; a tenant scope without a known tenant is the owner's. */
function scopeOf(rule: CacheRule, principal: Principal, tenant: string): string {
  if (rule.scope === 'key') return `k:${principal.keyId}`
  if (rule.scope === 'owner') return `o:${principal.owner}`
  return `t:${tenant}`
}

async function read(d: CacheDeps, scope: string, key: string, log: Logger): Promise<Entry | undefined> {
  try {
    const sealed = await d.store.get(scope, key)
    const plain = sealed === undefined ? undefined : d.sealer.open(scope, key, sealed)
    if (plain === undefined) return undefined
    const entry = JSON.parse(plain.toString('utf8')) as Entry
    return entry.v === 1 ? entry : undefined
  } catch (err) {
    // A store that does not answer is a miss, never a failed call.
    log.warn({ err: (err as Error).message }, 'the response cache could not be read; the call goes upstream')
    return undefined
  }
}

interface Miss {
  readonly call: PreparedCall
  readonly exchange: Exchange
  readonly endpoint: CachedEndpoint
  readonly rule: CacheRule
  readonly scope: string
  readonly key: string
  readonly tenant: string
  /** A semantic lookup's vector, added to the index once the reply is stored. */
  readonly similar: SemanticLookup<unknown> | undefined
}

async function store(d: CacheDeps, m: Miss, captured: Captured): Promise<void> {
  if (captured.status !== 200) return
  // A reply an external check failed open on went out unjudged: a hit would skip the check for good.
  if (m.call.replyUnjudged?.() === true) return
  // A whole reply to a masked call carries the caller's own values again (guardrails `restore`):
  // under a key made of the masked body it would reach another body that masks the same. Only
  // the upstream's text, placeholders and all (a stream keeps them), is stored.
  if (m.call.unmask !== undefined && !captured.contentType.startsWith('text/event-stream')) return
  const reply = assembled(m.endpoint, captured.contentType, captured.bytes)
  const usage = m.exchange.notes.usage
  if (reply === undefined || usage === undefined) return
  const entry: Entry = { v: 1, reply: withUsage(m.endpoint, reply, usage), usage, storedAt: Date.now() }
  const sealed = d.sealer.seal(m.scope, m.key, Buffer.from(JSON.stringify(entry)))
  const { principal, modelName } = m.call
  const labels = { keyId: principal.keyId, owner: principal.owner, tenant: m.tenant, model: modelName ?? '' }
  const result = await d.store.put(m.scope, m.key, sealed, m.rule.ttlSeconds * 1000, labels)
  if (result.stored) d.metrics.storedBytes.inc(sealed.length)
  if (result.evicted > 0) d.metrics.evictions.inc(result.evicted)
  if (result.stored && m.similar !== undefined)
    await d.semantic?.index(m.scope, m.similar, m.key, m.rule.ttlSeconds * 1000, labels)
}

/** A stream whose client did not ask for usage carried none: the stored reply gets the metered one. */
function withUsage(endpoint: CachedEndpoint, reply: Record<string, unknown>, usage: Usage): Record<string, unknown> {
  if (reply.usage !== undefined || endpoint === 'responses' || endpoint === 'embeddings') return reply
  return {
    ...reply,
    usage: {
      prompt_tokens: usage.inputTokens,
      completion_tokens: usage.outputTokens,
      total_tokens: usage.inputTokens + usage.outputTokens,
    },
  }
}

/** The hit: limits shown (not spent), the request metered at the tier's share, the reply in the shape asked. */
async function serve(
  call: PreparedCall,
  exchange: Exchange,
  deps: StepDeps,
  endpoint: CachedEndpoint,
  rule: CacheRule,
  entry: Entry,
): Promise<CallResult> {
  const { principal, resolved, spec, body } = call
  const sink = exchange.sink
  const ask = streamAskOf(spec, body)
  const now = Date.now()
  const fresh = refreshed(endpoint, entry.reply, Math.floor(now / 1000))
  // Placeholders put back for this caller where a miss would (a whole reply; a stream keeps them).
  const reply = !ask.stream && call.unmask !== undefined ? (call.unmask(fresh) as Record<string, unknown>) : fresh
  const full = callCost(resolved.limits, resolved.model, entry.usage).totalNanos
  const costNanos = Math.round(full * rule.chargeShare)
  // A stored request's hit is charged once (Exchange.chargeAs), or not at all when cut to run again.
  const as = exchange.chargeAs?.() ?? 'plain'
  const once = typeof as === 'object' ? { once: as } : {}
  // A charged share is spent from the key's budgets first: a budget that cannot cover it refuses
  // the hit with admission's own refusal (a miss, which costs more, would be refused too).
  if (costNanos > 0 && as !== 'nothing') {
    const identity = { keyId: principal.keyId, owner: principal.owner, tier: resolved.tier, model: resolved.model }
    await deps.limiter.spendBudgets?.({ ...identity, costNanos, ...once })
  }
  sink.setHeader(CACHE_HEADER, 'hit')
  sink.setHeader('x-tollgate-cache-age', String(Math.max(0, Math.floor((now - entry.storedAt) / 1000))))
  if (typeof entry.reply.id === 'string') sink.setHeader('x-tollgate-cache-origin-id', entry.reply.id)
  // Metered before the reply goes out (as the relay does), the limits read meanwhile.
  const shown = showLimits(sink, deps.limiter, principal.keyId, resolved)
  if (as !== 'nothing')
    await deps.meter.record({
      keyId: principal.keyId,
      owner: principal.owner,
      tier: resolved.tier,
      model: resolved.model,
      inputTokens: 0,
      outputTokens: 0,
      costNanos,
      cachedRequests: 1,
      ...(typeof as === 'object' ? { id: as.id, keepIdMs: as.keepMs } : {}),
    })
  await shown
  exchange.notes.backend = 'cache'
  exchange.notes.usage = NO_USAGE
  exchange.notes.stream = ask.stream
  sink.statusCode = 200
  if (ask.stream) {
    sink.setHeader('content-type', 'text/event-stream; charset=utf-8')
    sink.setHeader('cache-control', 'no-cache')
    for (const frame of streamFrames(endpoint, reply, ask.clientWantsUsage)) sink.write(frame)
    sink.end()
  } else {
    const payload = JSON.stringify(reply)
    sink.setHeader('content-type', 'application/json')
    sink.setHeader('content-length', Buffer.byteLength(payload))
    sink.end(payload)
  }
  return { status: 200, usage: NO_USAGE, aborted: false }
}

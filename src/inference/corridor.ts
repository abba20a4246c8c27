// The corridor of a proxied call (/v2, /v1, /queue):
// authenticate → scopes → read + validate body → resolve model → ownership →
// admit (limits) → upstream with failover → relay (usage tap) → settle (limits, meter).
//
// /v2 and /queue walk the same corridor. What differs is passed in: how a call is
// admitted (an AdmissionStrategy: /v2 asks the limiter once and answers its 429; /queue
// waits in the key's line first), and where the reply goes (an Exchange: a live client,
// or a recorder when a queue worker runs a stored request with nobody connected).
import type { ApiKeyAuthenticator } from '../auth/api-key.ts'
import type { Deployment, BackendRegistry } from '../backends/registry.ts'
import { NO_USAGE, type UpstreamRequest, type Usage } from '../backends/port.ts'
import type { Config } from '../config/schema.ts'
import { type ErrorName, GatewayError, gatewayError } from '../errors.ts'
import { readJsonBody, readMultipartBody, type RequestBody } from '../http/body.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import type { Params } from '../http/router.ts'
import type { Meter } from '../keys/meter.ts'
import type { StreamJournalService, StreamTally } from '../keys/stream-journal.ts'
import type { Principal } from '../keys/record.ts'
import { countPromptTokens, estimateUsage, type Estimate } from '../limits/estimate.ts'
import { costNanos, toUnits } from '../keys/money.ts'
import { resolveLimits, tierOf, type ResolvedLimits } from '../limits/plans.ts'
import type { Admission, AdmissionRequest, Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import { pickOrder, sendWithFailover } from '../proxy/failover.ts'
import { detachedClient } from '../proxy/detached-client.ts'
import { relay } from '../proxy/relay.ts'
import type { ReplySink } from '../proxy/reply-sink.ts'
import type { OwnershipStore } from '../store/ports.ts'
import type { FileQuota, UploadHold } from '../files/quota.ts'
import { withPathModel } from './azure-endpoints.ts'
import type { EndpointSpec } from './endpoints.ts'
import { listPaging } from './list-pages.ts'
import { checkOwnership, ownershipTransformOf } from './ownership.ts'
import { replyObjectsOf } from './reply-objects.ts'
import { checkEndpointScope, checkModelScope } from './scopes.ts'
import { modelOf, validateBody } from './validate.ts'

export interface InferenceDeps {
  readonly config: Config
  readonly registry: BackendRegistry
  readonly authenticate: ApiKeyAuthenticator
  readonly limiter: Limiter
  readonly ownership: OwnershipStore
  /** Files per key (storageCaps): uploads hold room first, deletes give it back. */
  readonly fileQuota?: FileQuota
  readonly meter: Meter
  readonly metrics: Metrics
  readonly spoolDir: string
  /** Journals live streams as they flow, so a crash still charges them (keys/stream-journal.ts). */
  readonly streams?: StreamJournalService
}

/** A call that passed every check before admission: who, what, which limits, what it may cost. */
export interface PreparedCall {
  readonly spec: EndpointSpec
  readonly params: Params
  readonly query: URLSearchParams
  readonly principal: Principal
  readonly body: RequestBody
  /** The public model the body names, or null for endpoints without one. */
  readonly modelName: string | null
  readonly resolved: ResolvedLimits
  readonly estimate: Estimate
  /** An upload's room under its key's file caps, held until the reply (files.create). */
  readonly upload?: UploadHold
}

/** What the access log (or a queue record) reads once the call is over. RequestContext is one. */
export interface CallNotes {
  backend?: string
  usage?: Usage
  upstreamMs?: number
  stream?: boolean
  errorName?: ErrorName
}

/** Where a call's reply goes. */
export interface Exchange {
  /** Sent upstream as x-request-id. */
  readonly id: string
  readonly log: Logger
  /** Aborted when nobody wants the reply any more (the client left, the request was cancelled). */
  readonly signal: AbortSignal
  /** What the relay writes the reply to. */
  readonly sink: ReplySink
  /** The exchange an adapter proxies (http-proxy-3 reads the method from it and watches it). */
  readonly client: UpstreamRequest['client']
  readonly notes: CallNotes
  /**
   * A client receives the reply as it flows. Only such a stream is journalled: a stored
   * request cut by a crash delivered nothing to anyone, and runs again elsewhere.
   */
  readonly live?: boolean
}

/** The admit step of the corridor. */
export interface AdmissionStrategy {
  /**
   * Admits the call or throws (a 429 GatewayError, or whatever ended the wait). `attempt`
   * is 0, then n after n upstream answers were put back (see retryUpstream).
   */
  admit(request: AdmissionRequest, attempt: number): Promise<Admission>
  /**
   * Whether an upstream failure (a status, before any byte of it reached the client; or
   * 502 when no deployment could be reached) is put back to be admitted again rather
   * than answered. Absent: answered, as on /v2.
   */
  retryUpstream?(status: number, attempt: number): boolean
}

/** How the call ended, for callers that keep a record of it. */
export interface CallResult {
  /** The status the reply was given (the upstream's, or the gateway's own error). */
  readonly status: number
  readonly usage: Usage
  /** The reply stopped before its end (the client left, the request was cancelled). */
  readonly aborted: boolean
}

export interface EnterOptions {
  /** Route label for logs and metrics; default the endpoint name. */
  readonly route?: string
  /** Largest body accepted, when lower than the server's limits. */
  readonly bodyLimitBytes?: number
  /** Why the body limit is lower, for the 413's message. */
  readonly bodyLimitReason?: string
}

export interface Corridor {
  /**
   * The corridor up to admission for a live request: authenticate → scopes → body →
   * model → ownership → limits → estimate. Then `proceed` takes the call. A refusal on
   * the way (or from `proceed`) still tells the client where its limits stand. A spooled
   * upload is deleted once `proceed` is done.
   */
  enter(ctx: RequestContext, spec: EndpointSpec, params: Params, query: URLSearchParams,
    proceed: (call: PreparedCall) => Promise<void>, options?: EnterOptions): Promise<void>
  /** Admit (the strategy) → upstream with failover → relay into the exchange → settle. */
  run(call: PreparedCall, exchange: Exchange, strategy: AdmissionStrategy): Promise<CallResult>
  /** A call for a key and a body checked earlier (a stored request): scopes are checked again. */
  restore(principal: Principal, spec: EndpointSpec, parts: Pick<PreparedCall, 'params' | 'query' | 'body' | 'modelName' | 'estimate'>): PreparedCall
}

/** Endpoints whose streamed usage the upstream only reports when asked. */
const ASK_FOR_STREAM_USAGE = new Set(['chat.completions', 'completions'])

/** Returned by forward() when the strategy puts an upstream failure back. */
const PUT_BACK = Symbol('put back')

/** The exchange of a live request: the reply goes to the client. */
export function liveExchange(ctx: RequestContext): Exchange {
  return { id: ctx.id, log: ctx.log, signal: ctx.signal, sink: ctx.res, client: { req: ctx.req, res: ctx.res }, notes: ctx, live: true }
}

/** /v2: one admission; over the limit is the client's 429. */
export function limiterStrategy(limiter: Limiter): AdmissionStrategy {
  return { admit: (request) => limiter.admit(request) }
}

export function createCorridor(deps: InferenceDeps): Corridor {
  const { config, registry, limiter, metrics } = deps
  // Spreads calls over a model's deployments by weight; a deployment that keeps failing
  // to connect is tried last for a while.
  let rotation = 0
  const breaker = new CircuitBreaker()
  const bodyRate = bodyRateOf(config.server)

  const readBody = (ctx: RequestContext, spec: EndpointSpec, limit: number | undefined, reason: string | undefined): Promise<RequestBody> => {
    const within = (serverLimit: number): number => Math.min(serverLimit, limit ?? serverLimit)
    const read = (): Promise<RequestBody> => {
      switch (spec.body) {
        case 'json': return readJsonBody(ctx.req, within(config.server.jsonBodyLimitBytes), bodyRate)
        case 'multipart': return readMultipartBody(ctx.req, within(config.server.uploadLimitBytes), deps.spoolDir, bodyRate)
        case 'none': return Promise.resolve({ kind: 'none' })
      }
    }
    if (reason === undefined) return read()
    return read().catch((err: unknown) => {
      if (err instanceof GatewayError && err.errorName === 'body_too_large') {
        throw gatewayError('body_too_large', { message: `${err.message} ${reason}` })
      }
      throw err
    })
  }

  const targetsFor = (spec: EndpointSpec, modelName: string | null): readonly Deployment[] => {
    if (spec.resource) return [registry.resources]
    const route = modelName === null ? undefined : registry.model(modelName)
    return route?.deployments ?? []
  }

  function restore(principal: Principal, spec: EndpointSpec, parts: Pick<PreparedCall, 'params' | 'query' | 'body' | 'modelName' | 'estimate'>): PreparedCall {
    checkEndpointScope(principal, spec.endpoint)
    if (parts.modelName !== null) checkModelScope(principal, parts.modelName)
    const resolved = resolveLimits(config.plans, principal.key, parts.modelName ?? '*')
    return { spec, principal, resolved, ...parts }
  }

  async function enter(
    ctx: RequestContext, spec: EndpointSpec, params: Params, query: URLSearchParams,
    proceed: (call: PreparedCall) => Promise<void>, options: EnterOptions = {},
  ): Promise<void> {
    ctx.route = options.route ?? spec.endpoint
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    ctx.tier = tierOf(principal.key, config.plans)
    checkEndpointScope(principal, spec.endpoint)

    let resolved: ResolvedLimits | undefined
    let body: RequestBody = { kind: 'none' }
    let upload: UploadHold | undefined
    try {
      body = await readBody(ctx, spec, options.bodyLimitBytes, options.bodyLimitReason)
      if (spec.modelParam !== undefined) body = withPathModel(body, params[spec.modelParam] ?? '')
      validateBody(spec.endpoint, body, query)
      const modelName = spec.modelKinds ? modelOf(body) : null
      if (modelName !== null) {
        const route = registry.model(modelName)
        const baseModel = spec.endpoint === 'fine_tuning.jobs.create' && config.fineTuning.baseModels.includes(modelName)
        if (!baseModel && (!route || !spec.modelKinds?.includes(route.config.kind))) {
          throw gatewayError('model_not_found', { message: `The model '${printable(modelName)}' does not exist or cannot be used with this endpoint. GET /v2/models lists the models this key may use.`, param: 'model' })
        }
        checkModelScope(principal, modelName)
        ctx.model = modelName
      }
      resolved = resolveLimits(config.plans, principal.key, modelName ?? '*')
      await checkOwnership(deps.ownership, spec, params, query, body, principal.owner)
      const json = body.kind === 'json' ? body.value : null
      const estimate = estimateUsage(spec.endpoint, json, {
        defaultMaxTokens: config.defaultMaxTokens,
        contextTokens: modelName === null ? undefined : registry.model(modelName)?.config.contextTokens,
      })
      upload = await deps.fileQuota?.hold(spec, principal, resolved.tier, body)
      await proceed({ spec, params, query, principal, body, modelName, resolved, estimate, ...(upload === undefined ? {} : { upload }) })
    } catch (err) {
      // A refusal after authentication still tells the client where its limits stand
      // (the limiter's own 429s carry them already).
      if (!ctx.res.headersSent && !(err instanceof GatewayError && err.status === 429 && Object.keys(err.headers).some((h) => h.startsWith('x-ratelimit-')))) {
        const limits = resolved ?? resolveLimits(config.plans, principal.key, ctx.model ?? '*')
        const headers = await limiter.peek({ keyId: principal.keyId, tier: limits.tier, model: limits.model, limits: limits.limits }).catch(() => ({}))
        for (const [name, value] of Object.entries(headers)) ctx.res.setHeader(name, value)
      }
      throw err
    } finally {
      await upload?.end()
      if (body.kind === 'multipart') await body.dispose()
    }
  }

  async function run(call: PreparedCall, exchange: Exchange, strategy: AdmissionStrategy): Promise<CallResult> {
    const { principal, resolved, estimate } = call
    const request: AdmissionRequest = {
      keyId: principal.keyId, tier: resolved.tier, model: resolved.model, limits: resolved.limits, estimate,
      ...(estimate.outputDefaulted ? { reservationNote: defaultReservationNote(estimate.outputTokens, config.defaultMaxTokens) } : {}),
    }
    for (let attempt = 0; ; attempt++) {
      const admission = await strategy.admit(request, attempt)
      for (const [name, value] of Object.entries(admission.headers)) exchange.sink.setHeader(name, value)
      const result = await forward(call, exchange, admission, strategy, attempt)
      if (result !== PUT_BACK) return result
    }
  }

  async function forward(call: PreparedCall, exchange: Exchange, admission: Admission, strategy: AdmissionStrategy, attempt: number): Promise<CallResult | typeof PUT_BACK> {
    const { spec, params, query, principal, body, modelName } = call
    const { notes, log } = exchange
    const json = body.kind === 'json' ? body.value : null
    // A multipart form (a streamed transcription) says it as the text field "true".
    const asked = json ? json.stream === true : body.kind === 'multipart' && body.fields.stream === 'true'
    const stream = spec.streams === true && asked
    notes.stream = stream
    const options = json?.stream_options as { include_usage?: unknown } | null | undefined
    const clientWantsUsage = stream && options?.include_usage === true
    const targets = targetsFor(spec, modelName).filter((t) => t.adapter.supports(spec.endpoint))
    if (targets.length === 0) {
      await admission.settle(NO_USAGE)
      throw gatewayError('capability_missing')
    }
    const search = query.toString()
    const path = spec.upstreamPath(params) + (search ? `?${search}` : '')
    // A list filtered by owner is filled from the deployment that served its first page
    // (paging backwards with `before` is left as the upstream's page).
    let servedBy: Deployment | undefined
    const paging = spec.ownership?.action === 'list' && !query.has('before')
      ? listPaging({
        query,
        jsonLimitBytes: config.server.upstreamJsonLimitBytes,
        send: async (pageSearch) => {
          if (servedBy === undefined) throw gatewayError('internal')
          const pagePath = `${spec.upstreamPath(params)}?${pageSearch}`
          return servedBy.adapter.send({ ...build(servedBy), path: pagePath, client: detachedClient(spec.method, pagePath) })
        },
      })
      : undefined
    const owned = ownershipTransformOf(deps.ownership, spec, principal.owner, paging)
    const transformJson = call.upload?.onReply(owned) ?? deps.fileQuota?.onDelete(spec, owned) ?? owned
    // A stored response and its items become the caller's to name later (object-ids.ts).
    const handedOut = replyObjectsOf(spec.endpoint, json, deps.ownership, principal.owner, log)

    const build = (target: Deployment): UpstreamRequest => {
      let upstreamBody = body
      if (json) {
        const value: Record<string, unknown> = { ...json }
        if (target.upstreamModel !== null && 'model' in value) value.model = target.upstreamModel
        if (stream && ASK_FOR_STREAM_USAGE.has(spec.endpoint)) {
          value.stream_options = { ...(typeof options === 'object' ? options : {}), include_usage: true }
        }
        upstreamBody = { kind: 'json', value }
      }
      return {
        endpoint: spec.endpoint,
        method: spec.method,
        path,
        model: target.upstreamModel,
        body: upstreamBody,
        requestId: exchange.id,
        signal: exchange.signal,
        client: exchange.client,
      }
    }
    const putBack = (status: number): boolean => strategy.retryUpstream?.(status, attempt) === true && !exchange.signal.aborted

    const started = performance.now()
    let usage: Usage = NO_USAGE
    let aborted: boolean
    let status: number
    // Settled once: by the relay before a whole reply's last bytes (so a crash right after
    // loses nothing a client received), or after it for a reply that broke off.
    let settled = false
    let tally: StreamTally | undefined
    // Whether the call failed inside sendWithFailover after an attempt it already counted.
    let attemptFailed = false
    let failedSending = false
    const settleOnce = async (final: Usage): Promise<void> => {
      if (settled) return
      settled = true
      usage = final
      notes.usage = final
      // Its checkpoints land before the write that meters it and removes its entry.
      await tally?.close()
      await Promise.all([settle(call, final, admission, tally?.id), handedOut?.flush()])
    }
    try {
      let sent
      try {
        sent = await sendWithFailover(pickOrder(targets, rotation++), build, {
          breaker,
          // Every failed attempt is an upstream error, the ones a failover then saved too;
          // only an attempt followed by another deployment is a failover.
          onAttemptFailed: (target, reason, next) => {
            attemptFailed = true
            metrics.upstreamErrors.inc({ backend: target.adapter.name, reason: reason instanceof GatewayError ? reason.errorName : 'status_5xx' })
            const fields = { backend: target.adapter.name, reason: describeReason(reason) }
            if (next !== undefined) {
              metrics.failovers.inc({ backend: target.adapter.name })
              log.warn({ ...fields, next: next.adapter.name }, 'upstream attempt failed; trying the next deployment')
            } else {
              log.warn(fields, targets.length > 1 ? 'upstream attempt failed; no other deployment is tried' : 'upstream attempt failed; the model has no other deployment')
            }
          },
        })
      } catch (err) {
        failedSending = true
        // Nothing reached the upstream: safe to send again later.
        if (err instanceof GatewayError && err.errorName === 'upstream_unreachable' && putBack(err.status)) {
          log.warn({ attempt }, 'no deployment could be reached; the call goes back in line')
          return PUT_BACK
        }
        throw err
      }
      notes.backend = sent.target.adapter.name
      servedBy = sent.target
      const upstreamStatus = sent.response.status
      if ((upstreamStatus === 429 || upstreamStatus >= 500) && putBack(upstreamStatus)) {
        sent.response.body.destroy()
        log.warn({ backend: sent.target.adapter.name, status: upstreamStatus, attempt }, 'upstream refused; the call goes back in line')
        return PUT_BACK
      }
      if (stream) metrics.activeStreams.inc()
      if (stream && exchange.live === true && upstreamStatus < 300 && deps.streams !== undefined) {
        const { limits } = call.resolved
        tally = deps.streams.begin({
          keyId: principal.keyId, owner: principal.owner, tier: call.resolved.tier, model: call.resolved.model,
          inputTokens: call.estimate.inputTokens, reservedOutputTokens: call.estimate.outputTokens,
          cost: (input, output) => costNanos(limits, input, output),
        })
      }
      try {
        const outcome = await relay(exchange.sink, sent.response, {
          stream,
          clientWantsUsage,
          promptTokens: () => countPromptTokens(spec.endpoint, json),
          jsonLimitBytes: config.server.upstreamJsonLimitBytes,
          signal: exchange.signal,
          idleReaderMs: config.server.idleReaderTimeoutMs,
          ...(modelName !== null ? { publicModel: modelName } : {}),
          // Creating, listing and deleting record or filter ownership from the reply.
          ...(transformJson === undefined ? {} : { transformJson }),
          commit: settleOnce,
          ...(handedOut === undefined ? {} : { observe: handedOut.observe }),
          ...(tally === undefined ? {} : { delivered: tally.delivered }),
        })
        usage = outcome.usage
        aborted = outcome.aborted
        status = outcome.status
        if (outcome.firstByteMs !== undefined) {
          metrics.timeToFirstByte.observe({ backend: sent.target.adapter.name, endpoint: spec.endpoint }, outcome.firstByteMs / 1000)
        }
        if (outcome.stalled) {
          notes.errorName = 'client_read_timeout'
          log.warn({ backend: sent.target.adapter.name, idleReaderMs: config.server.idleReaderTimeoutMs }, 'client stopped reading; stream ended and charged what was sent')
        }
        if (outcome.error) {
          // The reply had already started: the client got what could still be sent. Always
          // the gateway's own error (an upstream's relayed error body is no error of ours).
          notes.errorName = outcome.error.errorName
          metrics.upstreamErrors.inc({ backend: sent.target.adapter.name, reason: outcome.error.errorName })
          log.warn({ backend: sent.target.adapter.name, error: outcome.error.errorName, usageSource: outcome.usageSource }, 'upstream reply broke off')
        }
      } finally {
        if (stream) metrics.activeStreams.dec()
      }
    } catch (err) {
      // Failed attempts are counted as they fail (onAttemptFailed); this counts the rest
      // (a reply that fails once relayed, a model with no deployment at all).
      if (err instanceof GatewayError && !(failedSending && attemptFailed)) {
        metrics.upstreamErrors.inc({ backend: notes.backend ?? targets[0]?.adapter.name ?? 'none', reason: err.errorName })
      }
      throw err
    } finally {
      notes.upstreamMs = performance.now() - started
      metrics.upstreamDuration.observe({ backend: notes.backend ?? 'none', endpoint: spec.endpoint }, notes.upstreamMs / 1000)
      await settleOnce(usage)
    }
    return { status, usage, aborted }
  }

  async function settle(call: PreparedCall, usage: Usage, admission: Admission, stream: string | undefined): Promise<void> {
    const { principal, resolved, modelName } = call
    const cost = costNanos(resolved.limits, usage.inputTokens, usage.outputTokens)
    // Both in flight at once: one round trip of waiting, not two.
    await Promise.all([
      admission.settle(usage),
      deps.meter.record({
        keyId: principal.keyId,
        owner: principal.owner,
        tier: resolved.tier,
        model: resolved.model,
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        costNanos: cost,
        ...(stream === undefined ? {} : { stream }),
      }),
    ])
    if (modelName !== null) {
      metrics.tokens.inc({ model: modelName, tier: resolved.tier, direction: 'input' }, usage.inputTokens)
      metrics.tokens.inc({ model: modelName, tier: resolved.tier, direction: 'output' }, usage.outputTokens)
      if (cost > 0) metrics.cost.inc({ model: modelName, tier: resolved.tier }, toUnits(cost))
    }
  }

  return { enter, run, restore }
}

/** Why a request without max_tokens reserved so much, and what lowers it. */
function defaultReservationNote(reserved: number, perChoice: number): string {
  return `This request sets no max_tokens, so it reserved ${reserved} output tokens (the gateway's defaultMaxTokens, ${perChoice}, per choice): ` +
    'set max_tokens (or max_completion_tokens, max_output_tokens) to what you expect and it reserves only that; unused tokens are given back when the call ends.'
}

function describeReason(reason: unknown): string {
  if (reason instanceof GatewayError) return reason.errorName
  if (typeof reason === 'number') return `status ${reason}`
  return 'error'
}

/** Client-supplied names are echoed only when plain. */
function printable(value: string): string {
  return /^[\w.:/@-]{1,128}$/.test(value) ? value : '(unprintable)'
}

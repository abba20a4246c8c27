// The corridor of a proxied /v2 call:
// authenticate → scopes → read + validate body → resolve model → ownership →
// admit (limits) → upstream with failover → relay (usage tap) → settle (limits, meter).
import type { ApiKeyAuthenticator } from '../auth/api-key.ts'
import type { Deployment, BackendRegistry } from '../backends/registry.ts'
import { NO_USAGE, type UpstreamRequest, type Usage } from '../backends/port.ts'
import type { Config } from '../config/schema.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import { readJsonBody, readMultipartBody, type RequestBody } from '../http/body.ts'
import type { RequestContext } from '../http/context.ts'
import type { Params } from '../http/router.ts'
import type { Meter } from '../keys/meter.ts'
import type { Principal } from '../keys/record.ts'
import { estimateUsage } from '../limits/estimate.ts'
import { costOf, resolveLimits, tierOf, type ResolvedLimits } from '../limits/plans.ts'
import type { Admission, Limiter } from '../limits/port.ts'
import type { Metrics } from '../observability/metrics.ts'
import { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import { pickOrder, sendWithFailover } from '../proxy/failover.ts'
import { relay } from '../proxy/relay.ts'
import type { OwnershipStore } from '../store/ports.ts'
import type { EndpointSpec } from './endpoints.ts'
import { ownershipTransform } from './ownership.ts'
import { checkEndpointScope, checkModelScope } from './scopes.ts'
import { modelOf, validateBody } from './validate.ts'

export interface InferenceDeps {
  readonly config: Config
  readonly registry: BackendRegistry
  readonly authenticate: ApiKeyAuthenticator
  readonly limiter: Limiter
  readonly ownership: OwnershipStore
  readonly meter: Meter
  readonly metrics: Metrics
  readonly spoolDir: string
}

/** Endpoints whose streamed usage the upstream only reports when asked. */
const ASK_FOR_STREAM_USAGE = new Set(['chat.completions', 'completions'])

export type InferenceHandler = (ctx: RequestContext, spec: EndpointSpec, params: Params, query: URLSearchParams) => Promise<void>

export function createInferenceHandler(deps: InferenceDeps): InferenceHandler {
  const { config, registry, limiter, metrics } = deps
  // Spreads calls over a model's deployments by weight; a deployment that keeps failing
  // to connect is tried last for a while.
  let rotation = 0
  const breaker = new CircuitBreaker()

  const readBody = (ctx: RequestContext, spec: EndpointSpec): Promise<RequestBody> => {
    switch (spec.body) {
      case 'json': return readJsonBody(ctx.req, config.server.jsonBodyLimitBytes)
      case 'multipart': return readMultipartBody(ctx.req, config.server.uploadLimitBytes, deps.spoolDir)
      case 'none': return Promise.resolve({ kind: 'none' })
    }
  }

  const targetsFor = (spec: EndpointSpec, modelName: string | null): readonly Deployment[] => {
    if (spec.resource) return [registry.resources]
    const route = modelName === null ? undefined : registry.model(modelName)
    return route?.deployments ?? []
  }

  return async function handle(ctx, spec, params, query) {
    ctx.route = spec.endpoint
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    ctx.tier = tierOf(principal.key, config.plans)
    checkEndpointScope(principal, spec.endpoint)

    let resolved: ResolvedLimits | undefined
    let body: RequestBody = { kind: 'none' }
    try {
      body = await readBody(ctx, spec)
      validateBody(spec.endpoint, body)
      const modelName = spec.modelKinds ? modelOf(body) : null
      if (modelName !== null) {
        const route = registry.model(modelName)
        if (!route || !spec.modelKinds?.includes(route.config.kind)) {
          throw gatewayError('model_not_found', { message: `The model '${printable(modelName)}' does not exist or cannot be used with this endpoint.`, param: 'model' })
        }
        checkModelScope(principal, modelName)
        ctx.model = modelName
      }
      resolved = resolveLimits(config.plans, principal.key, modelName ?? '*')
      if (spec.ownership && (spec.ownership.action === 'access' || spec.ownership.action === 'delete')) {
        const owner = await deps.ownership.ownerOf(spec.ownership.kind, params.id ?? '')
        if (owner !== principal.owner) throw gatewayError('resource_not_found', { message: 'No such object.', param: 'id' })
      }
      const json = body.kind === 'json' ? body.value : null
      const estimate = estimateUsage(spec.endpoint, json, config.defaultMaxTokens)
      const admission = await limiter.admit({ keyId: principal.keyId, tier: resolved.tier, model: resolved.model, limits: resolved.limits, estimate })
      for (const [name, value] of Object.entries(admission.headers)) ctx.res.setHeader(name, value)
      await forward(ctx, spec, params, query, principal, body, modelName, resolved, estimate, admission)
    } catch (err) {
      // A refusal after authentication still tells the client where its limits stand.
      if (!ctx.res.headersSent && !(err instanceof GatewayError && err.status === 429)) {
        const limits = resolved ?? resolveLimits(config.plans, principal.key, ctx.model ?? '*')
        const headers = await limiter.peek({ keyId: principal.keyId, tier: limits.tier, model: limits.model, limits: limits.limits }).catch(() => ({}))
        for (const [name, value] of Object.entries(headers)) ctx.res.setHeader(name, value)
      }
      throw err
    } finally {
      if (body.kind === 'multipart') await body.dispose()
    }
  }

  async function forward(
    ctx: RequestContext, spec: EndpointSpec, params: Params, query: URLSearchParams, principal: Principal,
    body: RequestBody, modelName: string | null, resolved: ResolvedLimits, estimate: Usage, admission: Admission,
  ): Promise<void> {
    const json = body.kind === 'json' ? body.value : null
    // A multipart form (a streamed transcription) says it as the text field "true".
    const asked = json ? json.stream === true : body.kind === 'multipart' && body.fields.stream === 'true'
    const stream = spec.streams === true && asked
    ctx.stream = stream
    const options = json?.stream_options as { include_usage?: unknown } | null | undefined
    const clientWantsUsage = stream && options?.include_usage === true
    const targets = targetsFor(spec, modelName).filter((t) => t.adapter.supports(spec.endpoint))
    if (targets.length === 0) {
      await admission.settle(NO_USAGE)
      throw gatewayError('capability_missing')
    }
    const search = query.toString()
    const path = spec.upstreamPath(params) + (search ? `?${search}` : '')

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
        requestId: ctx.id,
        signal: ctx.signal,
        client: { req: ctx.req, res: ctx.res },
      }
    }

    const started = performance.now()
    let usage: Usage = NO_USAGE
    try {
      const sent = await sendWithFailover(pickOrder(targets, rotation++), build, {
        breaker,
        onAttemptFailed: (target, reason) => {
          metrics.failovers.inc({ backend: target.adapter.name })
          ctx.log.warn({ backend: target.adapter.name, reason: describeReason(reason) }, 'upstream attempt failed; trying the next deployment')
        },
      })
      ctx.backend = sent.target.adapter.name
      if (stream) metrics.activeStreams.inc()
      try {
        const outcome = await relay(ctx.res, sent.response, {
          stream,
          clientWantsUsage,
          estimatedInputTokens: estimate.inputTokens,
          jsonLimitBytes: config.server.upstreamJsonLimitBytes,
          signal: ctx.signal,
          ...(modelName !== null ? { publicModel: modelName } : {}),
          ...(spec.ownership ? { transformJson: ownershipTransform(deps.ownership, spec.ownership, principal.owner) } : {}),
        })
        usage = outcome.usage
        if (outcome.firstByteMs !== undefined) {
          metrics.timeToFirstByte.observe({ backend: sent.target.adapter.name, endpoint: spec.endpoint }, outcome.firstByteMs / 1000)
        }
        if (sent.response.status >= 500) metrics.upstreamErrors.inc({ backend: sent.target.adapter.name, reason: 'status_5xx' })
        if (outcome.error) {
          // The reply had already started: the client got what could still be sent.
          ctx.errorCode = outcome.error.code
          metrics.upstreamErrors.inc({ backend: sent.target.adapter.name, reason: outcome.error.errorName })
          ctx.log.warn({ backend: sent.target.adapter.name, error: outcome.error.errorName, usageSource: outcome.usageSource }, 'upstream reply broke off')
        }
      } finally {
        if (stream) metrics.activeStreams.dec()
      }
    } catch (err) {
      if (err instanceof GatewayError) {
        metrics.upstreamErrors.inc({ backend: ctx.backend ?? targets[0]?.adapter.name ?? 'none', reason: err.errorName })
      }
      throw err
    } finally {
      ctx.upstreamMs = performance.now() - started
      metrics.upstreamDuration.observe({ backend: ctx.backend ?? 'none', endpoint: spec.endpoint }, ctx.upstreamMs / 1000)
      ctx.usage = usage
      await settle(ctx, principal, resolved, usage, admission)
    }
  }

  async function settle(ctx: RequestContext, principal: Principal, resolved: ResolvedLimits, usage: Usage, admission: Admission): Promise<void> {
    await admission.settle(usage)
    const cost = costOf(resolved.limits, usage.inputTokens, usage.outputTokens)
    deps.meter.record({
      keyId: principal.keyId,
      owner: principal.owner,
      tier: resolved.tier,
      model: resolved.model,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cost,
    })
    if (ctx.model) {
      metrics.tokens.inc({ model: ctx.model, tier: resolved.tier, direction: 'input' }, usage.inputTokens)
      metrics.tokens.inc({ model: ctx.model, tier: resolved.tier, direction: 'output' }, usage.outputTokens)
      if (cost > 0) metrics.cost.inc({ model: ctx.model, tier: resolved.tier }, cost)
    }
  }
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

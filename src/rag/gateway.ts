// The RAG gateway's routing side: /<service>/<route…> to that service's backend. The
// corridor: path checked → public route, or bearer token verified → route rules → limits
// per user and tenant → identity headers → relay. Every refusal is FastAPI's {"detail"}.
import type { HTTPMethod } from 'find-my-way'
import type { AccessTokenVerifier, Identity } from '../auth/identity.ts'
import { bearerToken } from '../auth/bearer.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import { RAG_SERVICE_ALIASES, RAG_SERVICES, type Config, type RagService } from '../config/schema.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { clientAddress, clientScheme } from '../http/client-address.ts'
import type { RequestContext } from '../http/context.ts'
import type { Router } from '../http/router.ts'
import type { Limiter } from '../limits/port.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createOutageLog, type OutageLog } from '../observability/outage-log.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { RagBackends } from './backends.ts'
import { backendRequestHeaders } from './headers.ts'
import { admitPublicRagCall, admitRagCall } from './limits.ts'
import { serviceRoute } from './path.ts'
import { sendRefusal, toRefusal } from './refusal.ts'
import { traceStep } from '../observability/call-spans.ts'
import { relay } from './relay.ts'
import { checkRouteRules, isPublicRoute } from './rules.ts'

/** The methods routed to a service (the API reference documents these; HEAD and OPTIONS get 405). */
export const RAG_METHODS: readonly HTTPMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']

/** Every path segment that names a service, aliases included. */
export const RAG_SEGMENTS: ReadonlyArray<readonly [segment: string, service: RagService]> = [
  ...RAG_SERVICES.map((s) => [s, s] as const),
  ...Object.entries(RAG_SERVICE_ALIASES),
]

export interface RagGatewayDeps {
  /** The boot's configuration: server.* (a reload cannot change it). */
  readonly config: Pick<Config, 'server'>
  /** The RAG services, rules, limits and headers in force, and where each service is: read once per request. */
  readonly runtime: RuntimeSource<{ readonly config: Pick<Config, 'rag'>; readonly rag: RagBackends }>
  readonly accessTokens: AccessTokenVerifier
  readonly limiter: Limiter
  readonly metrics: Metrics
}

export function registerRagRoutes(router: Router, deps: RagGatewayDeps): void {
  const outage = createOutageLog('RAG gateway')
  for (const [segment, service] of RAG_SEGMENTS) {
    router.on([...RAG_METHODS], `/${segment}/*`, (ctx) => handleRagRequest(ctx, segment, service, deps, outage))
  }
}

async function handleRagRequest(
  ctx: RequestContext,
  segment: string,
  service: RagService,
  deps: RagGatewayDeps,
  outage: OutageLog,
): Promise<void> {
  const { config, metrics } = deps
  const runtime = deps.runtime.current
  const { rag } = runtime.config
  const bodyRate = bodyRateOf(config.server)
  ctx.route = `rag.${service}`
  ctx.backend = service
  try {
    const route = serviceRoute(ctx.req.url ?? '/', segment)
    const method = ctx.req.method ?? 'GET'
    const settings = rag.services[service]
    let identity: Identity | null = null
    const address = clientAddress(ctx.req, config.server.trustProxyHops)
    if (isPublicRoute(settings, method, route.decoded)) {
      const limitHeaders = await admitPublicRagCall(deps.limiter, rag, address)
      for (const [name, value] of Object.entries(limitHeaders)) ctx.res.setHeader(name, value)
    } else {
      const token = bearerToken(ctx.req)
      if (token === null) throw gatewayError('missing_access_token')
      identity = await deps.accessTokens.verify(token)
      ctx.userId = identity.userId
      checkRouteRules(settings, method, route.decoded, identity)
      const limitHeaders = await admitRagCall(deps.limiter, rag, identity)
      for (const [name, value] of Object.entries(limitHeaders)) ctx.res.setHeader(name, value)
    }
    const headers = backendRequestHeaders(ctx.req, identity, rag, {
      requestId: ctx.id,
      clientAddress: address,
      scheme: clientScheme(ctx.req, config.server.trustProxyHops),
      prefix: `/${segment}`,
    })
    // Traces on: the backend is told of this step's span in place of the client's traceparent.
    const step = ctx.trace.child(`${method} ${service}`, 'client', { 'tollgate.rag.service': service })
    const sent = step.recording ? { ...headers, ...step.headers() } : headers
    const relayed = relay(ctx, runtime.rag.target(service), route.raw + route.search, sent, bodyRate)
    const outcome = await traceStep(step, relayed, () => (ctx.res.headersSent ? ctx.res.statusCode : undefined))
    if (outcome.headersAfterMs !== undefined) ctx.upstreamMs = outcome.headersAfterMs
  } catch (err) {
    const refusal = toRefusal(err)
    // Why a token was refused is for the operator, never the client (who gets one message).
    if (refusal.errorName === 'invalid_access_token' && err instanceof GatewayError)
      ctx.log.debug({ reason: err.message }, 'RAG access token refused')
    // A store that does not answer (checking a token's session) is an outage, not a bug.
    if (err instanceof StoreUnavailableError) outage.failed(ctx.log, err)
    else if (refusal.status >= 500 && refusal.status !== 502 && refusal.status !== 503 && refusal.status !== 504)
      ctx.log.error({ err }, 'RAG gateway error')
    sendRefusal(ctx, refusal)
  } finally {
    // The relay resolves once the reply has ended (or was cut), so this is its whole length.
    metrics.ragRequests.inc({ service, class: `${Math.floor(ctx.res.statusCode / 100)}xx` })
    metrics.ragDuration.observe({ service }, (performance.now() - ctx.startedAt) / 1000)
  }
}

/**
 * What the RAG gateway answers to a path the router could not match, or null where the
 * OpenAI-shaped 404 stands. Under a service prefix the path was one the router cannot read
 * (malformed percent-encoding): 400, as for any other bad path. A first segment that looks
 * like a service path (lower-case words joined by hyphens, as `query-pipeline`) names an
 * unknown service: FastAPI's 404. Anything else (/v2, /v1, /queue, /admin and whatever a
 * client mangled them into) keeps the inference side's 404.
 */
export function unmatchedRagPath(url: string): GatewayError | null {
  const path = url.split('?', 1)[0] ?? ''
  const segment = RAG_SEGMENTS.find(([name]) => path.startsWith(`/${name}/`) || path === `/${name}`)?.[0]
  // A service's root is not routed (the router drops a trailing slash, and /<service>/* needs more).
  if (segment !== undefined)
    return path.length <= segment.length + 2 ? gatewayError('rag_unknown_route') : gatewayError('rag_bad_path')
  if (/^\/[a-z][a-z0-9]*(-[a-z0-9]+)+(\/|\?|$)/.test(url)) return gatewayError('rag_unknown_service')
  return null
}

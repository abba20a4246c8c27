// The RAG gateway's corridor for one request to a service: path checked → public route, or
// bearer token verified → route rules → limits per user and tenant → identity headers →
// relay. gateway.ts routes to it, and loads it with the first such request.
import type { Identity } from '../auth/identity.ts'
import { bearerToken } from '../auth/bearer.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import type { RagService } from '../config/schema.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { clientAddress, clientScheme } from '../http/client-address.ts'
import type { RequestContext } from '../http/context.ts'
import type { OutageLog } from '../observability/outage-log.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import { traceStep } from '../observability/call-spans.ts'
import type { RagGatewayDeps } from './gateway.ts'
import { backendRequestHeaders } from './headers.ts'
import { admitPublicRagCall, admitRagCall } from './limits.ts'
import { serviceRoute } from './path.ts'
import { sendRefusal, toRefusal } from './refusal.ts'
import { relay } from './relay.ts'
import { checkedPrompt } from './prompt-check.ts'
import { isRagPrompt } from '../guardrails/rag-prompt.ts'
import { checkRouteRules, isPublicRoute } from './rules.ts'

export async function handleRagRequest(
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
    const target = runtime.rag.target(service)
    // A chat prompt is checked under guardrails.rag before it goes (guardrails/rag-prompt.ts): read whole, sent as checked.
    const prompt =
      identity !== null && deps.guardrails !== undefined && isRagPrompt(service, method, route.decoded)
        ? await checkedPrompt(ctx, deps.guardrails, runtime.config.guardrails, identity, target.maxBodyBytes, bodyRate)
        : undefined
    if (prompt !== undefined) {
      delete headers['transfer-encoding']
      headers['content-length'] = String(prompt.length)
    }
    // Traces on: the backend is told of this step's span in place of the client's traceparent.
    const step = ctx.trace.child(`${method} ${service}`, 'client', { 'tollgate.rag.service': service })
    const sent = step.recording ? { ...headers, ...step.headers() } : headers
    const relayed = relay(ctx, target, route.raw + route.search, sent, bodyRate, prompt)
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

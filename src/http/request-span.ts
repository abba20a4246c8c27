// The span of one request on the public listener (traces on): started from the client's
// traceparent, if any, as it arrives; named and ended once the request has been logged,
// from the same notes the access log reads. Probes are not traced: a load balancer's
// health checks would bury the calls.
import type { IncomingMessage } from 'node:http'
import { endCallSpan } from '../observability/call-spans.ts'
import { NO_SPAN, traceHeadersOf, type Span, type Tracing } from '../observability/tracing.ts'
import type { RequestContext } from './context.ts'

const UNTRACED = new Set(['/healthz', '/readyz'])

export function startRequestSpan(tracing: Tracing, req: IncomingMessage): Span {
  if (!tracing.enabled) return NO_SPAN
  const path = (req.url ?? '/').split('?', 1)[0] ?? '/'
  if (UNTRACED.has(path)) return NO_SPAN
  return tracing.start(req.method ?? 'GET', {
    kind: 'server',
    parent: traceHeadersOf(req.headers),
    attributes: { 'http.request.method': req.method, 'url.path': path.slice(0, 200) },
  })
}

export function endRequestSpan(ctx: RequestContext): void {
  const span = ctx.trace
  if (!span.recording) return
  // A call with a model is named for it (endCallSpan); anything else for its route.
  span.rename(`${ctx.req.method ?? 'GET'} ${ctx.route}`)
  const waited = Number(ctx.res.getHeader('x-queue-wait-ms'))
  endCallSpan(span, {
    route: ctx.route,
    model: ctx.model,
    keyId: ctx.keyId,
    tier: ctx.tier,
    backend: ctx.backend,
    usage: ctx.usage,
    status: ctx.res.statusCode,
    errorName: ctx.errorName,
    queueWaitMs: Number.isFinite(waited) && ctx.res.hasHeader('x-queue-wait-ms') ? waited : undefined,
  })
}

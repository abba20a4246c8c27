// One structured line and one set of metric updates per request, when the reply ends.
import type { Metrics } from '../observability/metrics.ts'
import { traceIdOf } from '../observability/tracing.ts'
import type { RequestContext } from './context.ts'

/** `closedAt`: when the reply was closed (the handler may finish its accounting later). */
export function recordRequestEnd(ctx: RequestContext, metrics: Metrics, closedAt: number): void {
  const durationMs = closedAt - ctx.startedAt
  const status = ctx.res.statusCode
  const aborted = !ctx.res.writableFinished
  const model = ctx.model ?? ''
  metrics.requests.inc({ endpoint: ctx.route, model, status: String(status) })
  metrics.requestDuration.observe({ endpoint: ctx.route, model }, durationMs / 1000)
  const overheadMs = gatewayOverheadMs(ctx, durationMs)
  if (overheadMs !== null) metrics.gatewayOverhead.observe({ endpoint: ctx.route }, overheadMs / 1000)
  if (aborted) metrics.clientAborts.inc({ endpoint: ctx.route })
  const path = (ctx.req.url ?? '').split('?', 1)[0]?.slice(0, 200)
  // A 503 is a refusal on purpose (a store outage, shutting down), logged as such where it
  // happens: a warning here, so an outage does not fill the error log with one line a request.
  ctx.log[status === 503 ? 'warn' : status >= 500 ? 'error' : 'info'](
    {
      method: ctx.req.method,
      path,
      route: ctx.route,
      status,
      keyId: ctx.keyId,
      userId: ctx.userId,
      tier: ctx.tier,
      model: ctx.model,
      backend: ctx.backend,
      stream: ctx.stream,
      inputTokens: ctx.usage?.inputTokens,
      outputTokens: ctx.usage?.outputTokens,
      durationMs: Math.round(durationMs * 10) / 10,
      upstreamMs: ctx.upstreamMs === undefined ? undefined : Math.round(ctx.upstreamMs * 10) / 10,
      aborted: aborted || undefined,
      // The error table's name: a missing key and a revoked one differ here, as OpenAI's `code` does not.
      error: ctx.errorName,
      // The trace's id when traces are on; else a client's own trace id, to find its call by.
      traceId: ctx.trace.traceId ?? traceIdOf(ctx.req.headers.traceparent),
    },
    'request',
  )
}

/**
 * What the gateway itself added to an inference call an upstream answered (its model named,
 * the upstream phase timed): the whole time less that phase and the wait in a /queue line
 * (which the drop-in reports in x-queue-wait-ms). Null for anything else: the RAG relay
 * times only its upstream's headers, and a refusal has no upstream phase to set against.
 */
function gatewayOverheadMs(ctx: RequestContext, durationMs: number): number | null {
  if (ctx.upstreamMs === undefined || ctx.model === undefined) return null
  const waited = Number(ctx.res.getHeader('x-queue-wait-ms') ?? 0)
  return Math.max(0, durationMs - ctx.upstreamMs - (Number.isFinite(waited) ? waited : 0))
}

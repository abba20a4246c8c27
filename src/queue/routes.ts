// The /queue routes: the inference endpoints that may wait for capacity (drop-in, or
// stored with Prefer: respond-async), and the caller's stored requests. The endpoints go
// through the same corridor as their /v2 twins; only the admission differs.
import type { IncomingMessage } from 'node:http'
import type { Config } from '../config/schema.ts'
import { parseQuery } from '../http/query.ts'
import { sendJson } from '../http/reply.ts'
import type { RequestContext } from '../http/context.ts'
import type { Router } from '../http/router.ts'
import { PROXIED_ENDPOINTS } from '../inference/endpoints.ts'
import type { OpenCall } from '../inference/caller.ts'
import type { Corridor } from '../inference/corridor.ts'
import { liveExchange } from '../inference/live.ts'
import { listRequestsQuery, QUEUED_ENDPOINTS } from './api.ts'
import type { QueueService } from './service.ts'

export interface QueueRouteDeps {
  readonly config: Pick<Config, 'queue'>
  readonly corridor: Corridor
  readonly queue: QueueService
  /** Opens a stored-request route: the key authenticated, its x-ratelimit-* headers for replies not charged to a model. */
  readonly openCall: OpenCall
  /**
   * Runs a stored-request route so that its errors are in the shape of the API the caller
   * speaks (an Anthropic SDK polling its stored message: protocols/anthropic/routes.ts);
   * absent, OpenAI's, as every /queue route.
   */
  readonly answer?: (ctx: RequestContext, route: () => Promise<void>) => Promise<void>
}

/** RFC 7240: `Prefer: respond-async`, alone or among other preferences. */
export function prefersAsync(req: IncomingMessage): boolean {
  const header = req.headers.prefer
  const values = Array.isArray(header) ? header : header === undefined ? [] : [header]
  return values.some((v) => v.split(',').some((p) => p.split(';', 1)[0]?.trim().toLowerCase() === 'respond-async'))
}

export function registerQueueRoutes(router: Router, deps: QueueRouteDeps): void {
  const { corridor, queue } = deps
  const bodyLimitReason = `Asynchronous requests are kept until they run: at most ${deps.config.queue.maxBodyBytes} bytes (queue.maxBodyBytes).`

  for (const spec of PROXIED_ENDPOINTS.filter((s) => s.method === 'POST' && QUEUED_ENDPOINTS.has(s.endpoint))) {
    const route = `queue.${spec.endpoint}`
    router.on('POST', `/queue${spec.route}`, async (ctx, params, query) => {
      if (prefersAsync(ctx.req)) {
        return corridor.enter(ctx, spec, params, query, (call) => queue.accept(ctx, call), {
          route: `${route}.async`,
          bodyLimitBytes: deps.config.queue.maxBodyBytes,
          bodyLimitReason,
        })
      }
      return corridor.enter(
        ctx,
        spec,
        params,
        query,
        async (call) => {
          await corridor.run(call, liveExchange(ctx), queue.waitInLine(ctx.signal))
        },
        { route, waitsInLine: true },
      )
    })
  }

  const answer = deps.answer ?? ((_ctx: RequestContext, route: () => Promise<void>) => route())
  router.on('GET', '/queue/requests', (ctx, _params, query) =>
    answer(ctx, async () => {
      const principal = await deps.openCall(ctx, 'queue.requests.list')
      const { limit, after, status } = parseQuery(listRequestsQuery, query)
      sendJson(ctx.res, 200, await queue.list(principal.owner, { limit: limit ?? 20, after, status }), {
        'cache-control': 'no-store',
      })
    }),
  )
  router.on('GET', '/queue/requests/:id', (ctx, params) =>
    answer(ctx, async () => {
      const principal = await deps.openCall(ctx, 'queue.requests.get')
      sendJson(ctx.res, 200, await queue.read(params.id ?? '', principal.owner), { 'cache-control': 'no-store' })
    }),
  )
  router.on('DELETE', '/queue/requests/:id', (ctx, params) =>
    answer(ctx, async () => {
      const principal = await deps.openCall(ctx, 'queue.requests.cancel')
      const id = params.id ?? ''
      const view = await queue.cancel(id, principal.owner)
      ctx.log.info({ queueId: id, status: view.status }, 'queued request cancelled')
      sendJson(ctx.res, 200, view, { 'cache-control': 'no-store' })
    }),
  )
}

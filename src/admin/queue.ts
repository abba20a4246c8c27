// /admin/queue: what waits in which line, and any stored request by id (read, cancel),
// whoever owns it.
import { gatewayError } from '../errors.ts'
import type { QueueService } from '../queue/service.ts'
import type { Router } from '../http/router.ts'
import { sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

export function registerQueueAdminRoutes(router: Router, deps: AdminDeps): void {
  const { authenticateAdmin } = deps
  const queue = (): QueueService => {
    if (deps.queue === undefined) throw gatewayError('unknown_route')
    return deps.queue
  }

  router.on('GET', '/admin/queue', async (ctx) => {
    ctx.route = 'admin.queue.lines'
    authenticateAdmin(ctx.req)
    const lines = await queue().lines()
    sendAdmin(ctx, 200, {
      object: 'list',
      data: lines,
      total_depth: lines.reduce((sum, l) => sum + l.depth, 0),
      worker: queue().health().worker,
    })
  })

  router.on('GET', '/admin/queue/requests/:id', async (ctx, params) => {
    ctx.route = 'admin.queue.requests.get'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, await queue().read(params.id ?? ''))
  })

  router.on('DELETE', '/admin/queue/requests/:id', async (ctx, params) => {
    ctx.route = 'admin.queue.requests.cancel'
    authenticateAdmin(ctx.req)
    const view = await queue().cancel(params.id ?? '')
    ctx.log.info(
      { audit: 'queue.request.cancelled', queueId: params.id, status: view.status },
      'admin: queued request cancelled',
    )
    sendAdmin(ctx, 200, view)
  })
}

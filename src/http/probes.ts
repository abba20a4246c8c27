// /healthz and /readyz: liveness, and readiness (the store answers, the gateway is not draining).
import { z } from 'zod'
import type { OperationDoc } from '../openapi/operation.ts'
import type { Limiter } from '../limits/port.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { Stores } from '../store/ports.ts'
import { sendJson } from './reply.ts'
import type { Router } from './router.ts'

export interface ProbeDeps {
  readonly stores: Pick<Stores, 'ping'>
  readonly limiter: Pick<Limiter, 'health'>
  /** Whether this instance runs stored /queue requests (reported, not gating). */
  readonly queue?: { health(): { readonly worker: string; readonly healthy: boolean } }
  readonly metrics: Pick<Metrics, 'storeUp'>
  readonly draining: () => boolean
}

const Health = z.object({ status: z.literal('ok') })
const Readiness = z.object({
  status: z.enum(['ready', 'not_ready']),
  store: z.enum(['up', 'down']),
  limiter: z.string().meta({ description: 'redis, insurance, fail_open, fail_closed or memory.' }),
  limiter_healthy: z.boolean(),
  queue_worker: z
    .enum(['running', 'accept_only', 'stopped'])
    .optional()
    .meta({ description: 'Whether this instance runs stored /queue requests (queue.concurrency 0: accept_only).' }),
  queue_worker_healthy: z.boolean().optional().meta({
    description: 'False while the worker cannot reach its Redis (it runs nothing until Redis is back) or is stopped.',
  }),
  draining: z.boolean(),
})

export const PROBE_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'get',
    path: '/healthz',
    operationId: 'healthz',
    summary: 'Liveness: the process answers',
    tag: 'Health',
    security: 'none',
    responses: { 200: { description: 'Alive', schema: Health } },
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'readyz',
    summary: 'Readiness: the store answers and the gateway is not draining',
    tag: 'Health',
    security: 'none',
    description:
      "The limiter's state is reported, not gating: during a Redis outage every instance enforces limits on its own.",
    responses: {
      200: { description: 'Ready', schema: Readiness },
      503: { description: 'Not ready', schema: Readiness },
    },
  },
]

export function registerProbeRoutes(router: Router, deps: ProbeDeps): void {
  router.on('GET', '/healthz', async (ctx) => {
    ctx.route = 'healthz'
    sendJson(ctx.res, 200, { status: 'ok' })
  })
  router.on('GET', '/readyz', async (ctx) => {
    ctx.route = 'readyz'
    const store = await deps.stores.ping()
    deps.metrics.storeUp.set(store ? 1 : 0)
    const draining = deps.draining()
    const ready = store && !draining
    // The limiter's state is reported, not gating: during a Redis outage every instance
    // enforces limits on its own, and taking them all out of rotation would help nobody.
    const limiter = deps.limiter.health?.()
    const queue = deps.queue?.health()
    sendJson(ctx.res, ready ? 200 : 503, {
      status: ready ? 'ready' : 'not_ready',
      store: store ? 'up' : 'down',
      limiter: limiter?.mode ?? 'none',
      limiter_healthy: limiter?.healthy ?? true,
      ...(queue === undefined ? {} : { queue_worker: queue.worker, queue_worker_healthy: queue.healthy }),
      draining,
    })
  })
}

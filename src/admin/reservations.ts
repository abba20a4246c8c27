// /admin/keys/:id/reservations: what a call of the key that names no output cap reserves now
// on the token-rate limits, per model (reservations/, docs/limits.md "Learned output reservations").
import { z } from 'zod'
import { gatewayError } from '../errors.ts'
import { parseQuery } from '../http/query.ts'
import type { Router } from '../http/router.ts'
import { resolveLimits } from '../limits/plans.ts'
import { sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

export const reservationsQuery = z.strictObject({
  model: z.string().min(1).max(200).optional().meta({ description: 'One model; default every model the key may use.' }),
})

export function registerReservationRoutes(router: Router, deps: AdminDeps): void {
  router.on('GET', '/admin/keys/:id/reservations', async (ctx, params, query) => {
    ctx.route = 'admin.keys.reservations'
    deps.authenticateAdmin(ctx.req)
    const { model } = parseQuery(reservationsQuery, query)
    const record = await deps.keys.get(params.id ?? '')
    if (record === null) throw gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
    const { config } = deps.runtime.current
    const models = model === undefined ? (record.models ?? config.models.map((m) => m.name)) : [model]
    const describe = deps.limiter?.outputReservation
    const data =
      describe === undefined
        ? []
        : await Promise.all(
            models.map((m) => {
              const { tier } = resolveLimits(config.plans, record, m)
              return describe({ keyId: record.id, owner: record.owner ?? record.id, tier, model: m })
            }),
          )
    sendAdmin(ctx, 200, { object: 'list', data })
  })
}

// /admin/budgets: set, clear and list the budgets of keys, owners and tenants
// (docs/budgets.md). A change takes effect on this instance at once and on the others
// within budgets.refreshMs; it keeps what was spent in the period and re-arms the thresholds.
import { z } from 'zod'
import type { BudgetBook } from '../budgets/book.ts'
import { SCOPES, type BudgetScope } from '../budgets/port.ts'
import { budgetSchema, thresholdsSchema, timeZoneSchema } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import { readJsonBody } from '../http/body.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { parseBody } from '../keys/service.ts'
import type { Router } from '../http/router.ts'
import type { KeyService } from '../keys/service.ts'
import type { BudgetStatus, Limiter } from '../limits/port.ts'
import { sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

export const setBudgetSchema = z.strictObject({
  amount: budgetSchema.shape.amount.meta({ description: "In the plans' currency (plans `currency`, default EUR)." }),
  period: budgetSchema.shape.period,
  time_zone: timeZoneSchema.optional().meta({ description: 'Default: the configured budgets.timeZone (UTC).' }),
  thresholds: thresholdsSchema
    .optional()
    .meta({ description: 'Percentages; default budgets.thresholds (50, 80, 100).' }),
})

const scopeParam = z.enum(SCOPES)
const idParam = z.string().min(1).max(200)

/** What the replies show of a budget: its status, marked as a budget. */
export const budgetView = (s: BudgetStatus): BudgetStatus & { object: 'budget' } => ({ object: 'budget', ...s })

/**
 * Budget statuses, or none when this gateway has no budgets. A key budget's counters are
 * kept with its owner's (store/redis-kit.ts), so the keys of key budgets are read for it.
 */
export async function statusesOf(
  limiter: Pick<Limiter, 'budgetStatusOf'>,
  book: BudgetBook | undefined,
  keys: Pick<KeyService, 'get'>,
  filter: (scope: BudgetScope, id: string) => boolean = () => true,
): Promise<Array<BudgetStatus & { object: 'budget' }>> {
  if (book === undefined || limiter.budgetStatusOf === undefined) return []
  const specs = book
    .list()
    .filter((r) => filter(r.scope, r.id))
    .map((r) => book.specOf(r))
  const owners = new Map<string, string>()
  for (const spec of specs) {
    if (spec.scope !== 'key') continue
    const owner = (await keys.get(spec.id))?.owner
    if (owner !== null && owner !== undefined) owners.set(spec.id, owner)
  }
  return (await limiter.budgetStatusOf(specs, owners)).map(budgetView)
}

export function registerBudgetRoutes(router: Router, deps: AdminDeps): void {
  const { authenticateAdmin, budgets: book, limiter } = deps
  const limit = deps.config.server.jsonBodyLimitBytes
  const rate = bodyRateOf(deps.config.server)

  const target = async (params: Record<string, string | undefined>): Promise<{ scope: BudgetScope; id: string }> => {
    const scope = scopeParam.safeParse(params.scope)
    if (!scope.success)
      throw gatewayError('resource_not_found', {
        message: 'A budget is set on a key, an owner or a tenant.',
        param: 'scope',
      })
    const id = idParam.safeParse(params.id)
    if (!id.success) throw gatewayError('invalid_body', { message: 'The id must be 1 to 200 characters.', param: 'id' })
    if (scope.data === 'key' && (await deps.keys.get(id.data)) === null)
      throw gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
    return { scope: scope.data, id: id.data }
  }
  const need = (): BudgetBook => {
    if (book === undefined) throw gatewayError('resource_not_found', { message: 'This gateway keeps no budgets.' })
    return book
  }

  router.on('GET', '/admin/budgets', async (ctx) => {
    ctx.route = 'admin.budgets.list'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, { object: 'list', data: limiter ? await statusesOf(limiter, book, deps.keys) : [] })
  })

  router.on('PUT', '/admin/budgets/:scope/:id', async (ctx, params) => {
    ctx.route = 'admin.budgets.set'
    authenticateAdmin(ctx.req)
    const { scope, id } = await target(params)
    const body = await readJsonBody(ctx.req, limit, rate)
    const parsed = { data: parseBody(setBudgetSchema, body.value) }
    const { time_zone: timeZone, ...rest } = parsed.data
    const record = await need().set(scope, id, { ...rest, ...(timeZone === undefined ? {} : { timeZone }) })
    if (scope === 'key') ctx.keyId = id
    ctx.log.info(
      { audit: 'budget.set', scope, id, amount: parsed.data.amount, period: record.period, revision: record.revision },
      'admin: budget set',
    )
    const [view] = limiter ? await statusesOf(limiter, book, deps.keys, (s, i) => s === scope && i === id) : []
    sendAdmin(ctx, 200, view ?? {})
  })

  router.on('DELETE', '/admin/budgets/:scope/:id', async (ctx, params) => {
    ctx.route = 'admin.budgets.clear'
    authenticateAdmin(ctx.req)
    const { scope, id } = await target(params)
    if (!(await need().clear(scope, id)))
      throw gatewayError('resource_not_found', { message: `No budget is set on ${scope} ${id}.`, param: 'id' })
    ctx.log.info({ audit: 'budget.cleared', scope, id }, 'admin: budget cleared')
    sendAdmin(ctx, 200, { object: 'budget.deleted', scope, id, deleted: true })
  })
}

// /admin/keys/{id}/usage and /admin/usage: what keys spent, per model and per day, or
// grouped across keys. Read from the usage store, which every call's usage reaches as the
// call ends; rows this instance is holding for a retry (its store refused them) go first.
import { z } from 'zod'
import { gatewayError } from '../errors.ts'
import { utcDay } from '../keys/meter.ts'
import { planCurrency, toUnits } from '../keys/money.ts'
import { ROW_COUNTERS, type RowCounter, type UsageRecord } from '../store/ports.ts'
import { dayNumber, isCalendarDay, rowCounters } from '../store/usage-rows.ts'
import { parseQuery } from '../http/query.ts'
import type { Router } from '../http/router.ts'
import { principalOf, type KeyRecord } from '../keys/record.ts'
import { tierOf } from '../limits/plans.ts'
import type { BudgetStatus } from '../limits/port.ts'
import { budgetView, statusesOf } from './budgets.ts'
import { sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

import { DEFAULT_USAGE_DAYS, MAX_USAGE_DAYS } from './usage-limits.ts'

export { DEFAULT_USAGE_DAYS, MAX_USAGE_DAYS } from './usage-limits.ts'

export const GROUPS = ['key', 'owner', 'tier', 'model'] as const
export type UsageGroup = (typeof GROUPS)[number]

const day = z.string().refine(isCalendarDay, 'must be a calendar day, YYYY-MM-DD')

const rangeQuery = { from: day.optional(), to: day.optional() }
export const keyUsageQuery = z.strictObject(rangeQuery)
export const usageQuery = z.strictObject({
  ...rangeQuery,
  group_by: z.enum(GROUPS).default('key'),
  granularity: z.enum(['total', 'day']).default('total'),
  owner: z.string().min(1).max(200).optional(),
  tier: z.string().min(1).max(200).optional(),
  model: z.string().min(1).max(256).optional(),
})

/** A row counter's name on the wire: in snake case, and a cost (in currency units) without its `Nanos`. */
type WireName<C extends string> = C extends `${infer Cost}Nanos` ? SnakeCase<Cost> : SnakeCase<C>
type SnakeCase<S extends string> = S extends `${infer First}${infer Rest}`
  ? `${First extends Lowercase<First> ? First : `_${Lowercase<First>}`}${SnakeCase<Rest>}`
  : ''
const wireName = (counter: RowCounter): string =>
  counter.replace(/Nanos$/, '').replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`)
type CounterTotals = { [C in RowCounter as WireName<C>]: number }

/** Sums of usage rows as the API shows them: each row counter (ROW_COUNTERS) under its wire name. */
export interface Totals extends CounterTotals {
  requests: number
  /** The whole prompt: the cache reads and writes below are parts of it. */
  input_tokens: number
  output_tokens: number
  /** Currency units, from the exact sum of nano-units. */
  cost: number
  cache_read_tokens: number
  cache_write_tokens: number
  /** Parts of cost: what the cache reads and writes cost at their multipliers (keys/cache-prices.ts). */
  cache_read_cost: number
  cache_write_cost: number
  /** Of requests, those the response cache answered (src/cache/). */
  cached_requests: number
  /** Of requests, the lines of batches (src/batches/); of cost, theirs (at the tier's batch price). */
  batch_requests: number
  batch_cost: number
}

type Sums = Record<'requests' | 'inputTokens' | 'outputTokens' | 'costNanos' | RowCounter, number>

const GROUP_FIELD: Record<UsageGroup, 'key_id' | 'owner' | 'tier' | 'model'> = {
  key: 'key_id',
  owner: 'owner',
  tier: 'tier',
  model: 'model',
}

/** [from, to] with defaults, checked: from ≤ to, at most MAX_USAGE_DAYS. */
export function usageRange(
  from: string | undefined,
  to: string | undefined,
  today: Date,
): { from: string; to: string } {
  const end = to ?? utcDay(today)
  const start = from ?? utcDay(new Date((dayNumber(end) - (DEFAULT_USAGE_DAYS - 1)) * 86_400_000))
  const span = dayNumber(end) - dayNumber(start) + 1
  if (span < 1) throw gatewayError('invalid_body', { message: '`from` must not be after `to`.', param: 'from' })
  if (span > MAX_USAGE_DAYS) {
    // `to` defaults to today, so a `from` more than a year back fails on its own: the
    // message names both ends, and the way out.
    throw gatewayError('invalid_body', {
      message:
        `A usage query covers at most ${MAX_USAGE_DAYS} days; ${start} to ${end} is ${span}${to === undefined ? ' (`to` defaults to today)' : ''}. ` +
        `Ask for several ranges of ${MAX_USAGE_DAYS} days or fewer with \`from\` and \`to\` (\`tollgate keys usage\` does this itself), or a later \`from\`.`,
      param: 'from',
    })
  }
  return { from: start, to: end }
}

function zero(): Sums {
  return { requests: 0, inputTokens: 0, outputTokens: 0, costNanos: 0, ...rowCounters(() => 0) }
}

function add(into: Sums, row: UsageRecord): void {
  into.requests += row.requests
  into.inputTokens += row.inputTokens
  into.outputTokens += row.outputTokens
  into.costNanos += row.costNanos
  for (const c of ROW_COUNTERS) into[c] += row[c] ?? 0
}

function totalsOf(sums: Sums): Totals {
  const counters = Object.fromEntries(
    ROW_COUNTERS.map((c) => [wireName(c), c.endsWith('Nanos') ? toUnits(sums[c]) : sums[c]]),
  ) as CounterTotals
  return {
    requests: sums.requests,
    input_tokens: sums.inputTokens,
    output_tokens: sums.outputTokens,
    cost: toUnits(sums.costNanos),
    ...counters,
  }
}

export function summarise(rows: readonly UsageRecord[]): Totals {
  const sums = zero()
  for (const row of rows) add(sums, row)
  return totalsOf(sums)
}

export function groupUsage(
  rows: readonly UsageRecord[],
  group: UsageGroup,
  daily: boolean,
): Array<Record<string, string | number>> {
  const field = GROUP_FIELD[group]
  const groups = new Map<string, { name: string; day: string | undefined; totals: Sums }>()
  for (const row of rows) {
    const name = group === 'key' ? row.keyId : row[group]
    const id = daily ? `${row.day}\u0000${name}` : name
    let entry = groups.get(id)
    if (entry === undefined) groups.set(id, (entry = { name, day: daily ? row.day : undefined, totals: zero() }))
    add(entry.totals, row)
  }
  return [...groups.values()]
    .sort((a, b) => (a.day ?? '').localeCompare(b.day ?? '') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((g) => ({ ...(g.day === undefined ? {} : { day: g.day }), [field]: g.name, ...totalsOf(g.totals) }))
}

export function registerUsageRoutes(router: Router, deps: AdminDeps): void {
  const { keys, authenticateAdmin } = deps
  const read = async (query: { keyId?: string; from: string; to: string }): Promise<UsageRecord[]> => {
    // Rows this instance holds for a retry first; other instances retry theirs every second.
    await deps.meter.flush()
    return deps.stores.usage.query(query)
  }

  /** The budgets a key's calls are charged against (its own or its tier's, its owner's, its tenant's). */
  const keyBudgets = async (record: KeyRecord): Promise<Array<BudgetStatus & { object: 'budget' }>> => {
    if (deps.limiter?.budgetStatus === undefined) return []
    const p = principalOf(record)
    const statuses = await deps.limiter.budgetStatus({
      keyId: p.keyId,
      owner: p.owner,
      tier: tierOf(record, deps.runtime.current.config.plans),
    })
    return statuses.map(budgetView)
  }

  router.on('GET', '/admin/keys/:id/usage', async (ctx, params, query) => {
    ctx.route = 'admin.keys.usage'
    authenticateAdmin(ctx.req)
    const q = parseQuery(keyUsageQuery, query)
    const record = await keys.get(params.id ?? '')
    if (record === null) throw gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
    const range = usageRange(q.from, q.to, new Date())
    const rows = await read({ keyId: record.id, ...range })
    sendAdmin(ctx, 200, {
      object: 'usage',
      key_id: record.id,
      ...range,
      // Every cost below is in the plans' currency; JSON keeps the numbers and names it once.
      currency: planCurrency(deps.runtime.current.config.plans),
      data: rows.map((r) => ({ day: r.day, model: r.model, ...summarise([r]) })),
      by_model: groupUsage(rows, 'model', false),
      totals: summarise(rows),
      budgets: await keyBudgets(record),
    })
  })

  router.on('GET', '/admin/usage', async (ctx, _params, query) => {
    ctx.route = 'admin.usage'
    authenticateAdmin(ctx.req)
    const q = parseQuery(usageQuery, query)
    const range = usageRange(q.from, q.to, new Date())
    const rows = (await read(range)).filter(
      (r) =>
        (q.owner === undefined || r.owner === q.owner) &&
        (q.tier === undefined || r.tier === q.tier) &&
        (q.model === undefined || r.model === q.model),
    )
    sendAdmin(ctx, 200, {
      object: 'usage',
      group_by: q.group_by,
      granularity: q.granularity,
      ...range,
      currency: planCurrency(deps.runtime.current.config.plans),
      data: groupUsage(rows, q.group_by, q.granularity === 'day'),
      totals: summarise(rows),
      // Owner given: the budgets of that owner and its tenant; otherwise every budget set.
      budgets: deps.limiter
        ? await statusesOf(deps.limiter, deps.budgets, keys, (scope, id) =>
            q.owner === undefined
              ? true
              : (scope === 'owner' && id === q.owner) || (scope === 'tenant' && id === deps.budgets?.tenantOf(q.owner)),
          )
        : [],
    })
  })
}

// /admin/keys/{id}/usage and /admin/usage: what keys spent, per model and per day, or
// grouped across keys. Read from the usage store; this instance's pending rows are
// flushed first so that an admin sees what this instance has metered.
import { z } from 'zod'
import { gatewayError } from '../errors.ts'
import { utcDay } from '../keys/meter.ts'
import type { UsageRecord } from '../store/ports.ts'
import { dayNumber } from '../store/usage-rows.ts'
import { parseQuery, sendAdmin, type AdminRouter } from './http.ts'
import type { AdminDeps } from './routes.ts'

/** Days covered when the query names no `from`. */
export const DEFAULT_USAGE_DAYS = 30
/** Longest range one query may cover. */
export const MAX_USAGE_DAYS = 366

export const GROUPS = ['key', 'owner', 'tier', 'model'] as const
export type UsageGroup = (typeof GROUPS)[number]

const day = z.string().refine((v) => {
  try { dayNumber(v); return true } catch { return false }
}, 'must be a calendar day, YYYY-MM-DD')

const rangeQuery = { from: day.optional(), to: day.optional() }
const keyUsageQuery = z.strictObject(rangeQuery)
const usageQuery = z.strictObject({
  ...rangeQuery,
  group_by: z.enum(GROUPS).default('key'),
  granularity: z.enum(['total', 'day']).default('total'),
  owner: z.string().min(1).max(200).optional(),
  tier: z.string().min(1).max(200).optional(),
  model: z.string().min(1).max(256).optional(),
})

export interface Totals {
  requests: number
  input_tokens: number
  output_tokens: number
  cost: number
}

const GROUP_FIELD: Record<UsageGroup, 'key_id' | 'owner' | 'tier' | 'model'> = { key: 'key_id', owner: 'owner', tier: 'tier', model: 'model' }

/** [from, to] with defaults, checked: from ≤ to, at most MAX_USAGE_DAYS. */
export function usageRange(from: string | undefined, to: string | undefined, today: Date): { from: string; to: string } {
  const end = to ?? utcDay(today)
  const start = from ?? utcDay(new Date((dayNumber(end) - (DEFAULT_USAGE_DAYS - 1)) * 86_400_000))
  const span = dayNumber(end) - dayNumber(start) + 1
  if (span < 1) throw gatewayError('invalid_body', { message: '`from` must not be after `to`.', param: 'from' })
  if (span > MAX_USAGE_DAYS) throw gatewayError('invalid_body', { message: `A usage query covers at most ${MAX_USAGE_DAYS} days.`, param: 'from' })
  return { from: start, to: end }
}

function zero(): Totals {
  return { requests: 0, input_tokens: 0, output_tokens: 0, cost: 0 }
}

function add(into: Totals, row: UsageRecord): void {
  into.requests += row.requests
  into.input_tokens += row.inputTokens
  into.output_tokens += row.outputTokens
  into.cost += row.cost
}

/** Sums of many float costs carry noise in the last digits; no price is that precise. */
function tidy<T extends Totals>(totals: T): T {
  return { ...totals, cost: Math.round(totals.cost * 1e10) / 1e10 }
}

export function summarise(rows: readonly UsageRecord[]): Totals {
  const totals = zero()
  for (const row of rows) add(totals, row)
  return tidy(totals)
}

export function groupUsage(rows: readonly UsageRecord[], group: UsageGroup, daily: boolean): Array<Record<string, string | number>> {
  const field = GROUP_FIELD[group]
  const groups = new Map<string, { name: string; day: string | undefined; totals: Totals }>()
  for (const row of rows) {
    const name = group === 'key' ? row.keyId : row[group]
    const id = daily ? `${row.day}\u0000${name}` : name
    let entry = groups.get(id)
    if (entry === undefined) groups.set(id, entry = { name, day: daily ? row.day : undefined, totals: zero() })
    add(entry.totals, row)
  }
  return [...groups.values()]
    .sort((a, b) => (a.day ?? '').localeCompare(b.day ?? '') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((g) => ({ ...(g.day === undefined ? {} : { day: g.day }), [field]: g.name, ...tidy(g.totals) }))
}

export function registerUsageRoutes(router: AdminRouter, deps: AdminDeps): void {
  const { keys, authenticateAdmin } = deps
  const read = async (query: { keyId?: string; from: string; to: string }): Promise<UsageRecord[]> => {
    // This instance's own rows first; other instances write theirs within their flush interval.
    await deps.meter.flush()
    return deps.stores.usage.query(query)
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
      data: rows.map((r) => ({
        day: r.day, model: r.model, requests: r.requests, input_tokens: r.inputTokens, output_tokens: r.outputTokens, cost: r.cost,
      })),
      by_model: groupUsage(rows, 'model', false),
      totals: summarise(rows),
    })
  })

  router.on('GET', '/admin/usage', async (ctx, _params, query) => {
    ctx.route = 'admin.usage'
    authenticateAdmin(ctx.req)
    const q = parseQuery(usageQuery, query)
    const range = usageRange(q.from, q.to, new Date())
    const rows = (await read(range)).filter((r) =>
      (q.owner === undefined || r.owner === q.owner) &&
      (q.tier === undefined || r.tier === q.tier) &&
      (q.model === undefined || r.model === q.model))
    sendAdmin(ctx, 200, {
      object: 'usage',
      group_by: q.group_by,
      granularity: q.granularity,
      ...range,
      data: groupUsage(rows, q.group_by, q.granularity === 'day'),
      totals: summarise(rows),
    })
  })
}

// Usage of the user's keys (or one of them) over a chosen range: the page, and its CSV.
import { usageRange } from '../admin/usage.ts'
import { gatewayError } from '../errors.ts'
import { planCurrency } from '../keys/money.ts'
import type { KeyRecord } from '../keys/record.ts'
import { isCalendarDay } from '../store/usage-rows.ts'
import type { Router } from '../http/router.ts'
import type { Guards, Me, PortalDeps } from './guard.ts'
import { securityHeaders, sendHtml } from './http.ts'
import { usageRows } from './last-used.ts'
import { budgetsOf } from './limits-view.ts'
import { usagePage } from './pages/usage.ts'
import { byNewest } from './routes-keys.ts'
import { usageCsv, usageReport } from './usage-report.ts'

export function registerUsageRoutes(router: Router, deps: PortalDeps, guards: Guards): void {
  /** The user's keys, the one asked for (theirs, or any for an admin), the range, and the rows. */
  async function read(me: Me, query: URLSearchParams) {
    const own = (await deps.keys.list({ owner: me.account.id })).sort(byNewest)
    const keyId = query.get('key') ?? ''
    const selected: KeyRecord | null = keyId === '' ? null : await guards.keyOf(me, keyId)
    const day = (name: string): string | undefined => {
      const value = query.get(name) ?? ''
      if (value === '') return undefined
      // The shape alone lets 2025-02-30 through, which the range arithmetic then throws on (a 500).
      if (!isCalendarDay(value))
        throw gatewayError('invalid_body', { message: `${name} must be a date (YYYY-MM-DD).`, param: name })
      return value
    }
    const range = usageRange(day('from'), day('to'), new Date())
    const ownIds = new Set(own.map((k) => k.id))
    const allRows = ownIds.size === 0 ? [] : await usageRows(deps, range, ownIds)
    const rows =
      selected === null
        ? allRows
        : ownIds.has(selected.id)
          ? allRows.filter((r) => r.keyId === selected.id)
          : await usageRows(deps, range, new Set([selected.id]))
    // The key picker offers the keys used in the range (a user may have thousands), and the one shown.
    const used = new Set(allRows.map((r) => r.keyId))
    const listed = [
      ...(selected !== null && !used.has(selected.id) ? [selected] : []),
      ...own.filter((k) => used.has(k.id)),
    ]
    return { own, keys: listed, selected, range, rows }
  }

  /**
   * The keys whose budgets the page shows: the one asked for, or the user's keys that can
   * still make calls, those used in the range first (at most 50 read). Not only the used
   * ones: a key that has made no call yet still has its tier's budget.
   */
  function budgetKeys(own: readonly KeyRecord[], used: readonly KeyRecord[], selected: KeyRecord | null) {
    if (selected !== null) return [selected]
    const live = own.filter((k) => deps.keys.view(k).status === 'active')
    return [...new Set([...used.filter((k) => live.includes(k)), ...live])].slice(0, 50)
  }

  router.on(
    'GET',
    '/portal/usage',
    guards.page('portal.usage', async (ctx, me, _params, query) => {
      const { own, keys, selected, range, rows } = await read(me, query)
      const budgeted = budgetKeys(own, keys, selected)
      const budgets = await budgetsOf(deps, budgeted)
      const csv = new URLSearchParams({
        ...(selected === null ? {} : { key: selected.id }),
        from: range.from,
        to: range.to,
      })
      sendHtml(
        ctx.res,
        200,
        usagePage(
          me.viewer,
          keys.map((k) => deps.keys.view(k)),
          selected === null ? null : deps.keys.view(selected),
          usageReport(rows, range.from, range.to),
          `/portal/usage.csv?${csv.toString()}`,
          planCurrency(deps.runtime.current.config.plans),
          budgets,
          budgeted.map((k) => deps.keys.view(k)),
        ),
      )
    }),
  )

  router.on(
    'GET',
    '/portal/usage.csv',
    guards.page('portal.usage.csv', async (ctx, me, _params, query) => {
      const { keys, range, rows } = await read(me, query)
      const body = Buffer.from(
        usageCsv(rows, new Map(keys.map((k) => [k.id, k.name ?? ''])), planCurrency(deps.runtime.current.config.plans)),
        'utf8',
      )
      securityHeaders(ctx.res)
      ctx.res.setHeader('cache-control', 'no-store')
      ctx.res.setHeader('content-type', 'text/csv; charset=utf-8')
      ctx.res.setHeader('content-disposition', `attachment; filename="tollgate-usage-${range.from}-${range.to}.csv"`)
      ctx.res.setHeader('content-length', body.length)
      ctx.res.statusCode = 200
      ctx.res.end(body)
    }),
  )
}

// What the usage page shows, from the same rows and the same sums as /admin/keys/{id}/usage
// and /admin/usage (admin/usage.ts): totals, per day (every day of the range, empty ones
// too, so the chart has no gaps), per model, per key, and per day and model; and the CSV.
import { groupUsage, summarise, type Totals } from '../admin/usage.ts'
import { exactAmount } from '../keys/money.ts'
import type { UsageRecord } from '../store/ports.ts'
import { dayNumber } from '../store/usage-rows.ts'

export interface DayTotals extends Totals {
  readonly day: string
}

export interface UsageReport {
  readonly from: string
  readonly to: string
  readonly totals: Totals
  readonly days: readonly DayTotals[]
  readonly byModel: ReadonlyArray<Record<string, string | number>>
  readonly byKey: ReadonlyArray<Record<string, string | number>>
  readonly byDayAndModel: ReadonlyArray<Record<string, string | number>>
}

const dayOf = (n: number): string => new Date(n * 86_400_000).toISOString().slice(0, 10)

export function usageReport(rows: readonly UsageRecord[], from: string, to: string): UsageReport {
  const perDay = new Map<string, UsageRecord[]>()
  for (const row of rows) {
    const list = perDay.get(row.day)
    if (list === undefined) perDay.set(row.day, [row])
    else list.push(row)
  }
  const days: DayTotals[] = []
  for (let n = dayNumber(from); n <= dayNumber(to); n++) {
    const day = dayOf(n)
    days.push({ day, ...summarise(perDay.get(day) ?? []) })
  }
  return {
    from,
    to,
    days,
    totals: summarise(rows),
    byModel: groupUsage(rows, 'model', false),
    byKey: groupUsage(rows, 'key', false),
    byDayAndModel: groupUsage(rows, 'model', true),
  }
}

/** A spreadsheet would run a cell starting with = + - @ as a formula: such text gets a leading '. */
function csvCell(value: string | number): string {
  if (typeof value === 'number') return String(value)
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe
}

/**
 * One line per key, model and day. The cost is the exact decimal of the metered nano-units
 * (never rounded to 0.00, never in exponent notation a spreadsheet might misread), and the
 * currency is beside it on every line: a file travels without the page that explained it.
 * The prompt cache's reads and writes come last, after the currency, so that a reader of
 * the columns before them by position reads what it did (input_tokens still counts the
 * whole prompt, cost the whole call): their tokens are parts of input_tokens, their costs
 * parts of cost. Batches' lines (src/batches/) come after those, for the same reason: how
 * many of the requests they were, and what of the cost, at the tier's batch price.
 */
export function usageCsv(
  rows: readonly UsageRecord[],
  keyNames: ReadonlyMap<string, string>,
  currency: string,
): string {
  const header = [
    'day',
    'key_id',
    'key_name',
    'model',
    'requests',
    'input_tokens',
    'output_tokens',
    'cost',
    'currency',
    'cache_read_tokens',
    'cache_write_tokens',
    'cache_read_cost',
    'cache_write_cost',
    'cached_requests',
    'batch_requests',
    'batch_cost',
  ]
  const sorted = [...rows].sort(
    (a, b) => a.day.localeCompare(b.day) || a.keyId.localeCompare(b.keyId) || a.model.localeCompare(b.model),
  )
  const lines = sorted.map((r) =>
    [
      ...[r.day, r.keyId, keyNames.get(r.keyId) ?? '', r.model, r.requests, r.inputTokens, r.outputTokens].map(csvCell),
      exactAmount(r.costNanos),
      csvCell(currency),
      csvCell(r.cacheReadTokens ?? 0),
      csvCell(r.cacheWriteTokens ?? 0),
      exactAmount(r.cacheReadCostNanos ?? 0),
      exactAmount(r.cacheWriteCostNanos ?? 0),
      csvCell(r.cachedRequests ?? 0),
      csvCell(r.batchRequests ?? 0),
      exactAmount(r.batchCostNanos ?? 0),
    ].join(','),
  )
  return [header.join(','), ...lines].join('\r\n') + '\r\n'
}

// `tollgate keys usage --from 2025-03-01`: the admin API answers at most MAX_USAGE_DAYS per
// query, and `to` defaults to today, so a `from` more than a year back would be refused.
// The command line asks in consecutive windows instead and adds the answers up into one
// reply of the API's own shape (so --json prints what one query would have).
import { MAX_USAGE_DAYS } from '../admin/usage-limits.ts'
import { isCalendarDay, dayNumber } from '../store/usage-rows.ts'

export interface UsageWindow {
  readonly from: string | undefined
  readonly to: string | undefined
}

const dayOf = (n: number): string => new Date(n * 86_400_000).toISOString().slice(0, 10)

/**
 * The windows to ask for: the range as given when it fits in one query (or when it is
 * not a pair of calendar days: the gateway says what is wrong with it), else consecutive
 * windows of MAX_USAGE_DAYS from `from` to `to` (default: today, UTC).
 */
export function usageWindows(from: string | undefined, to: string | undefined, now: Date): UsageWindow[] {
  if (from === undefined || !isCalendarDay(from)) return [{ from, to }]
  const end = to ?? now.toISOString().slice(0, 10)
  if (!isCalendarDay(end)) return [{ from, to }]
  const first = dayNumber(from)
  const last = dayNumber(end)
  if (last - first + 1 <= MAX_USAGE_DAYS) return [{ from, to }]
  const windows: UsageWindow[] = []
  for (let start = first; start <= last; start += MAX_USAGE_DAYS) {
    windows.push({ from: dayOf(start), to: dayOf(Math.min(last, start + MAX_USAGE_DAYS - 1)) })
  }
  return windows
}

type Row = Record<string, unknown>

const COUNTS = ['requests', 'input_tokens', 'output_tokens'] as const
// The prompt cache's parts of input and cost, the calls the response cache answered, and the
// lines of batches with their cost: summed only where a reply has them, so the merged reply of
// a gateway from before them keeps that gateway's shape.
const CACHE_COUNTS = ['cache_read_tokens', 'cache_write_tokens', 'cached_requests', 'batch_requests'] as const
const CACHE_COSTS = ['cache_read_cost', 'cache_write_cost', 'batch_cost'] as const

const num = (value: unknown): number => (typeof value === 'number' ? value : 0)
/** A sum of amounts, rounded to the nano-unit the API keeps (0.1 + 0.5 is 0.6). */
const amount = (a: unknown, b: unknown): number => Math.round((num(a) + num(b)) * 1e9) / 1e9

/** Adds a row's counts and costs into another. */
function addInto(into: Row, row: Row): void {
  for (const field of COUNTS) into[field] = num(into[field]) + num(row[field])
  into.cost = amount(into.cost, row.cost)
  for (const field of CACHE_COUNTS) if (field in into || field in row) into[field] = num(into[field]) + num(row[field])
  for (const field of CACHE_COSTS) if (field in into || field in row) into[field] = amount(into[field], row[field])
}

/** Rows of several windows summed per `field` (by_model, or a non-daily group), sorted by it. */
function sumBy(rows: readonly Row[], field: string): Row[] {
  const sums = new Map<string, Row>()
  for (const row of rows) {
    const name = String(row[field])
    const entry = sums.get(name)
    if (entry === undefined) sums.set(name, { ...row })
    else addInto(entry, row)
  }
  return [...sums.values()].sort((a, b) =>
    String(a[field]) < String(b[field]) ? -1 : String(a[field]) > String(b[field]) ? 1 : 0,
  )
}

const rowsOf = (value: unknown): Row[] =>
  Array.isArray(value) ? value.filter((r): r is Row => typeof r === 'object' && r !== null) : []

/**
 * One reply from the replies of consecutive windows. Daily rows (and a key's per-day
 * rows) belong to one window each and are concatenated; totals, by_model and non-daily
 * groups are summed. `group` is the grouping field (key_id, owner, ...), or null for a
 * key's usage.
 */
export function mergeUsageReplies(replies: readonly Row[], group: string | null, daily: boolean): Row {
  const [first] = replies
  if (first === undefined || replies.length === 1) return first ?? {}
  const last = replies[replies.length - 1] ?? first
  const data = replies.flatMap((r) => rowsOf(r.data))
  const totals: Row = { requests: 0, input_tokens: 0, output_tokens: 0, cost: 0 }
  for (const reply of replies)
    addInto(totals, typeof reply.totals === 'object' && reply.totals !== null ? (reply.totals as Row) : {})
  const merged: Row = { ...first, to: last.to, totals }
  if (group === null) {
    merged.data = data
    merged.by_model = sumBy(
      replies.flatMap((r) => rowsOf(r.by_model)),
      'model',
    )
  } else {
    merged.data = daily ? data : sumBy(data, group)
  }
  return merged
}

// Checks and ordering both usage adapters share.
import {
  ROW_COUNTERS,
  type RowCounter,
  type StreamCharge,
  type StreamEntry,
  type UsageQuery,
  type UsageRecord,
  type UsageWrite,
} from './ports.ts'

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/
const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0

const DAY_MS = 86_400_000
/** The last day asked of dayNumber and of dayOf, and their answers: every call of a day asks the same. */
let lastDay = ''
let lastDayNumber = 0
let lastDayIndex = Number.NaN
let lastDayText = ''

/** Days since 1970-01-01 of a YYYY-MM-DD UTC day; throws on anything else (2025-02-30 too). */
export function dayNumber(day: string): number {
  if (day === lastDay) return lastDayNumber
  const m = DAY.exec(day)
  if (m === null) throw new RangeError(`not a YYYY-MM-DD day: ${JSON.stringify(day)}`)
  const [, y, mo, d] = m
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d))
  if (new Date(ms).toISOString().slice(0, 10) !== day) throw new RangeError(`not a calendar day: ${day}`)
  lastDay = day
  lastDayNumber = ms / DAY_MS
  return lastDayNumber
}

/** The UTC day (YYYY-MM-DD) of an epoch-ms instant. */
export function dayOf(ms: number): string {
  const index = Math.floor(ms / DAY_MS)
  if (index !== lastDayIndex) {
    lastDayText = new Date(ms).toISOString().slice(0, 10)
    lastDayIndex = index
  }
  return lastDayText
}

/** Recovered stream entries are kept this long, for a settle of a gateway that only looked dead. */
export const RECOVERED_STREAM_TTL_MS = 86_400_000

type StreamEntryValues = [string, string, string, string, string, string, number, number, number, number]

/** A journal entry's fields in the one order both adapters write them in (SQL columns, script ARGV). */
export function streamEntryValues(entry: StreamEntry): StreamEntryValues {
  const { id, instance, keyId, owner, tier, model, at, inputTokens, outputTokens, costNanos } = entry
  return [id, instance, keyId, owner, tier, model, at, inputTokens, outputTokens, costNanos]
}

/** The entries of the instances `of` accepts (StreamJournal.list), asking it once per instance. */
export async function onlyOf(
  entries: readonly StreamEntry[],
  of: (instance: string) => Promise<boolean>,
): Promise<StreamEntry[]> {
  const verdicts = new Map<string, Promise<boolean>>()
  const keep = await Promise.all(
    entries.map((e) => {
      let verdict = verdicts.get(e.instance)
      if (verdict === undefined) {
        verdict = of(e.instance)
        verdicts.set(e.instance, verdict)
      }
      return verdict
    }),
  )
  return entries.filter((_, i) => keep[i] === true)
}

/**
 * A settling record less what recovery already charged for its stream: the call is
 * charged once in all, as one request, never below zero. Recovery charged the prompt at
 * the input price (a journal entry knows no cache parts): what is left of it is not told
 * apart either.
 */
export function lessRecovered<T extends UsageRecord>(record: T, recovered: StreamCharge): T {
  const less = (n: number, m: number): number => Math.max(0, n - m)
  return {
    ...record,
    requests: less(record.requests, 1),
    inputTokens: less(record.inputTokens, recovered.inputTokens),
    outputTokens: less(record.outputTokens, recovered.outputTokens),
    costNanos: less(record.costNanos, recovered.costNanos),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cacheReadCostNanos: 0,
    cacheWriteCostNanos: 0,
  }
}

/** Refuses a journal entry or checkpoint with a count that is not a non-negative integer. */
export function checkStreamCharge(charge: StreamCharge): void {
  if (!isCount(charge.inputTokens) || !isCount(charge.outputTokens) || !isCount(charge.costNanos)) {
    throw new RangeError('stream charges must be non-negative integers')
  }
}

export function isCalendarDay(day: string): boolean {
  try {
    dayNumber(day)
    return true
  } catch {
    return false
  }
}

/**
 * A row's counters (ROW_COUNTERS), each as `read` gives it: what the stores and the admin
 * sums build rows with, so a new counter is added to the list alone.
 */
export function rowCounters(read: (counter: RowCounter) => number): Record<RowCounter, number> {
  return Object.fromEntries(ROW_COUNTERS.map((c) => [c, read(c)])) as Record<RowCounter, number>
}

/** A once charge's write (UsageWrite.keepIdMs): it counts once under the id it came with, never another. */
export function countsOnce<W extends Pick<UsageWrite, 'id' | 'keepIdMs'>>(
  write: W,
): write is W & { readonly id: string; readonly keepIdMs: number } {
  return write.id !== undefined && write.keepIdMs !== undefined
}

/** Refuses the whole batch before anything is written if one record is malformed. */
export function checkUsageRecords(records: readonly UsageRecord[]): void {
  for (const r of records) {
    dayNumber(r.day)
    if (!isCount(r.requests) || !isCount(r.inputTokens) || !isCount(r.outputTokens)) {
      throw new RangeError(
        `usage counters must be non-negative integers (key ${r.keyId}, model ${r.model}, day ${r.day})`,
      )
    }
    if (!isCount(r.costNanos))
      throw new RangeError(`usage cost must be a non-negative integer of nano-units (key ${r.keyId})`)
    if (!ROW_COUNTERS.every((c) => isCount(r[c] ?? 0)))
      throw new RangeError(`usage cache and batch counters must be non-negative integers (key ${r.keyId})`)
  }
}

export function checkUsageQuery(query: UsageQuery): void {
  if (query.from !== undefined) dayNumber(query.from)
  if (query.to !== undefined) dayNumber(query.to)
}

/** query() order: by day, then key, then model. */
export function compareUsageRows(a: UsageRecord, b: UsageRecord): number {
  for (const [x, y] of [
    [a.day, b.day],
    [a.keyId, b.keyId],
    [a.model, b.model],
  ] as const) {
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

// Checks and ordering both usage adapters share.
import type { UsageQuery, UsageRecord } from './ports.ts'

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/

/** Days since 1970-01-01 of a YYYY-MM-DD UTC day; throws on anything else (2025-02-30 too). */
export function dayNumber(day: string): number {
  const m = DAY.exec(day)
  if (m === null) throw new RangeError(`not a YYYY-MM-DD day: ${JSON.stringify(day)}`)
  const [, y, mo, d] = m
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d))
  if (new Date(ms).toISOString().slice(0, 10) !== day) throw new RangeError(`not a calendar day: ${day}`)
  return ms / 86_400_000
}

export function isCalendarDay(day: string): boolean {
  try {
    dayNumber(day)
    return true
  } catch {
    return false
  }
}

const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0

/** Refuses the whole batch before anything is written if one record is malformed. */
export function checkUsageRecords(records: readonly UsageRecord[]): void {
  for (const r of records) {
    dayNumber(r.day)
    if (!isCount(r.requests) || !isCount(r.inputTokens) || !isCount(r.outputTokens)) {
      throw new RangeError(`usage counters must be non-negative integers (key ${r.keyId}, model ${r.model}, day ${r.day})`)
    }
    if (!isCount(r.costNanos)) throw new RangeError(`usage cost must be a non-negative integer of nano-units (key ${r.keyId})`)
  }
}

export function checkUsageQuery(query: UsageQuery): void {
  if (query.from !== undefined) dayNumber(query.from)
  if (query.to !== undefined) dayNumber(query.to)
}

/** query() order: by day, then key, then model. */
export function compareUsageRows(a: UsageRecord, b: UsageRecord): number {
  for (const [x, y] of [[a.day, b.day], [a.keyId, b.keyId], [a.model, b.model]] as const) {
    if (x !== y) return x < y ? -1 : 1
  }
  return 0
}

// A budget's period: the day, the ISO week (Monday to Sunday) or the calendar month that an
// instant falls in, on the wall clock of an IANA time zone, or the key's whole lifetime.
// Its start names the counter a period's spend is kept in, so a new period starts from
// nothing without anything being reset; its end is when the budget is full again.
//
// A local midnight is found on the zone's own rules (Intl): a day that a DST change makes
// 23 or 25 hours long is one period, as a person in that zone sees it. Where a zone skips
// midnight itself (a DST change at 00:00), the period starts at the first instant of the
// local day that exists.

export const PERIODS = ['day', 'week', 'month', 'lifetime'] as const
export type BudgetPeriod = (typeof PERIODS)[number]

export interface PeriodSpan {
  /** Epoch ms of the period's first instant (0 for the lifetime). */
  readonly start: number
  /** Epoch ms the next period begins (Infinity for the lifetime). */
  readonly end: number
}

const formatters = new Map<string, Intl.DateTimeFormat>()

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(timeZone, f)
  }
  return f
}

/** Whether Intl knows this IANA zone name. */
export function isTimeZone(name: string): boolean {
  try {
    formatter(name)
    return true
  } catch {
    return false
  }
}

interface Wall {
  readonly year: number
  readonly month: number
  readonly day: number
  readonly hour: number
  readonly minute: number
  readonly second: number
}

function wallOf(at: number, timeZone: string): Wall {
  const parts: Record<string, number> = {}
  for (const p of formatter(timeZone).formatToParts(new Date(at))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value)
  }
  return {
    year: parts.year ?? 1970,
    month: parts.month ?? 1,
    day: parts.day ?? 1,
    hour: parts.hour ?? 0,
    minute: parts.minute ?? 0,
    second: parts.second ?? 0,
  }
}

/** The zone's offset from UTC at an instant, ms (east positive). */
function offsetAt(at: number, timeZone: string): number {
  const w = wallOf(at, timeZone)
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second)
  return asUtc - Math.floor(at / 1000) * 1000
}

/**
 * The first instant of a local calendar day (month may run past 12, day past the month's
 * end: Date.UTC carries them over, so Dec + 1 is next January).
 */
export function localMidnight(year: number, month: number, day: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day)
  // Two rounds settle the offset (it can differ between the guess and the answer across a change).
  let at = wall - offsetAt(wall, timeZone)
  at = wall - offsetAt(at, timeZone)
  const w = wallOf(at, timeZone)
  const target = new Date(wall)
  const sameDay =
    w.year === target.getUTCFullYear() && w.month === target.getUTCMonth() + 1 && w.day === target.getUTCDate()
  if (sameDay && w.hour === 0 && w.minute === 0) return at
  // Midnight does not exist that day (a change at 00:00): the day begins where the clock jumps to.
  if (!sameDay) {
    // We landed on the previous day's late evening: step forward an hour at a time until the day begins.
    for (let i = 0; i < 4; i++) {
      at += 3_600_000
      const v = wallOf(at, timeZone)
      if (v.day === target.getUTCDate()) return at - (v.minute * 60_000 + v.second * 1000)
    }
  }
  return at - (w.hour * 3_600_000 + w.minute * 60_000 + w.second * 1000)
}

/** The last span found per (period, zone): every call until its end reuses it (Intl is slow). */
const lastSpan = new Map<string, PeriodSpan>()

/** The period an instant falls in, on the wall clock of `timeZone`. */
export function periodOf(period: BudgetPeriod, timeZone: string, at: number): PeriodSpan {
  if (period === 'lifetime') return { start: 0, end: Infinity }
  const id = `${period}\u0000${timeZone}`
  const known = lastSpan.get(id)
  if (known !== undefined && known.start <= at && at < known.end) return known
  const span = computePeriod(period, timeZone, at)
  if (lastSpan.size > 1000) lastSpan.clear()
  lastSpan.set(id, span)
  return span
}

function computePeriod(period: Exclude<BudgetPeriod, 'lifetime'>, timeZone: string, at: number): PeriodSpan {
  const w = wallOf(at, timeZone)
  switch (period) {
    case 'day':
      return {
        start: localMidnight(w.year, w.month, w.day, timeZone),
        end: localMidnight(w.year, w.month, w.day + 1, timeZone),
      }
    case 'week': {
      // ISO weeks start on Monday: getUTCDay of the wall date, 0 = Sunday.
      const weekday = (new Date(Date.UTC(w.year, w.month - 1, w.day)).getUTCDay() + 6) % 7
      return {
        start: localMidnight(w.year, w.month, w.day - weekday, timeZone),
        end: localMidnight(w.year, w.month, w.day - weekday + 7, timeZone),
      }
    }
    case 'month':
      return {
        start: localMidnight(w.year, w.month, 1, timeZone),
        end: localMidnight(w.year, w.month + 1, 1, timeZone),
      }
  }
}

/** An instant as the zone's wall clock reads it, with its offset: 2026-12-01T00:00:00+01:00. */
export function zonedIso(at: number, timeZone: string): string {
  const w = wallOf(at, timeZone)
  const pad = (n: number, size = 2): string => String(n).padStart(size, '0')
  const offset = Math.round(offsetAt(at, timeZone) / 60_000)
  const sign = offset < 0 ? '-' : '+'
  const abs = Math.abs(offset)
  const zone = offset === 0 ? 'Z' : `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${zone}`
}

// Metering: every call's usage is written to the usage store as the call ends (at the end
// of that turn of the event loop, in one write with the other calls that ended in it), and
// record() resolves once it is there, so that a gateway killed the moment after has lost
// nothing it answered (the relay awaits it before a reply's last bytes). On Redis the
// write is one script call; on the embedded store one SQLite transaction (WAL), which a
// crash of the process cannot undo.
//
// A call that streamed names its journal entry (UsageWrite.stream), which goes in the same
// write, so a stream is charged by its settle or by a recovery after a crash, never both.
//
// A write the store refuses (a Redis blip) is not lost either: its row is kept in memory
// and retried on a timer; record() resolves anyway, since the call itself went fine.
// close() keeps trying for a while before it gives up, loudly. Counts are made whole and
// non-negative here, so a write can only fail for want of a store (a malformed row would
// otherwise block every later one forever).
//
// Nor is it counted twice. A write that was never sent (no connection) is folded with the
// others like it into one row per (key, model, day). One that may have been applied (it
// timed out, or the connection dropped while it was in flight) is kept apart and sent
// again under the id it was first sent with, which the store applies once (UsageWrite.id).
//
// A charge that must count once across restarts (a stored request's: limits/port.ts
// OnceCharge) comes with its own id: its row is never folded with others, and is sent,
// and sent again, under that id, which the store keeps for as long as the entry says.
import { randomBytes } from 'node:crypto'
import type { Logger } from '../observability/logger.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import { ROW_COUNTERS, type UsageRecord, type UsageStore, type UsageWrite } from '../store/ports.ts'
import { countsOnce, dayOf } from '../store/usage-rows.ts'
import { turnBatches } from '../turn-batches.ts'

export interface MeterOptions {
  readonly store: UsageStore
  readonly log: Logger
  /** How often rows the store refused are tried again. */
  readonly retryIntervalMs?: number
  /** How long close() keeps retrying a store that refuses. */
  readonly closeTimeoutMs?: number
}

export type MeterEntry = Omit<UsageWrite, 'day' | 'requests'> & { readonly at?: Date }

export interface Meter {
  /** Writes one call's usage; resolves once stored, or kept for a retry if the store refused. Never rejects. */
  record(entry: MeterEntry): Promise<void>
  /** Retries the rows the store refused; resolves when written or refused again (kept). */
  flush(): Promise<void>
  /** Rows waiting for a retry. */
  pending(): number
  close(): Promise<void>
}

export function utcDay(at: Date): string {
  return dayOf(at.getTime())
}

const count = (n: number): number =>
  Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), Number.MAX_SAFE_INTEGER) : 0

/** The cache and batch counters of rows folded together; none when none of them has any (most calls). */
function cacheSums(
  ...rows: readonly Pick<UsageRecord, (typeof ROW_COUNTERS)[number]>[]
): Partial<Pick<UsageRecord, (typeof ROW_COUNTERS)[number]>> {
  if (rows.every((r) => ROW_COUNTERS.every((c) => r[c] === undefined))) return {}
  return Object.fromEntries(ROW_COUNTERS.map((c) => [c, rows.reduce((n, r) => n + count(r[c] ?? 0), 0)]))
}

/** Certainly not applied: the store had no connection to send it on. */
const unsent = (err: unknown): boolean => err instanceof StoreUnavailableError && err.unsent

export function createMeter(options: MeterOptions): Meter {
  const interval = options.retryIntervalMs ?? 1000
  const closeTimeout = options.closeTimeoutMs ?? 5000
  // Write ids: this meter's own prefix and a counter, unique without a random draw per call.
  const idPrefix = randomBytes(9).toString('base64url')
  let written = 0
  const nextId = (): string => `${idPrefix}.${(written++).toString(36)}`
  /** Rows never sent: folded, one per (key, model, day), or per stream settled. */
  let pending = new Map<string, UsageWrite>()
  /** Rows that may have been applied, by the id they were sent with and are sent again under. */
  let unsure = new Map<string, UsageWrite>()
  let inFlight: Promise<void> | null = null
  let failing = false

  const fold = (rows: Map<string, UsageWrite>, row: UsageWrite): void => {
    if (countsOnce(row)) {
      // A once charge stays apart, under its id: folded, it could count twice or not at all.
      rows.set(`\u0001${row.id}`, row)
      return
    }
    const { id: _sentAs, ...unsentRow } = row
    // A row that settles a stream stays apart: its write must name its journal entry.
    const key = row.stream === undefined ? `${row.keyId}\u0000${row.model}\u0000${row.day}` : `\u0000${row.stream}`
    const prev = rows.get(key)
    rows.set(
      key,
      prev
        ? {
            ...prev,
            requests: prev.requests + row.requests,
            inputTokens: prev.inputTokens + row.inputTokens,
            outputTokens: prev.outputTokens + row.outputTokens,
            costNanos: prev.costNanos + row.costNanos,
            ...cacheSums(prev, row),
          }
        : unsentRow,
    )
  }
  /** Folded rows with the ids they are sent under. */
  const sentAs = (rows: Map<string, UsageWrite>): UsageWrite[] =>
    [...rows.values()].map((row) => (countsOnce(row) ? row : { ...row, id: nextId() }))
  /** Keeps rows a write failed with, for the next retry. */
  const keep = (rows: Iterable<UsageWrite>, err: unknown): void => {
    for (const row of rows) {
      if (unsent(err) || row.id === undefined) fold(pending, row)
      else unsure.set(row.id, row)
    }
  }

  const refused = (err: unknown, rows: number): void => {
    if (!failing)
      options.log.warn({ err: (err as Error).message, rows }, 'usage metering write failed; keeping rows for retry')
    failing = true
  }
  const wrote = (): void => {
    if (failing) options.log.info('usage metering writes again')
    failing = false
  }

  /** One attempt at the kept rows. */
  const retryOnce = async (): Promise<void> => {
    if (pending.size === 0 && unsure.size === 0) return
    const again = unsure
    unsure = new Map()
    const folded = sentAs(pending)
    pending = new Map()
    try {
      await options.store.add([...again.values(), ...folded])
      wrote()
    } catch (err) {
      // What was unsure stays so, under its id; the folded rows are unsure now only if
      // this attempt may have applied them.
      for (const [id, row] of again) unsure.set(id, row)
      keep(folded, err)
      refused(err, again.size + folded.length)
    }
  }

  const flush = async (): Promise<void> => {
    while (inFlight) await inFlight
    inFlight = retryOnce().finally(() => {
      inFlight = null
    })
    await inFlight
  }

  const timer = setInterval(() => {
    if (pending.size > 0 || unsure.size > 0) void flush()
  }, interval)
  timer.unref()

  const kept = (): UsageWrite[] => [...pending.values(), ...unsure.values()]

  /**
   * The calls recorded in one turn of the event loop, folded as the kept rows are (one row
   * per key, model and day; a stream's apart), go in one write at the end of the turn: under
   * concurrency a turn ends many calls, and each was a script of its own, with a marker key.
   */
  const turnRows = turnBatches(
    () => new Map<string, UsageWrite>(),
    async (rows) => {
      const batch = sentAs(rows)
      try {
        await options.store.add(batch)
        wrote()
      } catch (err) {
        keep(batch, err)
        refused(err, batch.length)
      }
    },
  )

  return {
    record(entry) {
      const { batch, sent } = turnRows('')
      fold(batch, {
        keyId: entry.keyId,
        owner: entry.owner,
        tier: entry.tier,
        model: entry.model,
        day: utcDay(entry.at ?? new Date()),
        requests: 1,
        inputTokens: count(entry.inputTokens),
        outputTokens: count(entry.outputTokens),
        costNanos: count(entry.costNanos),
        ...cacheSums(entry),
        ...(entry.stream === undefined ? {} : { stream: entry.stream }),
        ...(countsOnce(entry) ? { id: entry.id, keepIdMs: entry.keepIdMs } : {}),
      })
      return sent
    },
    flush,
    pending: () => pending.size + unsure.size,
    async close() {
      clearInterval(timer)
      const deadline = Date.now() + closeTimeout
      let delay = 50
      await flush()
      // A blip at shutdown: keep trying, with backoff, until the deadline.
      while (pending.size + unsure.size > 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, Math.min(delay, Math.max(deadline - Date.now(), 0))))
        delay = Math.min(delay * 2, 1000)
        await flush()
      }
      if (pending.size + unsure.size > 0) {
        const rows = kept()
        options.log.error(
          {
            rows: rows.length,
            requests: rows.reduce((n, r) => n + r.requests, 0),
            inputTokens: rows.reduce((n, r) => n + r.inputTokens, 0),
            outputTokens: rows.reduce((n, r) => n + r.outputTokens, 0),
          },
          'usage rows could not be written at shutdown',
        )
      }
    },
  }
}

// Metering: every call's usage is written to the usage store as the call ends, and
// record() resolves once it is there, so that a gateway killed the moment after has lost
// nothing it answered (the relay awaits it before a reply's last bytes). On Redis the
// write is one script call; on the embedded store one SQLite transaction (WAL), which a
// crash of the process cannot undo.
//
// A call that streamed names its journal entry (UsageWrite.stream), which goes in the same
// write, so a stream is charged by its settle or by a recovery after a crash, never both.
//
// A write the store refuses (a Redis blip) is not lost either: its row is kept in memory,
// folded with later refused rows into one row per (key, model, day), and retried on a
// timer; record() resolves anyway, since the call itself went fine. close() keeps trying
// for a while before it gives up, loudly. Counts are made whole and non-negative here, so
// a write can only fail for want of a store (a malformed row would otherwise block every
// later one forever).
import type { Logger } from '../observability/logger.ts'
import type { UsageStore, UsageWrite } from '../store/ports.ts'

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
  return at.toISOString().slice(0, 10)
}

const count = (n: number): number =>
  Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), Number.MAX_SAFE_INTEGER) : 0

export function createMeter(options: MeterOptions): Meter {
  const interval = options.retryIntervalMs ?? 1000
  const closeTimeout = options.closeTimeoutMs ?? 5000
  let pending = new Map<string, UsageWrite>()
  let inFlight: Promise<void> | null = null
  let failing = false

  const fold = (rows: Map<string, UsageWrite>, row: UsageWrite): void => {
    // A row that settles a stream stays apart: its write must name its journal entry.
    const id = row.stream === undefined ? `${row.keyId}\u0000${row.model}\u0000${row.day}` : `\u0000${row.stream}`
    const prev = rows.get(id)
    rows.set(
      id,
      prev
        ? {
            ...prev,
            requests: prev.requests + row.requests,
            inputTokens: prev.inputTokens + row.inputTokens,
            outputTokens: prev.outputTokens + row.outputTokens,
            costNanos: prev.costNanos + row.costNanos,
          }
        : row,
    )
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
    if (pending.size === 0) return
    const batch = pending
    pending = new Map()
    try {
      await options.store.add([...batch.values()])
      wrote()
    } catch (err) {
      // Rows refused meanwhile fold into the kept ones: still one row per (key, model, day).
      const newer = pending
      pending = batch
      for (const row of newer.values()) fold(pending, row)
      refused(err, batch.size)
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
    if (pending.size > 0) void flush()
  }, interval)
  timer.unref()

  return {
    async record(entry) {
      const row: UsageWrite = {
        keyId: entry.keyId,
        owner: entry.owner,
        tier: entry.tier,
        model: entry.model,
        day: utcDay(entry.at ?? new Date()),
        requests: 1,
        inputTokens: count(entry.inputTokens),
        outputTokens: count(entry.outputTokens),
        costNanos: count(entry.costNanos),
        ...(entry.stream === undefined ? {} : { stream: entry.stream }),
      }
      try {
        await options.store.add([row])
        wrote()
      } catch (err) {
        fold(pending, row)
        refused(err, 1)
      }
    },
    flush,
    pending: () => pending.size,
    async close() {
      clearInterval(timer)
      const deadline = Date.now() + closeTimeout
      let delay = 50
      await flush()
      // A blip at shutdown: keep trying, with backoff, until the deadline.
      while (pending.size > 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, Math.min(delay, Math.max(deadline - Date.now(), 0))))
        delay = Math.min(delay * 2, 1000)
        await flush()
      }
      if (pending.size > 0) {
        const rows = [...pending.values()]
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

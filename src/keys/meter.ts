// Metering off the hot path: calls are folded into (key, model, day) rows in memory and
// written in batches. A failed write keeps its rows for the next flush, so a Redis blip
// loses nothing; close() keeps trying for a while before it gives up, loudly.
//
// The request path never waits for the store: record() only adds to a map. Counts are
// made whole and non-negative here, so a batch can only fail for want of a store (a
// malformed row would otherwise block every later one forever).
import type { Logger } from '../observability/logger.ts'
import type { UsageRecord, UsageStore } from '../store/ports.ts'

export interface MeterOptions {
  readonly store: UsageStore
  readonly log: Logger
  readonly flushIntervalMs?: number
  /** Rows pending before a flush starts early. */
  readonly maxPendingRows?: number
  /** How long close() keeps retrying a store that refuses. */
  readonly closeTimeoutMs?: number
}

export type MeterEntry = Omit<UsageRecord, 'day' | 'requests'> & { readonly at?: Date }

export interface Meter {
  record(entry: MeterEntry): void
  /** Writes everything pending; resolves when written or when the store refused (kept). */
  flush(): Promise<void>
  /** Rows waiting to be written. */
  pending(): number
  close(): Promise<void>
}

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10)
}

const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), Number.MAX_SAFE_INTEGER) : 0)
const amount = (n: number): number => (Number.isFinite(n) && n > 0 ? n : 0)

export function createMeter(options: MeterOptions): Meter {
  const interval = options.flushIntervalMs ?? 1000
  const maxPending = options.maxPendingRows ?? 1000
  const closeTimeout = options.closeTimeoutMs ?? 5000
  let pending = new Map<string, UsageRecord>()
  let inFlight: Promise<void> | null = null
  let failing = false
  let closed = false

  const fold = (rows: Map<string, UsageRecord>, row: UsageRecord): void => {
    const id = `${row.keyId}\u0000${row.model}\u0000${row.day}`
    const prev = rows.get(id)
    rows.set(id, prev
      ? { ...prev, requests: prev.requests + row.requests, inputTokens: prev.inputTokens + row.inputTokens, outputTokens: prev.outputTokens + row.outputTokens, cost: prev.cost + row.cost }
      : row)
  }

  /** One attempt; true when nothing is left pending from it. */
  const writeOnce = async (): Promise<boolean> => {
    if (pending.size === 0) return true
    const batch = pending
    pending = new Map()
    try {
      await options.store.add([...batch.values()])
      if (failing) options.log.info('usage metering writes again')
      failing = false
      return true
    } catch (err) {
      // Rows recorded meanwhile fold into the kept ones: still one row per (key, model, day).
      const newer = pending
      pending = batch
      for (const row of newer.values()) fold(pending, row)
      if (!failing) options.log.warn({ err: (err as Error).message, rows: batch.size }, 'usage metering write failed; keeping rows for retry')
      failing = true
      return false
    }
  }

  const flush = async (): Promise<void> => {
    while (inFlight) await inFlight
    inFlight = writeOnce().then(() => undefined).finally(() => { inFlight = null })
    await inFlight
  }

  const timer = setInterval(() => { void flush() }, interval)
  timer.unref()

  return {
    record(entry) {
      const row: UsageRecord = {
        keyId: entry.keyId,
        owner: entry.owner,
        tier: entry.tier,
        model: entry.model,
        day: utcDay(entry.at ?? new Date()),
        requests: 1,
        inputTokens: count(entry.inputTokens),
        outputTokens: count(entry.outputTokens),
        cost: amount(entry.cost),
      }
      fold(pending, row)
      // A call that ends after close() (a stream cut during the drain) is written at once.
      if (closed || (pending.size >= maxPending && !inFlight)) void flush()
    },
    flush,
    pending: () => pending.size,
    async close() {
      closed = true
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
        options.log.error({
          rows: rows.length,
          requests: rows.reduce((n, r) => n + r.requests, 0),
          inputTokens: rows.reduce((n, r) => n + r.inputTokens, 0),
          outputTokens: rows.reduce((n, r) => n + r.outputTokens, 0),
        }, 'usage rows could not be written at shutdown')
      }
    },
  }
}

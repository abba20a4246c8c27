// Metering off the hot path: calls are folded into (key, model, day) rows in memory and
// written in batches. A failed write keeps its rows for the next flush, so a Redis blip
// loses nothing; close() flushes what is left.
import type { Logger } from '../observability/logger.ts'
import type { UsageRecord, UsageStore } from '../store/ports.ts'

export interface MeterOptions {
  readonly store: UsageStore
  readonly log: Logger
  readonly flushIntervalMs?: number
  /** Rows pending before a flush starts early. */
  readonly maxPendingRows?: number
}

export interface Meter {
  record(entry: Omit<UsageRecord, 'day' | 'requests'> & { at?: Date }): void
  /** Writes everything pending; resolves when written or when the store refused (kept). */
  flush(): Promise<void>
  close(): Promise<void>
}

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10)
}

export function createMeter(options: MeterOptions): Meter {
  const interval = options.flushIntervalMs ?? 1000
  const maxPending = options.maxPendingRows ?? 1000
  let pending = new Map<string, UsageRecord>()
  let inFlight: Promise<void> | null = null
  let failing = false

  const fold = (rows: Map<string, UsageRecord>, row: UsageRecord): void => {
    const id = `${row.keyId}\u0000${row.model}\u0000${row.day}`
    const prev = rows.get(id)
    rows.set(id, prev
      ? { ...prev, requests: prev.requests + row.requests, inputTokens: prev.inputTokens + row.inputTokens, outputTokens: prev.outputTokens + row.outputTokens, cost: prev.cost + row.cost }
      : row)
  }

  const writeOnce = async (): Promise<void> => {
    if (pending.size === 0) return
    const batch = pending
    pending = new Map()
    try {
      await options.store.add([...batch.values()])
      if (failing) options.log.info('usage metering writes again')
      failing = false
    } catch (err) {
      for (const row of batch.values()) fold(pending, row)
      if (!failing) options.log.warn({ err: (err as Error).message, rows: batch.size }, 'usage metering write failed; keeping rows for retry')
      failing = true
    }
  }

  const flush = async (): Promise<void> => {
    while (inFlight) await inFlight
    inFlight = writeOnce().finally(() => { inFlight = null })
    await inFlight
  }

  const timer = setInterval(() => { void flush() }, interval)
  timer.unref()

  return {
    record(entry) {
      const { at, ...rest } = entry
      fold(pending, { ...rest, day: utcDay(at ?? new Date()), requests: 1 })
      if (pending.size >= maxPending && !inFlight) void flush()
    },
    flush,
    async close() {
      clearInterval(timer)
      await flush()
      // One more try for rows a blip kept back, then give up loudly.
      if (pending.size > 0) await flush()
      if (pending.size > 0) options.log.error({ rows: pending.size }, 'usage rows could not be written at shutdown')
    },
  }
}

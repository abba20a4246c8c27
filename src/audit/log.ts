// The audit log as the rest of the gateway uses it: records stamped with the clock, pages
// read, and the retention sweep (audit.retentionDays), run every audit.sweepIntervalSeconds
// by main.ts and once at start. The clock is passed in, so tests move time instead of waiting.
import type { Logger } from '../observability/logger.ts'
import { createTaskOutage } from '../observability/outage-log.ts'
import type { AuditStore } from './port.ts'
import type { AuditEntry, AuditPage, AuditQuery, NewAuditEntry } from './record.ts'

const DAY_MS = 86_400_000

export interface AuditLogOptions {
  readonly store: AuditStore
  readonly retentionDays: number
  readonly now?: () => number
}

export interface AuditLog {
  readonly kind: AuditStore['kind']
  record(entry: Omit<NewAuditEntry, 'at'>): Promise<AuditEntry>
  query(query: AuditQuery): Promise<AuditPage>
  /** Removes what is older than the retention; how many records went. */
  sweep(): Promise<number>
  close(): Promise<void>
}

export function createAuditLog(options: AuditLogOptions): AuditLog {
  const { store, retentionDays } = options
  const now = options.now ?? Date.now
  return {
    kind: store.kind,
    record: (entry) => store.append({ ...entry, at: now() }),
    query: (query) => store.query(query),
    sweep: () => store.prune(now() - retentionDays * DAY_MS),
    close: () => store.close(),
  }
}

/** Sweeps now and then every intervalMs; a failed sweep is tried again, logged when it starts failing and when it is over. */
export function startAuditSweep(log: AuditLog, intervalMs: number, logger: Logger): { stop(): void } {
  const outage = createTaskOutage(logger, 'audit: retention sweep')
  const sweep = (): void => {
    log.sweep().then(
      (removed) => {
        outage.succeeded()
        if (removed > 0) logger.info({ removed }, 'audit: records past their retention removed')
      },
      (err: unknown) => outage.failed(err),
    )
  }
  sweep()
  const timer = setInterval(sweep, intervalMs)
  timer.unref()
  return { stop: () => clearInterval(timer) }
}

// The audit log's store: append-only. Records are added and read, never changed or
// deleted one by one; the only removal is retention (everything older than a time).
// Two adapters pass test/audit/contract.ts: embedded-store.ts (audit.db) and
// redis-store.ts (one stream under the Redis namespace).
import type { AuditEntry, AuditPage, AuditQuery, NewAuditEntry } from './record.ts'

export interface AuditStore {
  readonly kind: 'embedded' | 'redis'
  /** Adds one record and returns it with its id. */
  append(entry: NewAuditEntry): Promise<AuditEntry>
  /** A page of records matching the query, newest first. AuditCursorError for a cursor this store never gave. */
  query(query: AuditQuery): Promise<AuditPage>
  /** Removes every record older than `before` (unix ms); how many went. */
  prune(before: number): Promise<number>
  close(): Promise<void>
}

/** An `after` that is not an id this store hands out. */
export class AuditCursorError extends Error {
  override readonly name = 'AuditCursorError'
}

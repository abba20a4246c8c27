// The ids of usage writes that must count once across restarts (UsageWrite.keepIdMs: a
// stored request's charge), in the embedded store's database. A write and its id go in
// the same transaction, so a write the database kept is known as applied, and one it did
// not keep was not: a run again after a crash writes it once. Each id is kept for as long
// as its write asked, then forgotten (swept now and then, an index range).
import type { DatabaseSync } from 'node:sqlite'

/** Schema step of tollgate.db (embedded.ts MIGRATIONS). */
export const APPLIED_WRITES_SCHEMA = `
  CREATE TABLE applied_writes (
    id         TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX applied_writes_expiry ON applied_writes (expires_at);
`

/** Writes between two sweeps of the ids that ran out. */
const SWEEP_EVERY = 1000

export interface AppliedWrites {
  /** Whether a write under `id` is the first (then `id` is kept `keepMs`); inside the write's transaction. */
  first(id: string, keepMs: number, now?: number): boolean
}

export function appliedWrites(db: DatabaseSync): AppliedWrites {
  // An id that ran out is taken again as new (its row may not be swept yet).
  const claim = db.prepare(`INSERT INTO applied_writes (id, expires_at) VALUES (?1, ?2)
    ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at WHERE applied_writes.expires_at <= ?3`)
  const sweep = db.prepare('DELETE FROM applied_writes WHERE expires_at <= ?')
  let writes = 0
  return {
    first(id, keepMs, now = Date.now()) {
      if (++writes % SWEEP_EVERY === 0) sweep.run(now)
      return Number(claim.run(id, now + Math.max(1, Math.round(keepMs)), now).changes) > 0
    },
  }
}

// The file quota of a single instance: rows of `<dataDir>/file-quota.db` (node:sqlite), one
// per file a key uploaded and one per upload in flight (a hold, with its end). A key's
// usage is summed on a covering index inside the transaction that adds a hold.
import { closeSqlite, openSqlite, transaction } from '../store/sqlite.ts'
import type { FileQuotaStore, FileUsage } from './quota-port.ts'

export const FILE_QUOTA_DATABASE_FILE = 'file-quota.db'

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE stored_files (
    id         TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    hold_until INTEGER
  ) STRICT;
  CREATE INDEX stored_files_key ON stored_files (key_id, hold_until, bytes);
  `,
]

const holdId = (hold: string): string => `hold:${hold}`

export function openEmbeddedFileQuotaStore(dataDir: string, now: () => number = Date.now): FileQuotaStore {
  const db = openSqlite(dataDir, FILE_QUOTA_DATABASE_FILE, MIGRATIONS)
  const sql = {
    usage: db.prepare(
      'SELECT COUNT(*) AS files, TOTAL(bytes) AS bytes FROM stored_files WHERE key_id = ? AND (hold_until IS NULL OR hold_until > ?)',
    ),
    lapse: db.prepare('DELETE FROM stored_files WHERE key_id = ? AND hold_until IS NOT NULL AND hold_until <= ?'),
    insert: db.prepare(
      'INSERT INTO stored_files (id, key_id, bytes, hold_until) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
    ),
    drop: db.prepare('DELETE FROM stored_files WHERE id = ? AND key_id = ?'),
    release: db.prepare('DELETE FROM stored_files WHERE id = ? AND hold_until IS NULL'),
  }
  const usage = (keyId: string, at: number): FileUsage => {
    const row = sql.usage.get(keyId, at)
    return { files: Number(row?.files ?? 0), bytes: Number(row?.bytes ?? 0) }
  }
  return {
    async hold(keyId, hold, bytes, caps, holdMs) {
      return transaction(db, () => {
        const at = now()
        sql.lapse.run(keyId, at)
        const used = usage(keyId, at)
        if (used.files + 1 > caps.files || used.bytes + bytes > caps.bytes) return { held: false, usage: used }
        sql.insert.run(holdId(hold), keyId, bytes, at + holdMs)
        return { held: true }
      })
    },
    async commit(keyId, hold, fileId, bytes) {
      transaction(db, () => {
        sql.drop.run(holdId(hold), keyId)
        // A file id is recorded once (a replayed reply does not count it twice).
        sql.insert.run(fileId, keyId, bytes, null)
      })
    },
    async cancel(keyId, hold) {
      sql.drop.run(holdId(hold), keyId)
    },
    async release(fileId) {
      sql.release.run(fileId)
    },
    async usage(keyId) {
      return usage(keyId, now())
    },
    async close() {
      closeSqlite(db)
    },
  }
}

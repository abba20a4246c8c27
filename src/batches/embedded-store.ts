// Batches of a single instance: rows of `<dataDir>/batches.db` (node:sqlite). A batch's
// record is one JSON column beside the columns the store queries (owner, key, whether it
// is finished, a client's cancel, the lease); each line is a row of its own.
import { closeSqlite, openSqlite, pingSqlite, transaction, type SqlRow } from '../store/sqlite.ts'
import { isFinalBatch, type BatchLine, type BatchRecord, type BatchStore } from './port.ts'

export const BATCHES_DATABASE_FILE = 'batches.db'

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE batches (
    id          TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,
    owner       TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    active      INTEGER NOT NULL,
    record      TEXT NOT NULL,
    cancel_at   INTEGER,
    lease_by    TEXT,
    lease_until INTEGER
  ) STRICT;
  CREATE INDEX batches_owner ON batches (owner, seq);
  CREATE INDEX batches_active ON batches (active, key_id);
  CREATE TABLE batch_lines (
    batch_id TEXT NOT NULL,
    idx      INTEGER NOT NULL,
    line     TEXT NOT NULL,
    PRIMARY KEY (batch_id, idx)
  ) STRICT;
  `,
]

function recordOf(row: SqlRow | undefined): BatchRecord | null {
  if (row === undefined) return null
  const record = JSON.parse(String(row.record)) as BatchRecord
  return { ...record, cancelAt: row.cancel_at === null ? null : Number(row.cancel_at) }
}

export function openEmbeddedBatchStore(dataDir: string): BatchStore {
  const db = openSqlite(dataDir, BATCHES_DATABASE_FILE, MIGRATIONS)
  const sql = {
    activeOfKey: db.prepare('SELECT COUNT(*) AS n FROM batches WHERE active = 1 AND key_id = ?'),
    nextSeq: db.prepare('SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM batches'),
    insert: db.prepare(
      'INSERT INTO batches (id, seq, owner, key_id, active, record, cancel_at) VALUES (?, ?, ?, ?, 1, ?, NULL)',
    ),
    get: db.prepare('SELECT record, cancel_at FROM batches WHERE id = ?'),
    seqOf: db.prepare('SELECT seq FROM batches WHERE id = ? AND owner = ?'),
    page: db.prepare('SELECT record, cancel_at FROM batches WHERE owner = ? AND seq < ? ORDER BY seq DESC LIMIT ?'),
    write: db.prepare('UPDATE batches SET record = ?, active = ? WHERE id = ?'),
    cancel: db.prepare('UPDATE batches SET cancel_at = COALESCE(cancel_at, ?) WHERE id = ?'),
    active: db.prepare('SELECT id FROM batches WHERE active = 1 ORDER BY seq'),
    lease: db.prepare(
      'UPDATE batches SET lease_by = ?, lease_until = ? WHERE id = ? AND (lease_by IS NULL OR lease_by = ? OR lease_until <= ?)',
    ),
    unlease: db.prepare('UPDATE batches SET lease_by = NULL, lease_until = NULL WHERE id = ? AND lease_by = ?'),
    holder: db.prepare('SELECT 1 AS held FROM batches WHERE id = ? AND lease_by = ? AND lease_until > ?'),
    putLine: db.prepare('INSERT OR REPLACE INTO batch_lines (batch_id, idx, line) VALUES (?, ?, ?)'),
    lines: db.prepare('SELECT line FROM batch_lines WHERE batch_id = ? ORDER BY idx'),
    line: db.prepare('SELECT line FROM batch_lines WHERE batch_id = ? AND idx = ?'),
  }
  const stored = (record: BatchRecord): string => JSON.stringify({ ...record, cancelAt: null })
  return {
    kind: 'embedded',
    async create(record, maxActive) {
      return transaction(db, () => {
        if (Number(sql.activeOfKey.get(record.keyId)?.n ?? 0) >= maxActive) return false
        const seq = Number(sql.nextSeq.get()?.seq ?? 1)
        sql.insert.run(record.id, seq, record.owner, record.keyId, stored(record))
        return true
      })
    },
    async get(id) {
      return recordOf(sql.get.get(id))
    },
    async list(owner, { after, limit }) {
      let before = Number.MAX_SAFE_INTEGER
      if (after !== undefined) {
        const row = sql.seqOf.get(after, owner)
        if (row === undefined) return { data: [], hasMore: false }
        before = Number(row.seq)
      }
      const rows = sql.page.all(owner, before, limit + 1)
      const data = rows.slice(0, limit).map((row) => recordOf(row) as BatchRecord)
      return { data, hasMore: rows.length > limit }
    },
    async update(id, patch, holder) {
      return transaction(db, () => {
        const current = recordOf(sql.get.get(id))
        if (current === null) return null
        if (holder !== undefined && sql.holder.get(id, holder, Date.now()) === undefined) return null
        const next: BatchRecord = { ...current, ...patch }
        sql.write.run(stored(next), isFinalBatch(next.status) ? 0 : 1, id)
        return next
      })
    },
    async cancel(id, now) {
      sql.cancel.run(now, id)
      return recordOf(sql.get.get(id))
    },
    async active() {
      return sql.active.all().map((row) => String(row.id))
    },
    async lease(id, instance, ttlMs) {
      const now = Date.now()
      return Number(sql.lease.run(instance, now + ttlMs, id, instance, now).changes) > 0
    },
    async unlease(id, instance) {
      sql.unlease.run(id, instance)
    },
    async putLines(id, lines) {
      transaction(db, () => {
        for (const line of lines) sql.putLine.run(id, line.index, JSON.stringify(line))
      })
    },
    async lines(id) {
      return sql.lines.all(id).map((row) => JSON.parse(String(row.line)) as BatchLine)
    },
    async setLine(id, index, patch) {
      transaction(db, () => {
        const row = sql.line.get(id, index)
        if (row === undefined) return
        sql.putLine.run(id, index, JSON.stringify({ ...(JSON.parse(String(row.line)) as BatchLine), ...patch }))
      })
    },
    async ping() {
      return pingSqlite(db)
    },
    async close() {
      closeSqlite(db)
    },
  }
}

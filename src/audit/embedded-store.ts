// The audit log of a single instance: rows of `<dataDir>/audit.db` (node:sqlite), a file of
// its own so no other store's migrations are touched. The row's rowid is the order and the
// id (`aud_<rowid>`); AUTOINCREMENT never hands a pruned rowid out again, so an id is never
// reused. Filters run in SQL on indexed columns; the record itself is one JSON column.
import { closeSqlite, openSqlite, type SqlRow } from '../store/sqlite.ts'
import { AuditCursorError, type AuditStore } from './port.ts'
import type { AuditEntry, AuditQuery, NewAuditEntry } from './record.ts'

export const AUDIT_DATABASE_FILE = 'audit.db'

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    actor_id    TEXT NOT NULL,
    actor_name  TEXT,
    action      TEXT NOT NULL,
    object_type TEXT NOT NULL,
    object_id   TEXT NOT NULL,
    entry       TEXT NOT NULL
  ) STRICT;
  CREATE INDEX audit_at ON audit (at);
  CREATE INDEX audit_actor ON audit (actor_id, seq);
  CREATE INDEX audit_object ON audit (object_type, object_id, seq);
  `,
]

const ID = /^aud_(\d{1,18})$/

function entryOf(row: SqlRow): AuditEntry {
  const stored = JSON.parse(String(row.entry)) as NewAuditEntry
  return { id: `aud_${Number(row.seq)}`, ...stored }
}

export function openEmbeddedAuditStore(dataDir: string): AuditStore {
  const db = openSqlite(dataDir, AUDIT_DATABASE_FILE, MIGRATIONS)
  const insert = db.prepare(
    'INSERT INTO audit (at, actor_id, actor_name, action, object_type, object_id, entry) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq',
  )
  const prune = db.prepare('DELETE FROM audit WHERE at < ?')
  return {
    kind: 'embedded',

    async append(entry) {
      const row = insert.get(
        entry.at,
        entry.actor.id,
        entry.actor.type === 'user' ? entry.actor.name : null,
        entry.action,
        entry.objectType,
        entry.objectId,
        JSON.stringify(entry),
      )
      return { id: `aud_${Number(row?.seq)}`, ...entry }
    },

    async query(q: AuditQuery) {
      const where: string[] = []
      const args: Array<string | number> = []
      if (q.after !== undefined) {
        const seq = ID.exec(q.after)?.[1]
        if (seq === undefined) throw new AuditCursorError(`not an audit id of this store`)
        where.push('seq < ?')
        args.push(Number(seq))
      }
      if (q.actor !== undefined) {
        where.push('(actor_id = ? OR actor_name = ?)')
        args.push(q.actor, q.actor)
      }
      const filters: Array<[string, string | number | undefined]> = [
        ['action = ?', q.action],
        ['object_type = ?', q.objectType],
        ['object_id = ?', q.objectId],
        ['at >= ?', q.since],
        ['at < ?', q.until],
      ]
      for (const [clause, value] of filters) {
        if (value === undefined) continue
        where.push(clause)
        args.push(value)
      }
      // One past the page says whether there is more.
      const sql = `SELECT seq, entry FROM audit ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`
      const rows = db.prepare(sql).all(...args, q.limit + 1)
      return { data: rows.slice(0, q.limit).map(entryOf), hasMore: rows.length > q.limit }
    },

    async prune(before) {
      return Number(prune.run(before).changes)
    },

    async close() {
      closeSqlite(db)
    },
  }
}

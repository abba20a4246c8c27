// The key portal's browser sessions, as a port with an embedded (its own SQLite file in the
// data directory) and a Redis adapter. A session is stored under the SHA-256 of its cookie
// value, so whoever reads the store cannot sign in with what it finds there. Each record
// carries its own end (the sooner of the idle and the absolute expiry); the store drops it
// then (Redis: PXAT; SQLite: pruned as new sessions come). Beside the sessions it keeps
// hand-offs: a value one request leaves for the next one of the same session (the secret a
// form made, for the page its redirect opens), taken once and gone after its end.
//
// On Redis both live on their user's slot (`<prefix>{o:<user id>}:portal:…`): their ids name
// the user (store/user-ids.ts). Those of ids that name none, made before #25, are read under
// `{tg}` as before: sessions end within portal.sessionAbsoluteSeconds and hand-offs within
// minutes, so that is all the migration they need.
import type { DatabaseSync } from 'node:sqlite'
import type { RedisConnection } from './redis-client.ts'
import { redisNamespace, userNamespace, withRedis } from './redis-kit.ts'
import { userOfId } from './user-ids.ts'
import { closeSqlite, openSqlite } from './sqlite.ts'

export interface PortalSessionRecord {
  /** SHA-256 (hex) of the cookie value. */
  readonly id: string
  readonly userId: string
  readonly username: string
  /** The synchronizer token every state-changing form of this session carries. */
  readonly csrfToken: string
  readonly createdAt: string
  readonly lastSeenAt: string
  /** Absolute end: createdAt + portal.sessionAbsoluteSeconds. */
  readonly expiresAt: string
}

export interface PortalSessionStore {
  /** Stores (or overwrites) the session; the store may drop it after `until`. */
  put(session: PortalSessionRecord, until: Date): Promise<void>
  get(id: string): Promise<PortalSessionRecord | null>
  remove(id: string): Promise<void>
  /** Leaves a value under this id until `until` (overwriting one already there). */
  putOnce(id: string, value: string, until: Date): Promise<void>
  /** The value under this id, removed as it is read: a second take finds nothing. Null once past its end. */
  takeOnce(id: string): Promise<string | null>
  close(): Promise<void>
}

const PORTAL_DATABASE_FILE = 'portal.db'
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE portal_sessions (
    id    TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    until TEXT NOT NULL
  ) STRICT;
  CREATE INDEX portal_sessions_until ON portal_sessions (until);
  `,
  `
  CREATE TABLE portal_handoffs (
    id    TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    until TEXT NOT NULL
  ) STRICT;
  CREATE INDEX portal_handoffs_until ON portal_handoffs (until);
  `,
]

function decode(text: string): PortalSessionRecord {
  const value = JSON.parse(text) as Partial<PortalSessionRecord>
  for (const field of ['id', 'userId', 'username', 'csrfToken', 'createdAt', 'lastSeenAt', 'expiresAt'] as const) {
    if (typeof value[field] !== 'string') throw new TypeError(`portal session: ${field} is not a string`)
  }
  return value as PortalSessionRecord
}

/** `<dataDir>/portal.db` (or memory for ':memory:'). */
export function embeddedPortalSessions(dataDir: string): PortalSessionStore {
  const db: DatabaseSync = openSqlite(dataDir, PORTAL_DATABASE_FILE, MIGRATIONS)
  const sql = {
    put: db.prepare(
      'INSERT INTO portal_sessions (id, record, until) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record, until = excluded.until',
    ),
    get: db.prepare('SELECT record, until FROM portal_sessions WHERE id = ?'),
    remove: db.prepare('DELETE FROM portal_sessions WHERE id = ?'),
    prune: db.prepare('DELETE FROM portal_sessions WHERE until < ?'),
    putOnce: db.prepare(
      'INSERT INTO portal_handoffs (id, value, until) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET value = excluded.value, until = excluded.until',
    ),
    // One statement: two takes of the same id cannot both find it.
    takeOnce: db.prepare('DELETE FROM portal_handoffs WHERE id = ? RETURNING value, until'),
    pruneOnce: db.prepare('DELETE FROM portal_handoffs WHERE until < ?'),
  }
  return {
    async put(session, until) {
      sql.prune.run(new Date().toISOString())
      sql.put.run(session.id, JSON.stringify(session), until.toISOString())
    },
    async get(id) {
      const row = sql.get.get(id)
      if (row === undefined || typeof row.record !== 'string' || typeof row.until !== 'string') return null
      if (Date.parse(row.until) <= Date.now()) return null
      return decode(row.record)
    },
    async remove(id) {
      sql.remove.run(id)
    },
    async putOnce(id, value, until) {
      sql.pruneOnce.run(new Date().toISOString())
      sql.putOnce.run(id, value, until.toISOString())
    },
    async takeOnce(id) {
      const row = sql.takeOnce.get(id)
      if (row === undefined || typeof row.value !== 'string' || typeof row.until !== 'string') return null
      return Date.parse(row.until) <= Date.now() ? null : row.value
    },
    async close() {
      closeSqlite(db)
    },
  }
}

/**
 * Under `<prefix>{o:<user id>}:portal:session:<id>` (hand-offs: `…:portal:handoff:<id>`), or
 * `{tg}` for an id that names no user; the client is the caller's to close.
 */
export function redisPortalSessions(redis: RedisConnection, prefix: string): PortalSessionStore {
  const base = (id: string): string => {
    const user = userOfId(id)
    return `${user === null ? redisNamespace(prefix) : userNamespace(prefix, user)}portal:`
  }
  const key = (id: string): string => `${base(id)}session:${id}`
  const handoff = (id: string): string => `${base(id)}handoff:${id}`
  return {
    put: (session, until) =>
      withRedis(redis, async () => {
        await redis.set(key(session.id), JSON.stringify(session), 'PXAT', Math.max(until.getTime(), Date.now() + 1))
      }),
    get: (id) =>
      withRedis(redis, async () => {
        const text = await redis.get(key(id))
        return text === null ? null : decode(text)
      }),
    remove: (id) =>
      withRedis(redis, async () => {
        await redis.del(key(id))
      }),
    putOnce: (id, value, until) =>
      withRedis(redis, async () => {
        await redis.set(handoff(id), value, 'PXAT', Math.max(until.getTime(), Date.now() + 1))
      }),
    // GETDEL (Redis 6.2): read and removed in one command, so two instances cannot both take it.
    takeOnce: (id) => withRedis(redis, () => redis.getdel(handoff(id))),
    async close() {},
  }
}

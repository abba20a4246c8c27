// The webhook store of a single instance: `<dataDir>/webhooks.db` (node:sqlite), a file of
// its own. An event and its deliveries are one transaction; an attempt and the delivery's
// new state are another.
import type { DatabaseSync } from 'node:sqlite'
import type { EventType, GatewayEvent } from '../events/types.ts'
import { closeSqlite, openSqlite, pingSqlite, transaction, type SqlRow } from '../store/sqlite.ts'
import type { Delivery, DeliveryStatus, WebhookEndpoint, WebhookStore } from './port.ts'

export const WEBHOOKS_DATABASE_FILE = 'webhooks.db'

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE endpoints (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    url         TEXT NOT NULL,
    description TEXT,
    event_types TEXT,
    enabled     INTEGER NOT NULL,
    secret      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
  ) STRICT;
  CREATE TABLE events (
    id         TEXT PRIMARY KEY,
    type       TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    data       TEXT NOT NULL,
    dedupe_key TEXT UNIQUE,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX events_created ON events (created_at);
  CREATE TABLE deliveries (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    endpoint_id TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    next_at     INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    last_status INTEGER,
    last_error  TEXT,
    replay_of   TEXT
  ) STRICT;
  CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, seq);
  CREATE INDEX deliveries_due ON deliveries (status, next_at);
  CREATE INDEX deliveries_event ON deliveries (event_id);
  CREATE TABLE attempts (
    delivery_id TEXT NOT NULL,
    at          INTEGER NOT NULL,
    status      INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX attempts_delivery ON attempts (delivery_id, at);
  `,
]

const str = (v: unknown): string => (typeof v === 'string' ? v : String(v))
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : str(v))
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))

function endpointOf(row: SqlRow): WebhookEndpoint {
  const types = strOrNull(row.event_types)
  return {
    id: str(row.id),
    url: str(row.url),
    description: strOrNull(row.description),
    eventTypes: types === null ? null : (JSON.parse(types) as EventType[]),
    enabled: Number(row.enabled) === 1,
    secret: str(row.secret),
    createdAt: str(row.created_at),
    updatedAt: str(row.updated_at),
  }
}

function deliveryOf(row: SqlRow): Delivery {
  return {
    id: str(row.id),
    endpointId: str(row.endpoint_id),
    eventId: str(row.event_id),
    eventType: str(row.event_type) as EventType,
    status: str(row.status) as DeliveryStatus,
    attempts: Number(row.attempts),
    nextAttemptAt: numOrNull(row.next_at),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    lastStatus: numOrNull(row.last_status),
    lastError: strOrNull(row.last_error),
    replayOf: strOrNull(row.replay_of),
  }
}

export function openEmbeddedWebhookStore(dataDir: string): WebhookStore {
  const db: DatabaseSync = openSqlite(dataDir, WEBHOOKS_DATABASE_FILE, MIGRATIONS)
  const sql = {
    insertEndpoint: db.prepare(
      'INSERT INTO endpoints (id, url, description, event_types, enabled, secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    listEndpoints: db.prepare('SELECT * FROM endpoints ORDER BY seq'),
    getEndpoint: db.prepare('SELECT * FROM endpoints WHERE id = ?'),
    updateEndpoint: db.prepare(
      'UPDATE endpoints SET url = ?, description = ?, event_types = ?, enabled = ?, secret = ?, updated_at = ? WHERE id = ?',
    ),
    deleteEndpoint: db.prepare('DELETE FROM endpoints WHERE id = ?'),
    deleteEndpointAttempts: db.prepare(
      'DELETE FROM attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE endpoint_id = ?)',
    ),
    deleteEndpointDeliveries: db.prepare('DELETE FROM deliveries WHERE endpoint_id = ?'),
    insertEvent: db.prepare(
      'INSERT INTO events (id, type, timestamp, data, dedupe_key, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
    ),
    getEvent: db.prepare('SELECT * FROM events WHERE id = ?'),
    insertDelivery: db.prepare(
      "INSERT INTO deliveries (id, endpoint_id, event_id, event_type, status, attempts, next_at, created_at, updated_at, replay_of) VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)",
    ),
    getDelivery: db.prepare('SELECT * FROM deliveries WHERE id = ?'),
    recordAttempt: db.prepare(
      "UPDATE deliveries SET status = ?, attempts = attempts + 1, next_at = ?, updated_at = ?, last_status = COALESCE(?, last_status), last_error = ? WHERE id = ? AND status = 'pending'",
    ),
    insertAttempt: db.prepare(
      'INSERT INTO attempts (delivery_id, at, status, error, duration_ms) VALUES (?, ?, ?, ?, ?)',
    ),
    attempts: db.prepare('SELECT * FROM attempts WHERE delivery_id = ? ORDER BY at, rowid'),
    seqOf: db.prepare('SELECT seq FROM deliveries WHERE id = ? AND endpoint_id = ?'),
    page: db.prepare('SELECT * FROM deliveries WHERE endpoint_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?'),
    due: db.prepare(
      "SELECT id, created_at, next_at FROM deliveries WHERE status = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?",
    ),
    pruneAttempts: db.prepare(
      "DELETE FROM attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE status != 'pending' AND updated_at < ?)",
    ),
    pruneDeliveries: db.prepare("DELETE FROM deliveries WHERE status != 'pending' AND updated_at < ?"),
    pruneEvents: db.prepare(
      'DELETE FROM events WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id)',
    ),
  }
  const types = (e: WebhookEndpoint): string | null => (e.eventTypes === null ? null : JSON.stringify(e.eventTypes))

  return {
    kind: 'embedded',

    async createEndpoint(e) {
      sql.insertEndpoint.run(
        e.id,
        e.url,
        e.description,
        types(e),
        e.enabled ? 1 : 0,
        e.secret,
        e.createdAt,
        e.updatedAt,
      )
    },
    async listEndpoints() {
      return sql.listEndpoints.all().map(endpointOf)
    },
    async getEndpoint(id) {
      const row = sql.getEndpoint.get(id)
      return row === undefined ? null : endpointOf(row)
    },
    async updateEndpoint(e) {
      const { changes } = sql.updateEndpoint.run(
        e.url,
        e.description,
        types(e),
        e.enabled ? 1 : 0,
        e.secret,
        e.updatedAt,
        e.id,
      )
      return Number(changes) > 0
    },
    async deleteEndpoint(id) {
      return transaction(db, () => {
        sql.deleteEndpointAttempts.run(id)
        sql.deleteEndpointDeliveries.run(id)
        return Number(sql.deleteEndpoint.run(id).changes) > 0
      })
    },

    async append(event, deliveries, dedupeKey, now) {
      return transaction(db, () => {
        const { changes } = sql.insertEvent.run(
          event.id,
          event.type,
          event.timestamp,
          JSON.stringify(event.data),
          dedupeKey,
          now,
        )
        if (Number(changes) === 0) return false
        for (const d of deliveries)
          sql.insertDelivery.run(d.id, d.endpointId, event.id, event.type, now, now, now, null)
        return true
      })
    },
    async getEvent(id) {
      const row = sql.getEvent.get(id)
      if (row === undefined) return null
      return {
        id: str(row.id),
        type: str(row.type) as EventType,
        timestamp: str(row.timestamp),
        data: JSON.parse(str(row.data)) as GatewayEvent['data'],
      }
    },
    async getDelivery(id) {
      const row = sql.getDelivery.get(id)
      return row === undefined ? null : deliveryOf(row)
    },
    async addDelivery(eventId, d, now) {
      return transaction(db, () => {
        const event = sql.getEvent.get(eventId)
        if (event === undefined || sql.getEndpoint.get(d.endpointId) === undefined) return null
        sql.insertDelivery.run(d.id, d.endpointId, eventId, str(event.type), now, now, now, d.replayOf)
        const row = sql.getDelivery.get(d.id)
        return row === undefined ? null : deliveryOf(row)
      })
    },
    async recordAttempt(id, attempt, outcome) {
      return transaction(db, () => {
        const status: DeliveryStatus = outcome.kind === 'retry' ? 'pending' : outcome.kind
        const { changes } = sql.recordAttempt.run(
          status,
          outcome.kind === 'retry' ? outcome.at : null,
          attempt.at,
          attempt.status,
          attempt.error,
          id,
        )
        if (Number(changes) === 0) return false
        sql.insertAttempt.run(id, attempt.at, attempt.status, attempt.error, Math.round(attempt.durationMs))
        return true
      })
    },
    async attempts(id) {
      return sql.attempts.all(id).map((row) => ({
        at: Number(row.at),
        status: numOrNull(row.status),
        error: strOrNull(row.error),
        durationMs: Number(row.duration_ms),
      }))
    },
    async listDeliveries(endpointId, page) {
      let below = Number.MAX_SAFE_INTEGER
      if (page.after !== undefined) {
        const row = sql.seqOf.get(page.after, endpointId)
        if (row === undefined) return { data: [], hasMore: false }
        below = Number(row.seq)
      }
      const rows = sql.page.all(endpointId, below, page.limit + 1).map(deliveryOf)
      return { data: rows.slice(0, page.limit), hasMore: rows.length > page.limit }
    },
    async due(until, limit) {
      return sql.due.all(until, limit).map((row) => ({
        id: str(row.id),
        createdAt: Number(row.created_at),
        nextAttemptAt: numOrNull(row.next_at),
      }))
    },
    async prune(before) {
      return transaction(db, () => {
        sql.pruneAttempts.run(before)
        const deliveries = Number(sql.pruneDeliveries.run(before).changes)
        return deliveries + Number(sql.pruneEvents.run(before).changes)
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

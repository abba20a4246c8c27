// The queue store of a single instance. Stored requests (and their multipart bytes, and
// their results) are rows of `<dataDir>/queue.db` (node:sqlite), so accepted requests
// survive a restart; the lines are held in memory and rebuilt from those rows at start
// (drop-in calls do not outlive their connections, so there is nothing of theirs to
// keep), and so are the leases and heartbeats (a lease is the running process's own, and
// what it ran is run again after a restart). Every change runs synchronously, so a record
// and its line never disagree. A request's body (payload, and multipart bytes) is a column
// of its own that lists never select, dropped once the request finishes; a key's pending
// requests are counted (with their sizes) on a covering index, in the submit's transaction.
import type { DatabaseSync } from 'node:sqlite'
import { closeSqlite, openSqlite, pingSqlite, transaction, type SqlRow as Row } from '../store/sqlite.ts'
import { decodeRecord, decodeSummary, encodeMeta, encodePayload, encodeResult, storedSize } from './record-codec.ts'
import {
  QueueFullError,
  RequestTakenError,
  type FinalStatus,
  type LineSummary,
  type QueuedRequest,
  type QueueStore,
  type RequestRef,
  type RequestSummary,
  type StoreRetention,
  type Ticket,
} from './ports.ts'
import { encodeTicket, jobTicket, parseLine } from './tickets.ts'
import { newRequestId } from './shards.ts'
import { storedBand } from '../priority/classes.ts'

export const QUEUE_DATABASE_FILE = 'queue.db'

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE requests (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    line        TEXT NOT NULL,
    line_seq    REAL NOT NULL,
    meta        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER,
    finished_at INTEGER,
    cancel      INTEGER NOT NULL DEFAULT 0,
    result      TEXT,
    body        BLOB
  ) STRICT;
  CREATE INDEX requests_owner ON requests (owner, created_at);
  CREATE INDEX requests_status ON requests (status, line_seq);
  CREATE INDEX requests_finished ON requests (finished_at);
  `,
  // The body apart from meta (lists do not read it), and a key's pending requests counted
  // with their sizes on one covering index. Rows written before keep their body in meta.
  `
  ALTER TABLE requests ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
  ALTER TABLE requests ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE requests ADD COLUMN payload TEXT;
  UPDATE requests SET key_id = COALESCE(json_extract(meta, '$.keyId'), ''),
    size = length(CAST(meta AS BLOB)) + COALESCE(length(body), 0);
  CREATE INDEX requests_pending ON requests (key_id, status, size);
  `,
  // Ids kept past their records (QueueStore.submit keepIdUntil): a batch's line is taken once.
  `
  CREATE TABLE kept_ids (
    id    TEXT PRIMARY KEY,
    until INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX kept_ids_until ON kept_ids (until);
  `,
]

/** Columns of a summary: everything but the body. */
const SUMMARY = 'id, owner, created_at, meta, status, attempts, started_at, finished_at, cancel, result'

/**
 * The status a client sees (ports.ts, statusAt) in SQL; ?ttl and ?now are bound. The
 * contract tests hold it to statusAt.
 */
const SEEN_STATUS = `CASE
  WHEN status NOT IN ('queued', 'in_progress') THEN CASE WHEN finished_at IS NOT NULL AND finished_at + :ttl <= :now THEN 'expired' ELSE status END
  WHEN status = 'queued' AND created_at + :ttl <= :now THEN 'expired'
  ELSE status END`

interface Place {
  readonly score: number
  readonly member: string
  readonly ticket: Ticket
}

const PURGE_EVERY_MS = 60_000

export interface EmbeddedQueueStoreOptions extends StoreRetention {
  /** Directory of queue.db; ':memory:' keeps it in memory (tests). */
  readonly dataDir: string
  readonly now?: () => number
}

export function openEmbeddedQueueStore(options: EmbeddedQueueStoreOptions): QueueStore {
  const db: DatabaseSync = openSqlite(options.dataDir, QUEUE_DATABASE_FILE, MIGRATIONS)
  const now = options.now ?? Date.now
  const ttl = options.resultTtlMs
  const sql = {
    insert:
      db.prepare(`INSERT INTO requests (id, owner, created_at, line, line_seq, meta, status, body, key_id, size, payload)
      VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)`),
    pending: db.prepare(
      `SELECT COUNT(*) AS requests, TOTAL(size) AS bytes FROM requests WHERE key_id = ? AND status IN ('queued', 'in_progress')`,
    ),
    get: db.prepare('SELECT * FROM requests WHERE id = ?'),
    taken: db.prepare(
      'SELECT 1 AS taken WHERE EXISTS (SELECT 1 FROM requests WHERE id = ?1) OR EXISTS (SELECT 1 FROM kept_ids WHERE id = ?1 AND until > ?2)',
    ),
    keep: db.prepare('INSERT OR REPLACE INTO kept_ids (id, until) VALUES (?, ?)'),
    dropKept: db.prepare('DELETE FROM kept_ids WHERE until <= ?'),
    cursor: db.prepare('SELECT owner, created_at FROM requests WHERE id = ?'),
    body: db.prepare(`SELECT body FROM requests WHERE id = ? AND status IN ('queued', 'in_progress')`),
    page: db.prepare(`SELECT ${SUMMARY} FROM requests WHERE owner = :owner AND (created_at < :at OR (created_at = :at AND id < :id))
      AND (:status IS NULL OR ${SEEN_STATUS} = :status) ORDER BY created_at DESC, id DESC LIMIT :limit`),
    start:
      db.prepare(`UPDATE requests SET status = 'in_progress', started_at = COALESCE(started_at, ?), attempts = attempts + 1
      WHERE id = ? AND status IN ('queued', 'in_progress') AND cancel = 0`),
    requeue: db.prepare(`UPDATE requests SET status = 'queued', line_seq = ? WHERE id = ? AND status = 'in_progress'`),
    finish: db.prepare(
      `UPDATE requests SET status = ?, finished_at = ?, result = ?, body = NULL, payload = NULL WHERE id = ? AND status IN ('queued', 'in_progress')`,
    ),
    status: db.prepare('SELECT status FROM requests WHERE id = ?'),
    requestCancel: db.prepare(`UPDATE requests SET cancel = 1 WHERE id = ?`),
    waiting: db.prepare(
      `SELECT id, created_at, line, line_seq, status, cancel FROM requests WHERE status IN ('queued', 'in_progress') ORDER BY line_seq`,
    ),
    dropResults: db.prepare(
      'UPDATE requests SET result = NULL WHERE finished_at IS NOT NULL AND finished_at < ? AND result IS NOT NULL',
    ),
    dropRecords: db.prepare('DELETE FROM requests WHERE finished_at IS NOT NULL AND finished_at < ?'),
  }

  const lines = new Map<string, Place[]>()
  let seq = 0
  /** Leased requests: id → the runner and the request's reference. */
  const leased = new Map<string, { readonly runner: string; readonly request: RequestRef }>()
  /** Heartbeats: instance → until when it is alive. */
  const alive = new Map<string, number>()

  const lineOfPlaces = (line: string): Place[] => {
    let places = lines.get(line)
    if (places === undefined) lines.set(line, (places = []))
    return places
  }

  /** Puts a ticket in line; returns its score and how many are ahead. */
  function place(
    line: string,
    ticket: Ticket,
    where: 'back' | 'front',
    score?: number,
  ): { score: number; ahead: number } {
    const places = lineOfPlaces(line)
    const member = encodeTicket(ticket)
    const at = places.findIndex((p) => p.member === member)
    if (at !== -1) {
      if (where === 'back') return { score: places[at]?.score ?? 0, ahead: at }
      places.splice(at, 1)
    }
    if (where === 'front') {
      const placed = { score: score ?? (places[0]?.score ?? ++seq) - 1, member, ticket }
      places.unshift(placed)
      return { score: placed.score, ahead: 0 }
    }
    const placed = { score: score ?? ++seq, member, ticket }
    // Rebuilding from rows may insert out of order; normal joins append.
    let i = places.length
    while (i > 0 && (places[i - 1]?.score ?? 0) > placed.score) i--
    places.splice(i, 0, placed)
    return { score: placed.score, ahead: i }
  }

  function leave(line: string, ticket: Ticket): Ticket | null {
    const places = lines.get(line)
    if (places === undefined) return null
    const member = encodeTicket(ticket)
    const at = places.findIndex((p) => p.member === member)
    if (at === -1) return null
    places.splice(at, 1)
    if (places.length === 0) {
      lines.delete(line)
      return null
    }
    return at === 0 ? (places[0]?.ticket ?? null) : null
  }

  const fieldsOf = (row: Row) => ({
    meta: row.meta as string,
    status: row.status as string,
    attempts: row.attempts as number,
    startedAt: row.started_at as number | null,
    finishedAt: row.finished_at as number | null,
    cancel: row.cancel as number,
    runner: leased.get(String(row.id))?.runner ?? null,
  })
  const resultOf = (row: Row): string | null =>
    ((row.finished_at as number | null) ?? Infinity) + ttl < now() ? null : (row.result as string | null)

  const record = (row: Row | undefined): QueuedRequest | null => {
    if (row === undefined) return null
    return decodeRecord(String(row.id), { ...fieldsOf(row), payload: row.payload as string | null }, resultOf(row))
  }

  const summary = (row: Row): RequestSummary | null => decodeSummary(String(row.id), fieldsOf(row), resultOf(row))

  // Rebuild the lines. A request that was running when the process stopped runs again,
  // first in its line: it had its turn already.
  transaction(db, () => {
    for (const row of sql.waiting.all()) {
      const ticket = jobTicket({ id: String(row.id), createdAt: Number(row.created_at) })
      const line = String(row.line)
      if (row.status === 'in_progress') {
        if (row.cancel === 1) {
          sql.finish.run('cancelled', now(), null, String(row.id))
          continue
        }
        const { score } = place(line, ticket, 'front')
        sql.requeue.run(score, String(row.id))
      } else {
        place(line, ticket, 'back', Number(row.line_seq))
      }
      seq = Math.max(seq, Number(row.line_seq))
    }
  })

  function purge(): void {
    const at = now()
    sql.dropResults.run(at - ttl)
    sql.dropRecords.run(at - 2 * ttl)
    sql.dropKept.run(at)
  }
  const purgeTimer = setInterval(purge, Math.min(PURGE_EVERY_MS, ttl))
  purgeTimer.unref()

  const ref = (request: RequestRef): { line: string; ticket: Ticket } => ({
    line: request.line,
    ticket: jobTicket(request),
  })

  return {
    kind: 'embedded',

    newId: () => newRequestId(null),

    async join(line, ticket, where = 'back', band = 0) {
      return place(line, ticket, where, band === 0 || where === 'front' ? undefined : ++seq + band).ahead
    },

    async leave(line, ticket) {
      return leave(line, ticket)
    },

    async head(line) {
      return lines.get(line)?.[0]?.ticket ?? null
    },

    async position(line, ticket) {
      const at = lines.get(line)?.findIndex((p) => p.member === encodeTicket(ticket)) ?? -1
      return at === -1 ? null : at
    },

    async lines() {
      return [...lines].map(([line, places]): LineSummary => ({
        line,
        ...parseLine(line),
        depth: places.length,
        head: places[0]?.ticket ?? null,
      }))
    },

    async sweep() {
      // One process: every call in line is this process's own, and every request's row is there.
      return [...lines].flatMap(([line, places]) => (places[0] ? [{ line, head: places[0].ticket }] : []))
    },

    async heartbeat(instance, ttlMs) {
      alive.set(instance, now() + ttlMs)
    },

    async isAlive(instance) {
      return (alive.get(instance) ?? 0) > now()
    },

    async submit(request, body, runner, caps, keepIdUntil) {
      const meta = encodeMeta(request)
      const payload = encodePayload(request)
      const size = storedSize(meta, payload, body)
      return transaction(db, () => {
        if (sql.taken.get(request.id, now()) !== undefined) throw new RequestTakenError(request.id)
        if (caps !== undefined) {
          const row = sql.pending.get(request.keyId)
          const pending = { requests: Number(row?.requests ?? 0), bytes: Number(row?.bytes ?? 0) }
          if (pending.requests + 1 > caps.requests || pending.bytes + size > caps.bytes)
            throw new QueueFullError(pending, size)
        }
        const ticket = jobTicket(request)
        const score = ++seq + storedBand(request.call)
        sql.insert.run(
          request.id,
          request.owner,
          request.createdAt,
          request.line,
          score,
          meta,
          body,
          request.keyId,
          size,
          payload,
        )
        if (keepIdUntil !== undefined) sql.keep.run(request.id, keepIdUntil)
        const { ahead } = place(request.line, ticket, 'back', score)
        if (ahead === 0 && runner !== undefined && runner !== '') {
          leased.set(request.id, {
            runner,
            request: { id: request.id, line: request.line, createdAt: request.createdAt },
          })
        }
        return ahead
      })
    },

    async pending(keyId) {
      const row = sql.pending.get(keyId)
      return { requests: Number(row?.requests ?? 0), bytes: Number(row?.bytes ?? 0) }
    },

    async get(id) {
      return record(sql.get.get(id))
    },

    async body(id) {
      const value = sql.body.get(id)?.body
      return value instanceof Uint8Array ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : null
    },

    async list(owner, page) {
      // Before everything: the newest possible row, and no id is above '~'.
      let cursor = { at: Number.MAX_SAFE_INTEGER, id: '~' }
      if (page.after !== undefined) {
        const after = sql.cursor.get(page.after)
        if (after === undefined || after.owner !== owner) return { data: [], hasMore: false }
        cursor = { at: Number(after.created_at), id: page.after }
      }
      // One row past the page says whether more match.
      const rows = sql.page.all({
        owner,
        at: cursor.at,
        id: cursor.id,
        status: page.status ?? null,
        ttl,
        now: now(),
        limit: page.limit + 1,
      })
      const data = rows
        .slice(0, page.limit)
        .map(summary)
        .filter((r): r is RequestSummary => r !== null)
      return { data, hasMore: rows.length > page.limit }
    },

    async start(request, at, runner = '') {
      return transaction(db, () => {
        if ((leased.get(request.id)?.runner ?? '') !== runner) return { started: false, next: null }
        if (Number(sql.start.run(at, request.id).changes) === 0) return { started: false, next: null }
        const { line, ticket } = ref(request)
        return { started: true, next: leave(line, ticket) }
      })
    },

    async release(request, runner) {
      if (leased.get(request.id)?.runner !== runner) return false
      leased.delete(request.id)
      return true
    },

    async leases() {
      const at = now()
      return [...leased.values()].map(({ runner, request }) => ({
        request,
        runner,
        alive: (alive.get(runner) ?? 0) > at,
      }))
    },

    async requeue(request) {
      return transaction(db, () => {
        const { line, ticket } = ref(request)
        const places = lines.get(line)
        const score = (places?.[0]?.score ?? ++seq) - 1
        if (Number(sql.requeue.run(score, request.id).changes) === 0) return false
        place(line, ticket, 'front', score)
        return true
      })
    },

    async finish(request, status: FinalStatus, result, at) {
      return transaction(db, () => {
        if (
          Number(sql.finish.run(status, at, result === null ? null : encodeResult(result), request.id).changes) === 0
        ) {
          return { finished: false, next: null }
        }
        leased.delete(request.id)
        const { line, ticket } = ref(request)
        return { finished: true, next: leave(line, ticket) }
      })
    },

    async cancel(request, at) {
      return transaction(db, () => {
        const row = sql.status.get(request.id)
        if (row === undefined) return { was: null, next: null }
        const was = String(row.status) as QueuedRequest['status']
        if (was === 'queued') {
          sql.finish.run('cancelled', at, null, request.id)
          leased.delete(request.id)
          const { line, ticket } = ref(request)
          return { was, next: leave(line, ticket) }
        }
        if (was === 'in_progress') sql.requestCancel.run(request.id)
        return { was, next: null }
      })
    },

    ping: async () => pingSqlite(db),

    async close() {
      clearInterval(purgeTimer)
      closeSqlite(db)
    },
  }
}

// The stores of a single instance, in one SQLite file (node:sqlite, no native add-on),
// opened and written through sqlite.ts (WAL, BEGIN IMMEDIATE transactions).
import type { SQLInputValue } from 'node:sqlite'
import type { KeyRecord } from '../keys/record.ts'
import {
  REMEMBERED_KINDS,
  ROW_COUNTERS,
  type KeyFilter,
  type KeyStore,
  type OwnershipStore,
  type RememberedKind,
  type ReplaceOutcome,
  type RowCounter,
  type Stores,
  type StreamEntry,
  type StreamJournal,
  type UsageQuery,
  type UsageRecord,
  type UsageStore,
  type UsageWrite,
} from './ports.ts'
import { StoreConflictError } from './errors.ts'
import {
  compareKeyRecords,
  decodeKeyRecord,
  encodeKeyRecord,
  hashesOf,
  matchesFilter,
  sameKeyRecord,
} from './key-records.ts'
import { embeddedAuthStores } from './embedded-auth.ts'
import { APPLIED_WRITES_SCHEMA, appliedWrites } from './applied-writes.ts'
import { closeSqlite, openSqlite, pingSqlite, transaction, turnCommit, type SqlRow as Row } from './sqlite.ts'
import {
  checkStreamCharge,
  checkUsageQuery,
  checkUsageRecords,
  compareUsageRows,
  countsOnce,
  dayOf,
  lessRecovered,
  onlyOf,
  RECOVERED_STREAM_TTL_MS,
  rowCounters,
  streamEntryValues,
} from './usage-rows.ts'

export const DATABASE_FILE = 'tollgate.db'
/** Remembered objects whose time ran out are deleted on every this many remember() calls. */
const FORGET_EVERY = 256

function isRemembered(kind: string): kind is RememberedKind {
  return (REMEMBERED_KINDS as readonly string[]).includes(kind)
}

/** Schema steps; PRAGMA user_version counts how many are applied. Append, never edit. */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE keys (
    id     TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    status TEXT NOT NULL,
    owner  TEXT,
    tier   TEXT
  ) STRICT;
  CREATE INDEX keys_owner ON keys (owner);
  CREATE TABLE key_hashes (
    hash TEXT PRIMARY KEY,
    id   TEXT NOT NULL REFERENCES keys (id) ON DELETE CASCADE
  ) STRICT;
  CREATE INDEX key_hashes_id ON key_hashes (id);
  CREATE TABLE ownership (
    seq   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind  TEXT NOT NULL,
    id    TEXT NOT NULL,
    owner TEXT NOT NULL,
    UNIQUE (kind, id)
  ) STRICT;
  CREATE INDEX ownership_owner ON ownership (kind, owner, seq);
  CREATE TABLE usage (
    key_id        TEXT NOT NULL,
    model         TEXT NOT NULL,
    day           TEXT NOT NULL,
    owner         TEXT NOT NULL,
    tier          TEXT NOT NULL,
    requests      INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost          REAL NOT NULL,
    PRIMARY KEY (key_id, model, day)
  ) STRICT;
  CREATE INDEX usage_day ON usage (day);
  `,
  // Money in integer nano-units (keys/money.ts) instead of a float.
  `
  ALTER TABLE usage ADD COLUMN cost_nanos INTEGER NOT NULL DEFAULT 0;
  UPDATE usage SET cost_nanos = CAST(ROUND(cost * 1000000000) AS INTEGER);
  ALTER TABLE usage DROP COLUMN cost;
  `,
  // RAG gateway accounts, login sessions with their refresh-token hashes, JWT signing keys.
  `
  CREATE TABLE accounts (
    username TEXT PRIMARY KEY,
    record   TEXT NOT NULL
  ) STRICT;
  CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    record     TEXT NOT NULL,
    expires_at TEXT NOT NULL
  ) STRICT;
  CREATE INDEX sessions_expiry ON sessions (expires_at);
  CREATE TABLE refresh_tokens (
    hash       TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    spent      INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);
  CREATE TABLE signing_keys (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    kid    TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
  ) STRICT;
  `,
  // Objects of replies (stored responses, their items) a later call may name, for a while.
  `
  CREATE TABLE remembered (
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
  ) STRICT;
  CREATE INDEX remembered_expiry ON remembered (expires_at);
  `,
  // A spent refresh token remembers when, and the successor it was spent for: a repeat
  // within the reuse window gets the same new pair (embedded-auth.ts).
  `
  ALTER TABLE refresh_tokens ADD COLUMN spent_at INTEGER;
  ALTER TABLE refresh_tokens ADD COLUMN successor_seed TEXT;
  ALTER TABLE refresh_tokens ADD COLUMN successor_hash TEXT;
  `,
  // The stream journal (ports.ts StreamJournal): streams in flight, charged if the
  // gateway dies before they settle. recovered_at is set once a recovery charged one.
  `
  CREATE TABLE streams (
    id            TEXT PRIMARY KEY,
    instance      TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    owner         TEXT NOT NULL,
    tier          TEXT NOT NULL,
    model         TEXT NOT NULL,
    at            INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_nanos    INTEGER NOT NULL,
    recovered_at  INTEGER
  ) STRICT;
  `,
  // A prompt cache's reads and writes, apart: parts of input_tokens, and their cost part of cost_nanos.
  `
  ALTER TABLE usage ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage ADD COLUMN cache_read_cost_nanos INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage ADD COLUMN cache_write_cost_nanos INTEGER NOT NULL DEFAULT 0;
  `,
  // Of requests, those the response cache answered (src/cache/).
  `
  ALTER TABLE usage ADD COLUMN cached_requests INTEGER NOT NULL DEFAULT 0;
  `,
  // Of requests, the lines of batches, and their cost part of cost_nanos (src/batches/).
  `
  ALTER TABLE usage ADD COLUMN batch_requests INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage ADD COLUMN batch_cost_nanos INTEGER NOT NULL DEFAULT 0;
  `,
  // Ids of writes that count once across restarts (a stored request's charge: applied-writes.ts).
  APPLIED_WRITES_SCHEMA,
]

/**
 * The usage table's column of each row counter (ROW_COUNTERS): its name in snake case.
 * A new counter needs its migration above; the statements below read and write it from here.
 */
const columnOf = (counter: RowCounter): string => counter.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`)
const COUNTER_COLUMNS = ROW_COUNTERS.map(columnOf)

function text(row: Row, column: string): string {
  const value = row[column]
  if (typeof value !== 'string') throw new TypeError(`column ${column} is not text`)
  return value
}

function number(row: Row, column: string): number {
  const value = row[column]
  if (typeof value !== 'number') throw new TypeError(`column ${column} is not a number`)
  return value
}

/** A usage row's counters, from their columns. */
function counters(row: Row): Record<RowCounter, number> {
  return rowCounters((c) => number(row, columnOf(c)))
}

function streamOf(row: Row): StreamEntry {
  return {
    id: text(row, 'id'),
    instance: text(row, 'instance'),
    keyId: text(row, 'key_id'),
    owner: text(row, 'owner'),
    tier: text(row, 'tier'),
    model: text(row, 'model'),
    at: number(row, 'at'),
    inputTokens: number(row, 'input_tokens'),
    outputTokens: number(row, 'output_tokens'),
    costNanos: number(row, 'cost_nanos'),
  }
}

/** Opens (creating if needed) `<dataDir>/tollgate.db`; `':memory:'` keeps everything in memory. */
export function openEmbeddedStores(dataDir: string): Stores {
  const db = openSqlite(dataDir, DATABASE_FILE, MIGRATIONS)
  const sql = {
    insertKey: db.prepare('INSERT INTO keys (id, record, status, owner, tier) VALUES (?, ?, ?, ?, ?)'),
    updateKey: db.prepare('UPDATE keys SET record = ?, status = ?, owner = ?, tier = ? WHERE id = ?'),
    keyById: db.prepare('SELECT record FROM keys WHERE id = ?'),
    keyByHash: db.prepare('SELECT k.record FROM key_hashes h JOIN keys k ON k.id = h.id WHERE h.hash = ?'),
    hashHolder: db.prepare('SELECT id FROM key_hashes WHERE hash = ?'),
    insertHash: db.prepare('INSERT INTO key_hashes (hash, id) VALUES (?, ?)'),
    deleteHashesOf: db.prepare('DELETE FROM key_hashes WHERE id = ?'),
    claim: db.prepare('INSERT INTO ownership (kind, id, owner) VALUES (?, ?, ?) ON CONFLICT (kind, id) DO NOTHING'),
    ownerOf: db.prepare('SELECT owner FROM ownership WHERE kind = ? AND id = ?'),
    owned: db.prepare('SELECT id FROM ownership WHERE kind = ? AND owner = ? ORDER BY seq'),
    release: db.prepare('DELETE FROM ownership WHERE kind = ? AND id = ?'),
    remember: db.prepare(
      'INSERT INTO remembered (kind, id, owner, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (kind, id) DO NOTHING',
    ),
    rememberedOwner: db.prepare('SELECT owner FROM remembered WHERE kind = ? AND id = ? AND expires_at > ?'),
    forgetExpired: db.prepare('DELETE FROM remembered WHERE expires_at <= ?'),
    addUsage: db.prepare(`
      INSERT INTO usage (key_id, model, day, owner, tier, requests, input_tokens, output_tokens, cost_nanos,
        ${COUNTER_COLUMNS.join(', ')})
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?${', ?'.repeat(COUNTER_COLUMNS.length)})
      ON CONFLICT (key_id, model, day) DO UPDATE SET
        owner = excluded.owner,
        tier = excluded.tier,
        requests = requests + excluded.requests,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cost_nanos = cost_nanos + excluded.cost_nanos,
        ${COUNTER_COLUMNS.map((column) => `${column} = ${column} + excluded.${column}`).join(',\n        ')}`),
    openStream: db.prepare(`
      INSERT INTO streams (id, instance, key_id, owner, tier, model, at, input_tokens, output_tokens, cost_nanos)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
    checkpointStream: db.prepare(`
      UPDATE streams SET at = ?, input_tokens = MAX(input_tokens, ?), output_tokens = MAX(output_tokens, ?), cost_nanos = MAX(cost_nanos, ?)
      WHERE id = ? AND recovered_at IS NULL`),
    streamById: db.prepare('SELECT * FROM streams WHERE id = ?'),
    liveStreams: db.prepare('SELECT * FROM streams WHERE recovered_at IS NULL ORDER BY at'),
    markRecovered: db.prepare('UPDATE streams SET recovered_at = ? WHERE id = ?'),
    deleteStream: db.prepare('DELETE FROM streams WHERE id = ?'),
    purgeRecovered: db.prepare('DELETE FROM streams WHERE recovered_at < ?'),
    queryUsage: db.prepare(`
      SELECT key_id, model, day, owner, tier, requests, input_tokens, output_tokens, cost_nanos,
        ${COUNTER_COLUMNS.join(', ')} FROM usage
      WHERE (?1 IS NULL OR key_id = ?1) AND (?2 IS NULL OR day >= ?2) AND (?3 IS NULL OR day <= ?3)`),
  }

  const recordOf = (row: Row | undefined): KeyRecord | null =>
    row === undefined ? null : decodeKeyRecord(text(row, 'record'))

  function indexHashes(record: KeyRecord): void {
    for (const hash of hashesOf(record)) {
      const holder = sql.hashHolder.get(hash)
      if (holder !== undefined && text(holder, 'id') !== record.id) {
        throw new StoreConflictError(`a hash of key ${record.id} already belongs to another key`)
      }
    }
    sql.deleteHashesOf.run(record.id)
    for (const hash of hashesOf(record)) sql.insertHash.run(hash, record.id)
  }

  const keys: KeyStore = {
    async insert(record) {
      transaction(db, () => {
        if (sql.keyById.get(record.id) !== undefined) throw new StoreConflictError(`key id ${record.id} already exists`)
        sql.insertKey.run(record.id, encodeKeyRecord(record), record.status, record.owner, record.tier)
        indexHashes(record)
      })
    },
    async replace(record, expected) {
      if (record.id !== expected.id)
        throw new RangeError(`replace: expected record ${expected.id} is not record ${record.id}`)
      // The compare and the write in one BEGIN IMMEDIATE transaction: no other writer,
      // in this process or another, can land between them.
      return transaction(db, (): ReplaceOutcome => {
        const stored = recordOf(sql.keyById.get(record.id))
        if (stored === null) return 'missing'
        if (!sameKeyRecord(stored, expected)) return 'stale'
        indexHashes(record)
        sql.updateKey.run(encodeKeyRecord(record), record.status, record.owner, record.tier, record.id)
        return 'replaced'
      })
    },
    async get(id) {
      return recordOf(sql.keyById.get(id))
    },
    async findByHash(hash) {
      return recordOf(sql.keyByHash.get(hash))
    },
    async list(filter: KeyFilter = {}) {
      // The filter is applied on the decoded records, exactly as in the Redis adapter.
      const clauses: string[] = []
      const params: SQLInputValue[] = []
      for (const column of ['owner', 'tier', 'status'] as const) {
        const value = filter[column]
        if (value !== undefined) {
          clauses.push(`${column} = ?`)
          params.push(value)
        }
      }
      const where = clauses.length === 0 ? '' : ` WHERE ${clauses.join(' AND ')}`
      return db
        .prepare(`SELECT record FROM keys${where}`)
        .all(...params)
        .map((row) => decodeKeyRecord(text(row, 'record')))
        .filter((record) => matchesFilter(record, filter))
        .sort(compareKeyRecords)
    },
  }

  let remembers = 0
  const ownership: OwnershipStore = {
    async claim(kind, id, owner) {
      transaction(db, () => {
        sql.claim.run(kind, id, owner)
        const row = sql.ownerOf.get(kind, id)
        if (row === undefined || text(row, 'owner') !== owner) {
          throw new StoreConflictError(`${kind} ${id} already belongs to another owner`)
        }
      })
    },
    async ownerOf(kind, id) {
      const row = isRemembered(kind) ? sql.rememberedOwner.get(kind, id, Date.now()) : sql.ownerOf.get(kind, id)
      return row === undefined ? null : text(row, 'owner')
    },
    async list(kind, owner) {
      return sql.owned.all(kind, owner).map((row) => text(row, 'id'))
    },
    async release(kind, id) {
      sql.release.run(kind, id)
    },
    async remember(kind, ids, owner, ttlMs) {
      const now = Date.now()
      transaction(db, () => {
        // What has run out goes now and then, in the same write (an index range, cheap).
        if (++remembers % FORGET_EVERY === 1) sql.forgetExpired.run(now)
        for (const id of ids) sql.remember.run(kind, id, owner, now + ttlMs)
      })
    },
  }

  const addUsage = (r: UsageRecord): void => {
    sql.addUsage.run(
      r.keyId,
      r.model,
      r.day,
      r.owner,
      r.tier,
      r.requests,
      r.inputTokens,
      r.outputTokens,
      r.costNanos,
      ...ROW_COUNTERS.map((c) => r[c] ?? 0),
    )
  }
  const applied = appliedWrites(db)
  /**
   * A record that settles a stream: its entry goes, and what recovery charged for it is taken
   * off. One that counts once (keepIdMs) is skipped when its id was written before.
   */
  const settle = (r: UsageWrite): void => {
    if (countsOnce(r) && !applied.first(r.id, r.keepIdMs)) return
    if (r.stream === undefined) return addUsage(r)
    const entry = sql.streamById.get(r.stream)
    sql.deleteStream.run(r.stream)
    addUsage(entry !== undefined && entry.recovered_at !== null ? lessRecovered(r, streamOf(entry)) : r)
  }

  // Group commit (sqlite.ts turnCommit): the writes of calls that end (or stream) in the same
  // turn of the event loop share one transaction (one WAL commit, not one per call: it was
  // 4-6 % of the gateway's CPU under load), committed in the turn's end after the meter's
  // batches are sent, before turnWritten() resolves. Budgets' spend joins the same
  // transaction (limits/budget-ledger.ts), so a call's usage row and its spend are kept together.
  const turn = turnCommit(db)
  const inBatch = turn.write

  const usage: UsageStore = {
    async add(records) {
      checkUsageRecords(records)
      if (records.length === 0) return
      await inBatch(() => {
        for (const r of records) settle(r)
      })
    },
    async query(query: UsageQuery) {
      checkUsageQuery(query)
      const rows = sql.queryUsage.all(query.keyId ?? null, query.from ?? null, query.to ?? null)
      return rows
        .map((row): UsageRecord => ({
          keyId: text(row, 'key_id'),
          owner: text(row, 'owner'),
          tier: text(row, 'tier'),
          model: text(row, 'model'),
          day: text(row, 'day'),
          requests: number(row, 'requests'),
          inputTokens: number(row, 'input_tokens'),
          outputTokens: number(row, 'output_tokens'),
          costNanos: number(row, 'cost_nanos'),
          ...counters(row),
        }))
        .sort(compareUsageRows)
    },
  }

  const streams: StreamJournal = {
    async open(entry) {
      checkStreamCharge(entry)
      await inBatch(() => {
        sql.openStream.run(...streamEntryValues(entry))
      })
    },
    async checkpoint({ id }, charge, at) {
      checkStreamCharge(charge)
      await inBatch(() => {
        sql.checkpointStream.run(at, charge.inputTokens, charge.outputTokens, charge.costNanos, id)
      })
    },
    async list(of) {
      // Recovered entries outlive their recovery only for a settle that might still come.
      sql.purgeRecovered.run(Date.now() - RECOVERED_STREAM_TTL_MS)
      const entries = sql.liveStreams.all().map(streamOf)
      return of === undefined ? entries : await onlyOf(entries, of)
    },
    async recover({ id }) {
      return transaction(db, (): UsageRecord | null => {
        const row = sql.streamById.get(id)
        if (row === undefined || row.recovered_at !== null) return null
        const entry = streamOf(row)
        const record: UsageRecord = {
          keyId: entry.keyId,
          owner: entry.owner,
          tier: entry.tier,
          model: entry.model,
          day: dayOf(entry.at),
          requests: 1,
          inputTokens: entry.inputTokens,
          outputTokens: entry.outputTokens,
          costNanos: entry.costNanos,
          // A journal entry knows no cache parts: its prompt is charged as plain input.
          ...rowCounters(() => 0),
        }
        addUsage(record)
        sql.markRecovered.run(Date.now(), id)
        return record
      })
    },
  }

  return {
    kind: 'embedded',
    turnCommit: turn,
    keys,
    ownership,
    usage,
    streams,
    ...embeddedAuthStores(db),
    ping: async () => pingSqlite(db),
    async close() {
      // Rows added in this turn are written before the database goes.
      turn.flush()
      closeSqlite(db)
    },
  }
}

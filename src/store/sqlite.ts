// What every SQLite file of the embedded mode shares (tollgate.db, queue.db, file-quota.db,
// portal.db): one way to open it (private file, WAL, busy timeout, migrations counted by
// PRAGMA user_version), one transaction, one ping. A leaf: the adapters that keep their
// rows in SQLite build on it without importing one another.
//
// Calls run synchronously inside the event loop, so within this process each write is
// already serial; transactions are BEGIN IMMEDIATE so another process opening the same
// file (the CLI while the gateway runs) waits on busy_timeout instead of failing halfway.
import { join } from 'node:path'
import { DatabaseSync, type SQLOutputValue } from 'node:sqlite'
import { flushAtTurnEnd } from '../turn-batches.ts'
import { ensurePrivateDir, ensurePrivateFile } from './data-dir.ts'

/** How long a write waits for another process's transaction before it fails. */
const BUSY_TIMEOUT_MS = 5000
/** The files SQLite keeps beside a database. */
const SQLITE_COMPANIONS = ['-wal', '-shm', '-journal'] as const

/** A row as node:sqlite reads it. */
export type SqlRow = Record<string, SQLOutputValue>

function userVersion(db: DatabaseSync): number {
  const version = db.prepare('PRAGMA user_version').get()?.user_version ?? 0
  if (typeof version !== 'number') throw new TypeError('column user_version is not a number')
  return version
}

/** Runs fn in one BEGIN IMMEDIATE transaction: committed when it returns, rolled back when it throws. */
export function transaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE')
  try {
    const result = fn()
    db.exec('COMMIT')
    return result
  } catch (error) {
    db.exec('ROLLBACK')
    throw error
  }
}

function migrate(db: DatabaseSync, migrations: readonly string[]): void {
  const version = userVersion(db)
  if (version > migrations.length) {
    throw new Error(
      `the database schema (version ${version}) is newer than this Tollgate knows (${migrations.length}); upgrade Tollgate`,
    )
  }
  migrations.slice(version).forEach((sql, i) => {
    transaction(db, () => {
      db.exec(sql)
      db.exec(`PRAGMA user_version = ${version + i + 1}`)
    })
  })
}

/**
 * Opens (creating and migrating) `<dataDir>/<file>` in WAL mode; `':memory:'` keeps it in
 * memory. `migrations` are the schema steps of that file (PRAGMA user_version counts how
 * many are applied): append, never edit.
 */
export function openSqlite(dataDir: string, file: string, migrations: readonly string[]): DatabaseSync {
  let path = ':memory:'
  if (dataDir !== ':memory:') {
    ensurePrivateDir(dataDir)
    path = join(dataDir, file)
    // Owner-only before SQLite opens it; SQLite gives -wal and -shm the same mode.
    ensurePrivateFile(path, SQLITE_COMPANIONS)
  }
  const db = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS, enableForeignKeyConstraints: true })
  try {
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`)
    db.exec('PRAGMA journal_mode = WAL')
    // With WAL, NORMAL loses at most the last commits on a power cut, never consistency.
    db.exec('PRAGMA synchronous = NORMAL')
    migrate(db, migrations)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

/** True when the database answers a query now. */
export function pingSqlite(db: DatabaseSync): boolean {
  try {
    return db.isOpen && db.prepare('SELECT 1 AS ok').get()?.ok === 1
  } catch {
    return false
  }
}

/** Closes the database unless it is closed already (close() may be called twice). */
export function closeSqlite(db: DatabaseSync): void {
  if (db.isOpen) db.close()
}

/**
 * A file's group commit: the writes handed to it in one turn of the event loop share one
 * transaction at the turn's end (turn-batches.ts), committed before turnWritten() resolves.
 * One WAL commit per turn, not one per call; and writes of different concerns on the same
 * file (a call's usage row and its budget's spend) commit together or not at all.
 */
export interface TurnCommit {
  readonly db: DatabaseSync
  /** Adds a write to this turn's transaction; resolves once it is committed, rejects if the transaction failed. */
  write(write: () => void): Promise<void>
  /** Adds a write nobody waits on (it still commits or fails with the turn's others). */
  add(write: () => void): void
  /** Commits what is pending now (before the database closes). */
  flush(): void
}

export function turnCommit(db: DatabaseSync): TurnCommit {
  type Batch = { writes: Array<() => void>; waiters: Array<{ resolve(): void; reject(error: unknown): void }> }
  let batch: Batch | null = null
  const flush = (): void => {
    const pending = batch
    batch = null
    if (pending === null) return
    try {
      transaction(db, () => {
        for (const write of pending.writes) write()
      })
    } catch (error) {
      for (const waiter of pending.waiters) waiter.reject(error)
      return
    }
    for (const waiter of pending.waiters) waiter.resolve()
  }
  const current = (): Batch => {
    if (batch === null) {
      batch = { writes: [], waiters: [] }
      flushAtTurnEnd(flush)
    }
    return batch
  }
  return {
    db,
    write: (write) =>
      new Promise<void>((resolve, reject) => {
        const open = current()
        open.writes.push(write)
        open.waiters.push({ resolve, reject })
      }),
    add: (write) => void current().writes.push(write),
    flush,
  }
}

// One gateway per data directory: two embedded gateways on the same ./data would both run,
// each writing the same SQLite files with its own idea of the counters. The gateway takes
// an exclusive SQLite lock on <dataDir>/tollgate.lock for its whole life. It is an fcntl
// lock held by the kernel for the process: a gateway that crashes or is killed (kill -9)
// releases it with its last breath, so nothing stale can block the next start, and a
// recycled pid cannot either (which a pid file checked for liveness could not promise).
// Beside it, tollgate.pid names the holder, for the message the next one prints, and, once it
// listens, where it answers: the CLI calls the gateway of its data directory there, however
// its port was chosen (PORT, --port, the file).
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { ensurePrivateDir, ensurePrivateFile } from './data-dir.ts'

export const LOCK_FILE = 'tollgate.lock'
export const HOLDER_FILE = 'tollgate.pid'

export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError'
}

export interface DataDirLock {
  /** Records where this gateway listens, for the CLI (gatewayUrlOf). */
  announce(url: string): void
  /** Lets the next gateway in (also done by the kernel when this process ends). */
  release(): void
}

/**
 * Where the gateway holding this data directory listens, as it recorded it: undefined when
 * none holds it, it has not listened yet, or its process is gone (killed, its file left).
 */
export function gatewayUrlOf(dir: string): string | undefined {
  const holder = readHolder(dir)
  if (holder?.url === undefined) return undefined
  try {
    process.kill(holder.pid, 0)
  } catch (err) {
    // EPERM: alive, another user's; ESRCH: gone.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return undefined
  }
  return holder.url
}

interface Holder {
  readonly pid: number
  readonly startedAt: string
  /** Where it listens, once it does. */
  readonly url?: string
}

function readHolder(dir: string): Holder | null {
  try {
    const value = JSON.parse(readFileSync(join(dir, HOLDER_FILE), 'utf8')) as Partial<Holder>
    return typeof value.pid === 'number' && typeof value.startedAt === 'string'
      ? { pid: value.pid, startedAt: value.startedAt, ...(typeof value.url === 'string' ? { url: value.url } : {}) }
      : null
  } catch {
    return null
  }
}

/** Takes the data directory for this process, or throws DataDirInUseError naming the holder. */
export function lockDataDir(dir: string): DataDirLock {
  ensurePrivateDir(dir)
  const path = join(dir, LOCK_FILE)
  ensurePrivateFile(path)
  // timeout 0: a held lock is an answer, not something to wait for.
  const db = new DatabaseSync(path, { timeout: 0 })
  try {
    // No journal file; EXCLUSIVE locking mode keeps the lock BEGIN EXCLUSIVE takes after COMMIT.
    db.exec('PRAGMA locking_mode = EXCLUSIVE')
    db.exec('PRAGMA journal_mode = MEMORY')
    db.exec('BEGIN EXCLUSIVE')
    db.exec('COMMIT')
  } catch (err) {
    db.close()
    if (!/locked|busy/i.test((err as Error).message)) throw err
    const holder = readHolder(dir)
    const who =
      holder === null ? 'another Tollgate' : `another Tollgate (pid ${holder.pid}, started ${holder.startedAt})`
    throw new DataDirInUseError(
      `${who} is running on the data directory ${dir}: two gateways on one data directory would write the same SQLite files. ` +
        'Stop that one first, or give this one a data directory of its own (TOLLGATE_DATA_DIR or store.dataDir).',
    )
  }
  const holderPath = join(dir, HOLDER_FILE)
  const holder: Holder = { pid: process.pid, startedAt: new Date().toISOString() }
  const writeHolder = (value: Holder): void => writeFileSync(holderPath, `${JSON.stringify(value)}\n`, { mode: 0o600 })
  writeHolder(holder)
  let released = false
  return {
    announce(url) {
      if (!released) writeHolder({ ...holder, url })
    },
    release() {
      if (released) return
      released = true
      if (readHolder(dir)?.pid === process.pid) rmSync(holderPath, { force: true })
      db.close()
    },
  }
}

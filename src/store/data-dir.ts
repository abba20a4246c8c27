// The data directory holds password and session hashes, the key-hash secret and the admin
// token: it is its owner's only. The directory is made 0700 and every file the gateway
// writes there 0600 (SQLite gives a database's -wal, -shm and -journal files the mode of
// the database file, so making that one 0600 before SQLite opens it covers them).
//
// A directory (or file) that already exists with looser modes is tightened, not only
// warned about: a warning in a log nobody reads leaves the hashes readable, and nothing
// the gateway does needs anyone else to read them. What was changed is returned so the
// gateway can say so. A directory the gateway does not own (chmod refused) is left as it
// is, and said too.
import { chmodSync, closeSync, mkdirSync, openSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

export const DIR_MODE = 0o700
export const FILE_MODE = 0o600

/** What was done to modes, for a log line: "<path>: 0755 -> 0700" or "<path>: 0755, cannot tighten (EPERM)". */
export type ModeChanges = string[]

const octal = (mode: number): string => `0${(mode & 0o777).toString(8)}`

function tighten(path: string, wanted: number, changes: ModeChanges): void {
  const mode = statSync(path).mode & 0o777
  if ((mode & ~wanted) === 0) return
  try {
    chmodSync(path, mode & wanted)
    changes.push(`${path}: ${octal(mode)} -> ${octal(mode & wanted)}`)
  } catch (err) {
    changes.push(`${path}: ${octal(mode)}, cannot tighten (${(err as NodeJS.ErrnoException).code ?? String(err)})`)
  }
}

/** Makes `dir` (and any missing parent) owner-only, or tightens it; returns what changed. */
export function ensurePrivateDir(dir: string, changes: ModeChanges = []): ModeChanges {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE })
  tighten(dir, DIR_MODE, changes)
  return changes
}

/**
 * Makes `path` exist, owner-only (0600), before anything else opens it; an existing file
 * with looser modes is tightened. `companions` (a database's -wal, -shm, -journal) are
 * tightened if they exist, never made.
 */
export function ensurePrivateFile(
  path: string,
  companions: readonly string[] = [],
  changes: ModeChanges = [],
): ModeChanges {
  closeSync(openSync(path, 'a', FILE_MODE))
  tighten(path, FILE_MODE, changes)
  for (const companion of companions) {
    try {
      tighten(`${path}${companion}`, FILE_MODE, changes)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
  }
  return changes
}

/**
 * Tightens everything already under `dir` (files 0600, directories 0700), as a data
 * directory made by an earlier Tollgate left it (0644 databases in a 0755 directory).
 * Symbolic links are not followed: what they point at is not the gateway's to change.
 */
export function tightenTree(dir: string, changes: ModeChanges = []): ModeChanges {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) {
      tighten(path, DIR_MODE, changes)
      tightenTree(path, changes)
    } else if (entry.isFile()) {
      tighten(path, FILE_MODE, changes)
    }
  }
  return changes
}

/** The data directory made or tightened to 0700, and what is in it to 0600/0700. */
export function securePrivateDataDir(dir: string): ModeChanges {
  return tightenTree(dir, ensurePrivateDir(dir))
}

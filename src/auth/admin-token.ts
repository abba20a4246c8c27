// The admin credential of an embedded gateway started without TOLLGATE_ADMIN_TOKEN: made
// on the first start and kept in the data directory (beside the key-hash secret, readable
// by its owner only), so it survives restarts. `tollgate admin-token` shows it, or
// replaces it with --reset; a running gateway notices the new one within a second.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, unwatchFile, watchFile, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const ADMIN_TOKEN_FILE = 'admin.token'

export const adminTokenPath = (dataDir: string): string => join(dataDir, ADMIN_TOKEN_FILE)

export function newAdminToken(): string {
  return `tgadm_${randomBytes(24).toString('base64url')}`
}

/** The stored token, or null when none was made yet. */
export function readStoredAdminToken(dataDir: string): string | null {
  try {
    const token = readFileSync(adminTokenPath(dataDir), 'utf8').trim()
    return token.length > 0 ? token : null
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
}

/** The stored token, made now if there is none; `created` says which. */
export function ensureStoredAdminToken(dataDir: string): { token: string; created: boolean } {
  const existing = readStoredAdminToken(dataDir)
  if (existing !== null) return { token: existing, created: false }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const token = newAdminToken()
  try {
    writeFileSync(adminTokenPath(dataDir), `${token}\n`, { mode: 0o600, flag: 'wx' })
    return { token, created: true }
  } catch (err) {
    // Another process made it first (a CLI and a gateway starting together): use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return { token: readStoredAdminToken(dataDir) ?? token, created: false }
    throw err
  }
}

/** Replaces the stored token (atomically: readers see the old one or the new one). */
export function resetStoredAdminToken(dataDir: string): string {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const token = newAdminToken()
  const path = adminTokenPath(dataDir)
  writeFileSync(`${path}.tmp`, `${token}\n`, { mode: 0o600 })
  renameSync(`${path}.tmp`, path)
  return token
}

/** Calls onChange with the stored token whenever the file changes; returns a stop function. */
export function watchStoredAdminToken(
  dataDir: string,
  onChange: (token: string | null) => void,
  intervalMs = 1000,
): () => void {
  const path = adminTokenPath(dataDir)
  const listener = (): void => {
    try {
      onChange(readStoredAdminToken(dataDir))
    } catch {
      // Unreadable for a moment: keep the token we have.
    }
  }
  watchFile(path, { interval: intervalMs, persistent: false }, listener)
  return () => unwatchFile(path, listener)
}

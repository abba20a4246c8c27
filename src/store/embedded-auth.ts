// Accounts, sessions and signing keys in the embedded store's SQLite file (migration 3 of
// embedded.ts). Every read-then-write is one BEGIN IMMEDIATE transaction.
import type { DatabaseSync } from 'node:sqlite'
import { StoreConflictError } from './errors.ts'
import {
  compareAccounts,
  decodeAccount,
  decodeSession,
  decodeSigningKey,
  encodeRecord,
  sameAccount,
  sessionEnded,
} from './auth-records.ts'
import type { AccountStore, RefreshOutcome, ReplaceOutcome, SessionStore, SigningKeyStore } from './ports.ts'
import { transaction, type SqlRow as Row } from './sqlite.ts'

function column(row: Row | undefined, name: string): string | null {
  if (row === undefined) return null
  const value = row[name]
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  throw new TypeError(`column ${name} is not text`)
}

export function embeddedAuthStores(db: DatabaseSync): {
  accounts: AccountStore
  sessions: SessionStore
  signingKeys: SigningKeyStore
} {
  const sql = {
    insertAccount: db.prepare(
      'INSERT INTO accounts (username, record) VALUES (?, ?) ON CONFLICT (username) DO NOTHING',
    ),
    account: db.prepare('SELECT record FROM accounts WHERE username = ?'),
    accounts: db.prepare('SELECT record FROM accounts'),
    updateAccount: db.prepare('UPDATE accounts SET record = ? WHERE username = ?'),
    deleteAccount: db.prepare('DELETE FROM accounts WHERE username = ?'),
    insertSession: db.prepare('INSERT INTO sessions (id, record, expires_at) VALUES (?, ?, ?)'),
    session: db.prepare('SELECT record FROM sessions WHERE id = ?'),
    updateSession: db.prepare('UPDATE sessions SET record = ? WHERE id = ?'),
    pruneSessions: db.prepare('DELETE FROM sessions WHERE expires_at < ?'),
    insertRefresh: db.prepare('INSERT INTO refresh_tokens (hash, session_id, spent) VALUES (?, ?, 0)'),
    refresh: db.prepare(
      'SELECT session_id, spent, spent_at, successor_seed, successor_hash FROM refresh_tokens WHERE hash = ?',
    ),
    spendRefresh: db.prepare(
      'UPDATE refresh_tokens SET spent = 1, spent_at = ?, successor_seed = ?, successor_hash = ? WHERE hash = ?',
    ),
    insertKey: db.prepare('INSERT INTO signing_keys (kid, record) VALUES (?, ?)'),
    latestKey: db.prepare('SELECT kid FROM signing_keys ORDER BY seq DESC LIMIT 1'),
    keys: db.prepare('SELECT record FROM signing_keys ORDER BY seq'),
    deleteKey: db.prepare('DELETE FROM signing_keys WHERE kid = ? AND seq < (SELECT MAX(seq) FROM signing_keys)'),
  }
  const accountOf = (username: string) => {
    const text = column(sql.account.get(username), 'record')
    return text === null ? null : decodeAccount(text)
  }
  const sessionOf = (id: string) => {
    const text = column(sql.session.get(id), 'record')
    return text === null ? null : decodeSession(text)
  }

  const accounts: AccountStore = {
    async insert(account) {
      if (Number(sql.insertAccount.run(account.username, encodeRecord(account)).changes) === 0) {
        throw new StoreConflictError(`username ${account.username} is taken`)
      }
    },
    async get(username) {
      return accountOf(username)
    },
    async list() {
      return sql.accounts
        .all()
        .map((row) => decodeAccount(column(row, 'record') ?? ''))
        .sort(compareAccounts)
    },
    async replace(account, expected) {
      if (account.username !== expected.username || account.id !== expected.id)
        throw new RangeError('replace: expected is another account')
      return transaction(db, (): ReplaceOutcome => {
        const stored = accountOf(account.username)
        if (stored === null || stored.id !== account.id) return 'missing'
        if (!sameAccount(stored, expected)) return 'stale'
        sql.updateAccount.run(encodeRecord(account), account.username)
        return 'replaced'
      })
    },
    async remove(username) {
      return Number(sql.deleteAccount.run(username).changes) > 0
    },
  }

  const sessions: SessionStore = {
    async create(session, refreshHash) {
      transaction(db, () => {
        // Sessions past their end are of no use to anyone: dropped as new ones come.
        sql.pruneSessions.run(new Date().toISOString())
        sql.insertSession.run(session.id, encodeRecord(session), session.expiresAt)
        sql.insertRefresh.run(refreshHash, session.id)
      })
    },
    async get(id) {
      return sessionOf(id)
    },
    async rotateRefresh(hash, next, now, reuseWindowMs) {
      return transaction(db, (): RefreshOutcome => {
        const row = sql.refresh.get(hash)
        const sessionId = column(row, 'session_id')
        const session = sessionId === null ? null : sessionOf(sessionId)
        if (session === null) return { outcome: 'unknown' }
        if (sessionEnded(session, now)) return { outcome: 'revoked', session }
        if (column(row, 'spent') !== '0') {
          const spentAt = column(row, 'spent_at')
          const seed = column(row, 'successor_seed')
          const successor = column(row, 'successor_hash')
          // A repeat: spent within the window, and its successor not spent yet.
          if (
            reuseWindowMs > 0 &&
            spentAt !== null &&
            seed !== null &&
            successor !== null &&
            now.getTime() - Number(spentAt) <= reuseWindowMs &&
            column(sql.refresh.get(successor), 'spent') === '0'
          ) {
            return { outcome: 'rotated', session, grant: { seed, at: Number(spentAt) }, repeat: true }
          }
          const revoked = { ...session, revokedAt: now.toISOString() }
          sql.updateSession.run(encodeRecord(revoked), session.id)
          return { outcome: 'reused', session: revoked }
        }
        sql.spendRefresh.run(now.getTime(), next.seed, next.hash, hash)
        sql.insertRefresh.run(next.hash, session.id)
        return { outcome: 'rotated', session, grant: { seed: next.seed, at: now.getTime() }, repeat: false }
      })
    },
    async revoke(id, now) {
      return transaction(db, () => {
        const session = sessionOf(id)
        if (session === null) return false
        if (session.revokedAt === null)
          sql.updateSession.run(encodeRecord({ ...session, revokedAt: now.toISOString() }), id)
        return true
      })
    },
  }

  const signingKeys: SigningKeyStore = {
    async list() {
      return sql.keys.all().map((row) => decodeSigningKey(column(row, 'record') ?? ''))
    },
    async addIfLatest(key, expectedLatest) {
      return transaction(db, () => {
        if (column(sql.latestKey.get(), 'kid') !== expectedLatest) return false
        sql.insertKey.run(key.kid, encodeRecord(key))
        return true
      })
    },
    async remove(kid) {
      sql.deleteKey.run(kid)
    },
  }

  return { accounts, sessions, signingKeys }
}

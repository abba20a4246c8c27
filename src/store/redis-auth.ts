// Accounts, sessions and signing keys on Redis. Accounts and signing keys are global, under
// `<prefix>{tg}:`. A session and its refresh-token hashes are its user's, on the user's slot
// (`<prefix>{o:<user id>}:`): their ids name the user (store/user-ids.ts), so a token finds its
// slot alone, and the refresh script touches one slot. Ids that name no user (sessions made
// before #25) are where they were, under `{tg}`, until they end: nothing to migrate.
// Sessions and refresh-token hashes expire with the session (PXAT), so nothing is swept.
// Refresh tokens are spent by a script: spending, reuse detection (with its window for a
// repeat) and the revocation it triggers are one atomic step, whichever instance gets the token.
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
import type { AccountStore, RefreshOutcome, SessionStore, SigningKeyStore } from './ports.ts'
import type { RedisConnection } from './redis-client.ts'
import { redisNamespace, runScript, script, unexpected, userNamespace, withRedis } from './redis-kit.ts'
import { userOfId } from './user-ids.ts'

const CAS_ATTEMPTS = 16

// KEYS: account, usernames  ARGV: username, json
const INSERT_ACCOUNT = script(`
if redis.call('SET', KEYS[1], ARGV[2], 'NX') then
  redis.call('SADD', KEYS[2], ARGV[1])
  return 'ok'
end
return 'taken'
`)

// KEYS: account  ARGV: expected json, new json
const REPLACE_ACCOUNT = script(`
local current = redis.call('GET', KEYS[1])
if not current then return 'missing' end
if current ~= ARGV[1] then return 'changed' end
redis.call('SET', KEYS[1], ARGV[2])
return 'ok'
`)

// KEYS: account, usernames  ARGV: username
const REMOVE_ACCOUNT = script(`
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

// A live token's value is `<session id>|live`; a spent one's
// `<session id>|spent|<spent at, ms>|<successor seed>|<successor hash>` (or the bare
// `<session id>|spent` of earlier versions: never a repeat).
// KEYS: spent token, next token, session, the spent token's successor (the next token when live)
// ARGV: the token's value as read, session id, now (ISO), now (ms), next seed, next hash, reuse window (ms)
const ROTATE_REFRESH = script(`
local token = redis.call('GET', KEYS[1])
if not token then return {'unknown'} end
if token ~= ARGV[1] then return {'changed'} end
local text = redis.call('GET', KEYS[3])
if not text then return {'unknown'} end
local session = cjson.decode(text)
if session.revokedAt ~= cjson.null then return {'revoked', text} end
local live = ARGV[2] .. '|live'
if token ~= live then
  local at, seed = string.match(token, '^[^|]+|spent|(%d+)|([^|]+)|')
  local window = tonumber(ARGV[7])
  if at and window > 0 and tonumber(ARGV[4]) - tonumber(at) <= window and redis.call('GET', KEYS[4]) == live then
    return {'repeated', text, at, seed}
  end
  session.revokedAt = ARGV[3]
  local revoked = cjson.encode(session)
  redis.call('SET', KEYS[3], revoked, 'KEEPTTL')
  return {'reused', revoked}
end
redis.call('SET', KEYS[1], ARGV[2] .. '|spent|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. ARGV[6], 'KEEPTTL')
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then
  redis.call('SET', KEYS[2], live, 'PX', ttl)
else
  redis.call('SET', KEYS[2], live)
end
return {'rotated', text, ARGV[4], ARGV[5]}
`)

// KEYS: session  ARGV: now (ISO)
const REVOKE_SESSION = script(`
local text = redis.call('GET', KEYS[1])
if not text then return 0 end
local session = cjson.decode(text)
if session.revokedAt == cjson.null then
  session.revokedAt = ARGV[1]
  redis.call('SET', KEYS[1], cjson.encode(session), 'KEEPTTL')
end
return 1
`)

// KEYS: key records (hash), order (list)  ARGV: kid, json, expected latest kid ('' for none)
const ADD_SIGNING_KEY = script(`
local latest = redis.call('LINDEX', KEYS[2], -1)
if (latest or '') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
`)

// KEYS: key records, order  ARGV: kid
const REMOVE_SIGNING_KEY = script(`
if redis.call('LINDEX', KEYS[2], -1) == ARGV[1] then return 0 end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`)

/** Key names of the auth stores under `prefix`. */
export function redisAuthKeys(prefix: string) {
  const enc = encodeURIComponent
  const base = redisNamespace(prefix)
  /** The slot of what an id (a session's, a refresh token hash) names: its user's, or `{tg}`. */
  const of = (id: string): string => {
    const user = userOfId(id)
    return user === null ? base : userNamespace(prefix, user)
  }
  return {
    account: (username: string) => `${base}acct:${enc(username)}`,
    usernames: `${base}accts`,
    session: (id: string) => `${of(id)}sess:${enc(id)}`,
    refresh: (hash: string) => `${of(hash)}rt:${enc(hash)}`,
    signingKeys: `${base}sigkeys`,
    signingKeyOrder: `${base}sigkeys:order`,
  }
}

export function redisAuthStores(
  redis: RedisConnection,
  prefix: string,
): { accounts: AccountStore; sessions: SessionStore; signingKeys: SigningKeyStore } {
  const k = redisAuthKeys(prefix)
  const io = <T>(fn: () => Promise<T>): Promise<T> => withRedis(redis, fn)

  const accounts: AccountStore = {
    insert: (account) =>
      io(async () => {
        const outcome = await runScript(
          redis,
          INSERT_ACCOUNT,
          [k.account(account.username), k.usernames],
          [account.username, encodeRecord(account)],
        )
        if (outcome === 'taken') throw new StoreConflictError(`username ${account.username} is taken`)
        if (outcome !== 'ok') throw unexpected('insert account script', outcome)
      }),
    get: (username) =>
      io(async () => {
        const text = await redis.get(k.account(username))
        return text === null ? null : decodeAccount(text)
      }),
    list: () =>
      io(async () => {
        const usernames = await redis.smembers(k.usernames)
        if (usernames.length === 0) return []
        const texts = await redis.mget(...usernames.map(k.account))
        return texts.flatMap((text) => (text === null ? [] : [decodeAccount(text)])).sort(compareAccounts)
      }),
    replace: (account, expected) =>
      io(async () => {
        if (account.username !== expected.username || account.id !== expected.id)
          throw new RangeError('replace: expected is another account')
        const key = k.account(account.username)
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const current = await redis.get(key)
          if (current === null) return 'missing'
          const stored = decodeAccount(current)
          if (stored.id !== account.id) return 'missing'
          if (!sameAccount(stored, expected)) return 'stale'
          const outcome = await runScript(redis, REPLACE_ACCOUNT, [key], [current, encodeRecord(account)])
          if (outcome === 'ok') return 'replaced'
          if (outcome === 'missing') return 'missing'
          if (outcome !== 'changed') throw unexpected('replace account script', outcome)
        }
        throw new StoreConflictError(`account ${account.username} kept changing during replace`)
      }),
    remove: (username) =>
      io(
        async () => Number(await runScript(redis, REMOVE_ACCOUNT, [k.account(username), k.usernames], [username])) > 0,
      ),
  }

  const sessions: SessionStore = {
    create: (session, refreshHash) =>
      io(async () => {
        const until = Date.parse(session.expiresAt)
        const results = await redis
          .multi()
          .set(k.session(session.id), encodeRecord(session), 'PXAT', until)
          .set(k.refresh(refreshHash), `${session.id}|live`, 'PXAT', until)
          .exec()
        for (const [error] of results ?? []) if (error) throw error
      }),
    get: (id) =>
      io(async () => {
        const text = await redis.get(k.session(id))
        return text === null ? null : decodeSession(text)
      }),
    rotateRefresh: (hash, next, now, reuseWindowMs) =>
      io(async (): Promise<RefreshOutcome> => {
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const token = await redis.get(k.refresh(hash))
          if (token === null) return { outcome: 'unknown' }
          // <session id>|live, or <session id>|spent|<at>|<seed>|<successor hash>
          const [sessionId = '', , , , successor = next.hash] = token.split('|')
          const reply = await runScript(
            redis,
            ROTATE_REFRESH,
            [k.refresh(hash), k.refresh(next.hash), k.session(sessionId), k.refresh(successor)],
            [token, sessionId, now.toISOString(), now.getTime(), next.seed, next.hash, reuseWindowMs],
          )
          if (!Array.isArray(reply) || typeof reply[0] !== 'string') throw unexpected('rotate refresh script', reply)
          const [outcome, text, at, seed] = reply as [string, unknown, unknown, unknown]
          if (outcome === 'changed') continue
          if (outcome === 'unknown') return { outcome }
          if (typeof text !== 'string') throw unexpected('rotate refresh script', reply)
          const session = decodeSession(text)
          if (outcome === 'rotated' || outcome === 'repeated') {
            if (typeof seed !== 'string' || !Number.isFinite(Number(at)))
              throw unexpected('rotate refresh script', reply)
            if (sessionEnded(session, now)) return { outcome: 'revoked', session }
            return { outcome: 'rotated', session, grant: { seed, at: Number(at) }, repeat: outcome === 'repeated' }
          }
          if (outcome === 'reused' || outcome === 'revoked') return { outcome, session }
          throw unexpected('rotate refresh script', reply)
        }
        throw new StoreConflictError('refresh token kept changing during rotation')
      }),
    revoke: (id, now) =>
      io(async () => Number(await runScript(redis, REVOKE_SESSION, [k.session(id)], [now.toISOString()])) === 1),
  }

  const signingKeys: SigningKeyStore = {
    list: () =>
      io(async () => {
        const kids = await redis.lrange(k.signingKeyOrder, 0, -1)
        if (kids.length === 0) return []
        const texts = await redis.hmget(k.signingKeys, ...kids)
        return texts.flatMap((text) => (text === null ? [] : [decodeSigningKey(text)]))
      }),
    addIfLatest: (key, expectedLatest) =>
      io(
        async () =>
          Number(
            await runScript(
              redis,
              ADD_SIGNING_KEY,
              [k.signingKeys, k.signingKeyOrder],
              [key.kid, encodeRecord(key), expectedLatest ?? ''],
            ),
          ) === 1,
      ),
    remove: (kid) =>
      io(async () => {
        await runScript(redis, REMOVE_SIGNING_KEY, [k.signingKeys, k.signingKeyOrder], [kid])
      }),
  }

  return { accounts, sessions, signingKeys }
}

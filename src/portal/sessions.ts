// Portal sign-in and sessions. The cookie holds 256 random bits and names its user
// (`<random>.<user id>`, store/user-ids.ts); the store keeps only their SHA-256, naming the
// user too, so that it finds the session on the user's slot from the cookie alone. A cookie
// of before (the random part alone) is still read where it was until its session ends. A session ends when it has not been used for the idle time, at its absolute end,
// when its user is disabled, removed or given a new password, and at sign-out. Sign-in
// checks the password with the same AccountService as the RAG login and counts failures in
// the same login throttle.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { AccountService } from '../accounts/service.ts'
import type { Config } from '../config/schema.ts'
import type { AccountRecord } from '../store/ports.ts'
import type { PortalSessionRecord, PortalSessionStore } from '../store/portal-sessions.ts'
import type { LoginThrottle } from '../jwt/login-throttle.ts'
import { sameUserAs, userScopedId } from '../store/user-ids.ts'
import { secretHandoffs, type SecretHandoffs } from './handoff.ts'

export const COOKIE_NAME = 'tollgate_portal'
/** A used session's last-seen time is written at most this often (idle expiry is that coarse). */
const TOUCH_EVERY_MS = 60_000

export interface SignedIn {
  readonly session: PortalSessionRecord
  readonly account: AccountRecord
}

export interface PortalSessionsOptions {
  readonly config: Config['portal']
  readonly store: PortalSessionStore
  readonly accounts: AccountService
  readonly throttle: LoginThrottle
  readonly now?: () => number
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex')
/** The store id of a cookie value: its SHA-256, naming the cookie's user. */
const idOf = (token: string): string => sameUserAs(token, sha256(token))
/** A cookie value: 43 base64url characters, naming its user or (made before #25) not. */
const COOKIE_VALUE = /^[\w-]{43}(\.[\w-]{1,128})?$/

export function cookieValue(req: IncomingMessage, name = COOKIE_NAME): string | undefined {
  const header = req.headers.cookie
  if (header === undefined) return undefined
  for (const part of header.split(';')) {
    const at = part.indexOf('=')
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim()
  }
  return undefined
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

export class PortalSessions {
  readonly #o: PortalSessionsOptions
  readonly #now: () => number
  /** Secrets a form made, kept for the one page its redirect opens (handoff.ts). */
  readonly handoffs: SecretHandoffs

  constructor(options: PortalSessionsOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
    this.handoffs = secretHandoffs(options.store, this.#now)
  }

  /** A new session and its cookie value; null for a wrong username or password. Throws login_throttled. */
  async signIn(
    username: string,
    password: string,
    address: string,
  ): Promise<{ token: string; signedIn: SignedIn } | null> {
    const { throttle, accounts } = this.#o
    // Charged before the password is checked (a burst of parallel guesses gets only the allowance); a right one gives it back.
    await throttle.attempt(username, address)
    const account = await accounts.checkLogin(username, password)
    if (account === null) return null
    await throttle.succeeded(username, address)
    const token = userScopedId(randomBytes(32).toString('base64url'), account.id)
    const at = this.#now()
    const session: PortalSessionRecord = {
      id: idOf(token),
      userId: account.id,
      username: account.username,
      csrfToken: randomBytes(32).toString('base64url'),
      createdAt: new Date(at).toISOString(),
      lastSeenAt: new Date(at).toISOString(),
      expiresAt: new Date(at + this.#o.config.sessionAbsoluteSeconds * 1000).toISOString(),
    }
    await this.#o.store.put(session, this.#until(session, at))
    return { token, signedIn: { session, account } }
  }

  /** The session of this cookie value if it is still good (and marks it used); else null. */
  async resume(token: string | undefined): Promise<SignedIn | null> {
    if (token === undefined || !COOKIE_VALUE.test(token)) return null
    const session = await this.#o.store.get(idOf(token))
    if (session === null) return null
    const at = this.#now()
    if (at >= Date.parse(session.expiresAt) || at >= Date.parse(session.lastSeenAt) + this.#idleMs()) {
      await this.#o.store.remove(session.id)
      return null
    }
    const account = await this.#o.accounts.get(session.username)
    if (
      account === null ||
      account.id !== session.userId ||
      account.disabled ||
      session.createdAt < account.sessionsValidFrom
    ) {
      await this.#o.store.remove(session.id)
      return null
    }
    let current = session
    if (at - Date.parse(session.lastSeenAt) >= Math.min(TOUCH_EVERY_MS, this.#idleMs() / 10)) {
      current = { ...session, lastSeenAt: new Date(at).toISOString() }
      await this.#o.store.put(current, this.#until(current, at))
    }
    return { session: current, account }
  }

  async signOut(session: PortalSessionRecord): Promise<void> {
    await this.#o.store.remove(session.id)
  }

  /** Seconds the cookie may live: until the session's absolute end. */
  cookieMaxAge(session: PortalSessionRecord): number {
    return Math.max(0, Math.ceil((Date.parse(session.expiresAt) - this.#now()) / 1000))
  }

  #idleMs(): number {
    return this.#o.config.sessionIdleSeconds * 1000
  }

  #until(session: PortalSessionRecord, at: number): Date {
    return new Date(Math.min(Date.parse(session.expiresAt), at + this.#idleMs()))
  }
}

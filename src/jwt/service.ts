// Logins and their sessions: login answers an access token (a JWT signed by the keyring)
// and a refresh token; refresh spends the refresh token for a new pair (a token spent
// twice revokes its session: someone holds a copy); logout revokes the session. Refresh
// tokens are random and stored only as their SHA-256 (they are 256-bit random: a fast hash
// is enough, unlike a password).
//
// Two tabs of one browser often refresh with the same token at once. Within
// refreshReuseSeconds of the first spend, and while its successor is unspent, the same
// token is a repeat, not a theft: it gets the very same new pair. The pair is derived, not
// stored: the new refresh token is an HMAC of a random seed (chosen by the first spend and
// kept with the spent token) under the spent token itself, and the access token is signed
// over the same claims at the same issue time (Ed25519 signatures are deterministic). The
// store so holds nothing that works as a token, and whoever repeats must hold the spent
// token. Later, or once the successor was used, a spent token is a theft: the session is
// revoked, as before.
//
// A session id and a refresh token name their user (`ses_<hex>.<user id>`, `rt_<random>.<user
// id>`, store/user-ids.ts), and a refresh token's hash does too: the store keeps a user's
// sessions on the user's slot and finds them from the token alone. A successor keeps its
// spent token's user, so a session made before ids named their user (under `{tg}`) refreshes
// there until it ends.
import { createHash, createHmac, randomBytes } from 'node:crypto'
import { loadJose } from './jose.ts'
import type { AccountService } from '../accounts/service.ts'
import type { Config } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { AccountRecord, SessionRecord, SessionStore } from '../store/ports.ts'
import { sameUserAs, userScopedId } from '../store/user-ids.ts'
import type { Keyring } from './keyring.ts'
import type { LoginThrottle } from './login-throttle.ts'
import { ACCESS_TOKEN_TYPE, type TokenVerifier } from './verifier.ts'

export interface TokenPair {
  readonly access_token: string
  readonly token_type: 'bearer'
  readonly expires_in: number
  readonly refresh_token: string
}

export interface TokenServiceOptions {
  readonly config: Pick<
    Config['ragAuth'],
    'issuer' | 'audience' | 'accessTokenTtlSeconds' | 'refreshTokenTtlSeconds' | 'refreshReuseSeconds'
  >
  readonly accounts: AccountService
  readonly sessions: SessionStore
  readonly keyring: Pick<Keyring, 'signer' | 'jwks'>
  readonly throttle: LoginThrottle
  readonly verifier: Pick<TokenVerifier, 'verifyLocal'>
  /** Tells every instance's verifier that a session ended (revocation-feed.ts). */
  readonly sessionRevoked: (id: string) => void
  readonly metrics: Pick<Metrics, 'logins' | 'tokenRefreshes'>
  readonly now?: () => number
}

/** The SHA-256 of a refresh token, naming the user the token names (if it names one). */
export const hashRefreshToken = (token: string): string =>
  sameUserAs(token, createHash('sha256').update(token).digest('hex'))
const newRefreshToken = (userId: string): string => userScopedId(`rt_${randomBytes(32).toString('base64url')}`, userId)
/** What the pair that replaces `spent` is made of, for a grant's seed. */
const derived = (spent: string, seed: string, what: 'refresh' | 'jti'): Buffer =>
  createHmac('sha256', spent).update(`${what}|${seed}`).digest()
/** The token that replaces `spent`: on the same slot. */
const successorOf = (spent: string, seed: string): string =>
  sameUserAs(spent, `rt_${derived(spent, seed, 'refresh').toString('base64url')}`)

export class TokenService {
  readonly #o: TokenServiceOptions
  readonly #now: () => number

  constructor(options: TokenServiceOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  /** A username and password for a token pair; 401 login_failed, 429 login_throttled. */
  async login(username: string, password: string, address: string): Promise<TokenPair> {
    const { throttle, accounts, metrics } = this.#o
    try {
      await throttle.attempt(username, address)
    } catch (err) {
      metrics.logins.inc({ outcome: 'throttled' })
      throw err
    }
    const account = await accounts.checkLogin(username, password)
    if (account === null) {
      metrics.logins.inc({ outcome: 'invalid_credentials' })
      throw gatewayError('login_failed')
    }
    await throttle.succeeded(username, address)
    const at = this.#now()
    const session: SessionRecord = {
      id: userScopedId(`ses_${randomBytes(16).toString('hex')}`, account.id),
      userId: account.id,
      username: account.username,
      createdAt: new Date(at).toISOString(),
      expiresAt: new Date(at + this.#o.config.refreshTokenTtlSeconds * 1000).toISOString(),
      revokedAt: null,
    }
    const refreshToken = newRefreshToken(account.id)
    await this.#o.sessions.create(session, hashRefreshToken(refreshToken))
    metrics.logins.inc({ outcome: 'success' })
    return this.#pair(account, session, refreshToken, at, randomBytes(16).toString('hex'))
  }

  /** A refresh token for a new pair; 401 invalid_refresh_token (a reused one also revokes its session). */
  async refresh(refreshToken: string): Promise<TokenPair> {
    const { sessions, metrics, accounts, config } = this.#o
    const seed = randomBytes(16).toString('base64url')
    const successor = { hash: hashRefreshToken(successorOf(refreshToken, seed)), seed }
    const result = await sessions.rotateRefresh(
      hashRefreshToken(refreshToken),
      successor,
      new Date(this.#now()),
      config.refreshReuseSeconds * 1000,
    )
    if (result.outcome === 'reused') {
      this.#o.sessionRevoked(result.session.id)
      metrics.tokenRefreshes.inc({ outcome: 'reused' })
      throw gatewayError('invalid_refresh_token', {
        cause: new Error(`refresh token reused: session ${result.session.id} revoked`),
      })
    }
    if (result.outcome !== 'rotated') {
      metrics.tokenRefreshes.inc({ outcome: 'invalid' })
      throw gatewayError('invalid_refresh_token', { cause: new Error(`refresh token ${result.outcome}`) })
    }
    const account = await accounts.get(result.session.username)
    if (
      account === null ||
      account.id !== result.session.userId ||
      account.disabled ||
      result.session.createdAt < account.sessionsValidFrom
    ) {
      metrics.tokenRefreshes.inc({ outcome: 'invalid' })
      throw gatewayError('invalid_refresh_token', {
        cause: new Error('the user is gone, disabled or has a new password'),
      })
    }
    metrics.tokenRefreshes.inc({ outcome: result.repeat ? 'repeated' : 'rotated' })
    const { grant } = result
    return this.#pair(
      account,
      result.session,
      successorOf(refreshToken, grant.seed),
      grant.at,
      derived(refreshToken, grant.seed, 'jti').subarray(0, 16).toString('hex'),
    )
  }

  /** Revokes the access token's session: its access and refresh tokens stop working on every instance. */
  async logout(accessToken: string): Promise<void> {
    const { sessionId } = await this.#o.verifier.verifyLocal(accessToken)
    await this.#o.sessions.revoke(sessionId, new Date(this.#now()))
    this.#o.sessionRevoked(sessionId)
  }

  /** The public signing keys, for /.well-known/jwks.json. */
  jwks(): ReturnType<Keyring['jwks']> {
    return this.#o.keyring.jwks()
  }

  /** `issuedAt` (ms) and `jti` are given: a repeated refresh signs the same token again. */
  async #pair(
    account: AccountRecord,
    session: SessionRecord,
    refreshToken: string,
    issuedAt: number,
    jti: string,
  ): Promise<TokenPair> {
    const { config, keyring } = this.#o
    const signer = await keyring.signer()
    const { SignJWT } = await loadJose()
    const iat = Math.floor(issuedAt / 1000)
    // Never past the session's own end.
    const exp = Math.min(iat + config.accessTokenTtlSeconds, Math.floor(Date.parse(session.expiresAt) / 1000))
    const accessToken = await new SignJWT({
      sid: session.id,
      preferred_username: account.username,
      roles: [...account.roles],
      groups: [...account.groups],
      tenant: account.tenant,
    })
      .setProtectedHeader({ alg: 'EdDSA', kid: signer.kid, typ: ACCESS_TOKEN_TYPE })
      .setIssuer(config.issuer)
      .setAudience(config.audience)
      .setSubject(account.id)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(signer.privateKey)
    return { access_token: accessToken, token_type: 'bearer', expires_in: exp - iat, refresh_token: refreshToken }
  }
}

// createAccessTokenVerifier: the AccessTokenVerifier of auth/identity.ts. The gateway's own
// tokens: signature with the algorithm pinned to EdDSA and the kid looked up among the
// store's keys; typ, iss, aud, exp and nbf checked; then the session must not be revoked
// and the user must exist, be the same user (a username made again is another id) and be
// enabled. What it reads about sessions and users is cached for revocationCacheMs at most,
// so a logout or a disabled user on another instance is refused here within that time.
// Tokens of a configured OIDC issuer go to oidc.ts. Every refusal is the same 401; the
// reason is kept as the error's cause, for the log. A store that does not answer is not a
// refusal: its StoreUnavailableError goes up (a 503), so clients do not throw their tokens away.
import type { AccessTokenVerifier, Identity } from '../auth/identity.ts'
import type { Config } from '../config/schema.ts'
import { gatewayError, GatewayError } from '../errors.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import type { AccountRecord, AccountStore, SessionRecord, SessionStore } from '../store/ports.ts'
import { loadJose } from './jose.ts'
import type { Keyring } from './keyring.ts'
import { createTtlCache } from './ttl-cache.ts'

/** The JOSE `typ` of the gateway's access tokens (RFC 9068). */
export const ACCESS_TOKEN_TYPE = 'at+jwt'

export interface LocalVerification {
  readonly identity: Identity
  readonly sessionId: string
}

export interface TokenVerifier extends AccessTokenVerifier {
  /** The gateway's own tokens only, with the session they belong to (logout needs it). */
  verifyLocal(token: string): Promise<LocalVerification>
  /** Drops what this instance cached about a session or a user (after changing it). */
  forgetSession(id: string): void
  forgetUser(username: string): void
}

export interface VerifierOptions {
  readonly config: Pick<Config['ragAuth'], 'issuer' | 'audience' | 'revocationCacheMs' | 'oidc'>
  readonly keyring: Pick<Keyring, 'publicKey'>
  readonly sessions: Pick<SessionStore, 'get'>
  readonly accounts: Pick<AccountStore, 'get'>
  readonly now?: () => number
}

const refuse = (reason: string, cause?: unknown): GatewayError =>
  gatewayError('invalid_access_token', { cause: new Error(reason, { cause }) })

export function createAccessTokenVerifier(options: VerifierOptions): TokenVerifier {
  const { config, keyring } = options
  const now = options.now ?? Date.now
  const sessions = createTtlCache<SessionRecord | null>(config.revocationCacheMs, 10_000, now)
  const accounts = createTtlCache<AccountRecord | null>(config.revocationCacheMs, 10_000, now)
  // The OIDC verifier (and its JWKS client) is made with the first external token.
  const oidcConfig = config.oidc
  let oidcVerifier: Promise<(token: string) => Promise<Identity>> | undefined
  const oidc =
    oidcConfig === undefined
      ? null
      : async (token: string): Promise<Identity> =>
          (await (oidcVerifier ??= import('./oidc.ts').then((m) => m.createOidcVerifier(oidcConfig))))(token)

  async function verifyLocal(token: string): Promise<LocalVerification> {
    const { jwtVerify } = await loadJose()
    let payload
    try {
      ;({ payload } = await jwtVerify(
        token,
        async (header) => {
          const key = typeof header.kid === 'string' ? await keyring.publicKey(header.kid) : null
          if (key === null) throw new Error('unknown kid')
          return key
        },
        {
          algorithms: ['EdDSA'],
          typ: ACCESS_TOKEN_TYPE,
          issuer: config.issuer,
          audience: config.audience,
          requiredClaims: ['sub', 'exp', 'iat', 'jti', 'sid'],
          currentDate: new Date(now()),
        },
      ))
    } catch (err) {
      // An outage is not a bad token: the caller answers 503 and the client keeps its token.
      if (err instanceof GatewayError || err instanceof StoreUnavailableError) throw err
      throw refuse(err instanceof Error ? err.message : 'invalid token', err)
    }
    const { sub, sid } = payload
    if (typeof sub !== 'string' || typeof sid !== 'string') throw refuse('sub or sid is not a string')
    const session = await sessions.get(sid, () => options.sessions.get(sid))
    if (session === null) throw refuse('no such session')
    if (session.revokedAt !== null) throw refuse('session revoked')
    if (Date.parse(session.expiresAt) <= now()) throw refuse('session expired')
    if (session.userId !== sub) throw refuse('session of another user')
    const account = await accounts.get(session.username, () => options.accounts.get(session.username))
    if (account === null || account.id !== sub) throw refuse('user deleted')
    if (account.disabled) throw refuse('user disabled')
    if (session.createdAt < account.sessionsValidFrom) throw refuse('session older than the password')
    return {
      sessionId: sid,
      identity: {
        userId: account.id,
        username: account.username,
        roles: account.roles,
        groups: account.groups,
        tenant: account.tenant,
        token,
        source: 'local',
      },
    }
  }

  return {
    verifyLocal,
    async verify(token) {
      const { decodeJwt } = await loadJose()
      let issuer: unknown
      try {
        issuer = decodeJwt(token).iss
      } catch (err) {
        throw refuse('not a JWT', err)
      }
      if (oidc !== null && config.oidc !== undefined && issuer === config.oidc.issuer && issuer !== config.issuer) {
        try {
          return await oidc(token)
        } catch (err) {
          throw refuse(`OIDC: ${err instanceof Error ? err.message : 'invalid token'}`, err)
        }
      }
      return (await verifyLocal(token)).identity
    },
    forgetSession: (id) => sessions.delete(id),
    forgetUser: (username) => accounts.delete(username),
  }
}

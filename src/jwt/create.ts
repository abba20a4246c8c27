// The RAG gateway's token side, put together from the configuration: accounts, signing
// keys, the access-token verifier, the revocation feed, the login throttle and the token
// service. main.ts calls this once, starts it before listening and closes it on shutdown.
import { dummyPasswordHash } from '../accounts/password.ts'
import { AccountService } from '../accounts/service.ts'
import type { Config } from '../config/schema.ts'
import { lockoutEvents } from '../events/sources.ts'
import type { Events } from '../events/types.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { Stores } from '../store/ports.ts'
import { closeRedis, createRedisClient } from '../store/redis-client.ts'
import { createKeyring } from './keyring.ts'
import { createLoginThrottle, type LoginThrottle } from './login-throttle.ts'
import { createLocalRevocationFeed, createRedisRevocationFeed } from './revocation-feed.ts'
import { createSealer } from './seal.ts'
import { TokenService } from './service.ts'
import { createAccessTokenVerifier, type TokenVerifier } from './verifier.ts'

export interface RagAuth {
  readonly accounts: AccountService
  readonly accessTokens: TokenVerifier
  readonly tokens: TokenService
  /** Failed logins, per username and address; the portal's sign-in counts in it too. */
  readonly loginThrottle: LoginThrottle
  /** Makes or loads the signing keys (tolerating a store that is down); starts the dummy password hash. */
  start(): Promise<void>
  close(): Promise<void>
}

export interface RagAuthOptions {
  readonly config: Pick<Config, 'ragAuth' | 'store' | 'secrets' | 'redis'>
  readonly stores: Pick<Stores, 'accounts' | 'sessions' | 'signingKeys'>
  /** Seals the private signing keys when TOLLGATE_JWT_SECRET is not set. */
  readonly keyHashSecret: string
  readonly metrics: Pick<Metrics, 'logins' | 'tokenRefreshes' | 'setSigningKeySource'>
  readonly log: Logger
  /** Where user.created, user.disabled and user.locked_out are published. */
  readonly events?: Events
}

export function createRagAuth({ config, stores, keyHashSecret, metrics, log, events }: RagAuthOptions): RagAuth {
  const { ragAuth, store } = config
  const keyring = createKeyring({
    store: stores.signingKeys,
    sealer: createSealer(config.secrets.jwtSecret ?? keyHashSecret),
    rotationMs: ragAuth.signingKeyRotationSeconds * 1000,
    accessTokenTtlMs: ragAuth.accessTokenTtlSeconds * 1000,
    log,
  })
  // The gauge an on-call alert watches: a signing key past its planned life means rotation stalled.
  metrics.setSigningKeySource(() => {
    const key = keyring.current()
    return key === null ? null : { kid: key.kid, expiresAt: Date.parse(key.expiresAt) }
  })
  const accessTokens = createAccessTokenVerifier({
    config: ragAuth,
    keyring,
    sessions: stores.sessions,
    accounts: stores.accounts,
  })
  const revocations =
    config.redis === undefined
      ? createLocalRevocationFeed(accessTokens)
      : createRedisRevocationFeed({
          redis: config.redis,
          prefix: store.keyPrefix,
          commandTimeoutMs: store.commandTimeoutMs,
          verifier: accessTokens,
          log,
        })
  const accounts = new AccountService({
    store: stores.accounts,
    onChange: revocations.userChanged,
    ...(events === undefined ? {} : { events }),
  })
  const throttleRedis =
    config.redis === undefined
      ? undefined
      : createRedisClient(config.redis, { commandTimeoutMs: store.commandTimeoutMs, name: 'tollgate-login-throttle' })
  const loginThrottle = createLoginThrottle({
    ...ragAuth.loginThrottle,
    ...(throttleRedis === undefined ? {} : { redis: { client: throttleRedis, prefix: store.keyPrefix } }),
    ...(events === undefined ? {} : { onLockout: lockoutEvents(events) }),
  })
  const tokens = new TokenService({
    config: ragAuth,
    accounts,
    sessions: stores.sessions,
    keyring,
    verifier: accessTokens,
    metrics,
    sessionRevoked: revocations.sessionRevoked,
    throttle: loginThrottle,
  })
  return {
    accounts,
    accessTokens,
    tokens,
    loginThrottle,
    async start() {
      await keyring.start()
      // Made now, in the background (not holding up the start), so the first login for an
      // unknown user costs no more than any other.
      void dummyPasswordHash()
    },
    async close() {
      keyring.close()
      await revocations.close()
      if (throttleRedis !== undefined) await closeRedis(throttleRedis)
    },
  }
}

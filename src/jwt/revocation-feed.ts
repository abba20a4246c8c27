// Revocations reach every instance's verifier at once. With Redis, the instance that ends a
// session (logout, refresh-token reuse) or changes a user publishes it on
// `<prefix>{tg}:rag:revoked`, and every instance drops what it cached about that session or
// user. Pub/sub delivers at most once: a lost message is covered by the verifier's cache
// lifetime (ragAuth.revocationCacheMs), which is the guarantee; this feed makes it faster.
// The subscription is store/redis-subscription.ts's, like every feed between instances.
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import { closeRedis, createRedisClient } from '../store/redis-client.ts'
import { redisNamespace } from '../store/redis-kit.ts'
import { publish as publishOn, subscribe } from '../store/redis-subscription.ts'
import type { TokenVerifier } from './verifier.ts'

export interface RevocationFeed {
  /** This instance forgets the session now; the others when the message arrives. Never throws. */
  sessionRevoked(id: string): void
  userChanged(username: string): void
  close(): Promise<void>
}

type Forget = Pick<TokenVerifier, 'forgetSession' | 'forgetUser'>

export function createLocalRevocationFeed(verifier: Forget): RevocationFeed {
  return {
    sessionRevoked: (id) => verifier.forgetSession(id),
    userChanged: (username) => verifier.forgetUser(username),
    close: async () => undefined,
  }
}

export interface RedisRevocationFeedOptions {
  readonly redis: RedisTarget
  readonly prefix: string
  readonly commandTimeoutMs: number
  readonly verifier: Forget
  readonly log: Logger
}

export function createRedisRevocationFeed(options: RedisRevocationFeedOptions): RevocationFeed {
  const { verifier, log } = options
  const channel = `${redisNamespace(options.prefix)}rag:revoked`
  const publisher = createRedisClient(options.redis, {
    commandTimeoutMs: options.commandTimeoutMs,
    name: 'tollgate-rag-revoked-pub',
  })
  const feed = subscribe({
    redis: options.redis,
    commandTimeoutMs: options.commandTimeoutMs,
    name: 'tollgate-rag-revoked-sub',
    channels: [channel],
    sharded: true,
    onMessage: (_from, message) => {
      try {
        const value = JSON.parse(message) as { session?: unknown; user?: unknown }
        if (typeof value.session === 'string') verifier.forgetSession(value.session)
        if (typeof value.user === 'string') verifier.forgetUser(value.user)
      } catch {
        // Not ours: ignored.
      }
    },
    onError: (err) => log.debug({ err: err.message }, 'revocation feed: redis error'),
    onSubscribeFailed: (err) => log.warn({ err: err.message }, 'revocation feed: SUBSCRIBE failed; reconnecting'),
  })
  const publish = (message: Record<string, string>): void => {
    publishOn(publisher, channel, JSON.stringify(message), { sharded: true }).catch((err: unknown) =>
      log.warn(
        { err: (err as Error).message },
        'revocation could not be published; other instances see it within revocationCacheMs',
      ),
    )
  }
  return {
    sessionRevoked(id) {
      verifier.forgetSession(id)
      publish({ session: id })
    },
    userChanged(username) {
      verifier.forgetUser(username)
      publish({ user: username })
    },
    async close() {
      await Promise.all([closeRedis(publisher), feed.close()])
    },
  }
}

// Revocations reach every instance's verifier at once. With Redis, the instance that ends a
// session (logout, refresh-token reuse) or changes a user publishes it on
// `<prefix>{tg}:rag:revoked`, and every instance drops what it cached about that session or
// user. Pub/sub delivers at most once: a lost message is covered by the verifier's cache
// lifetime (ragAuth.revocationCacheMs), which is the guarantee; this feed makes it faster.
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import { createRedisClient, isCluster, type RedisConnection } from '../store/redis-client.ts'
import { redisKeys } from '../store/redis.ts'
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
  const channel = `${redisKeys(options.prefix).base}rag:revoked`
  const publisher = createRedisClient(options.redis, { commandTimeoutMs: options.commandTimeoutMs, name: 'tollgate-rag-revoked-pub' })
  // Subscribed by hand on every (re)connect: nothing is queued while disconnected. A
  // cluster client subscribes through a node of its choosing (pub/sub reaches every node).
  const subscriber: RedisConnection = isCluster(publisher)
    ? createRedisClient(options.redis, { commandTimeoutMs: options.commandTimeoutMs, name: 'tollgate-rag-revoked-sub' })
    : publisher.duplicate({ connectionName: 'tollgate-rag-revoked-sub', autoResubscribe: false })
  subscriber.on('error', (err: Error) => log.debug({ err: err.message }, 'revocation feed: redis error'))
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).catch((err: unknown) => {
      log.warn({ err: (err as Error).message }, 'revocation feed: SUBSCRIBE failed; reconnecting')
      subscriber.disconnect(true)
    })
  })
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return
    try {
      const value = JSON.parse(message) as { session?: unknown; user?: unknown }
      if (typeof value.session === 'string') verifier.forgetSession(value.session)
      if (typeof value.user === 'string') verifier.forgetUser(value.user)
    } catch {
      // Not ours: ignored.
    }
  })
  const publish = (message: Record<string, string>): void => {
    publisher.publish(channel, JSON.stringify(message)).catch((err: unknown) =>
      log.warn({ err: (err as Error).message }, 'revocation could not be published; other instances see it within revocationCacheMs'))
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
      await Promise.all([publisher, subscriber].map(async (client) => {
        try { await client.quit() } catch { client.disconnect() }
      }))
    },
  }
}

// Key changes reach every instance's key cache. With Redis, the instance that changes a
// key publishes {"id"} on `<prefix>{tg}:keys:changed`; every instance (itself included)
// subscribes on a connection of its own (store/redis-subscription.ts) and drops the key
// from its cache. In embedded mode there is one instance, and the change is applied locally.
//
// Pub/sub delivers at most once. What covers a lost message:
// - the subscriber's connection is watched (a heartbeat PING finds a silent one); while
//   it is down the cache is untrusted and every lookup reads the store, and when it is
//   back the whole cache is dropped, since messages may have passed in between. On a
//   Redis Cluster the subscription lives on one node the client picks (and picks again
//   when that node goes), and PUBLISH reaches every node: there the heartbeat is a
//   message to this instance's own beat channel, and the feed counts as lost while its
//   beats do not come back;
// - a failed PUBLISH is retried a few times;
// - and whatever still slips through, the cache's TTL (1 s) ends.
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import { closeRedis, createRedisClient } from '../store/redis-client.ts'
import { redisNamespace } from '../store/redis-kit.ts'
import { publish, subscribe } from '../store/redis-subscription.ts'
import type { KeyCache } from './cache.ts'

export interface KeyEvents {
  /** Tells every instance that the key changed: this one at once, the others through Redis. Never throws. */
  changed(id: string): Promise<void>
  /** Resolves true once the feed is live, or false after timeoutMs. Never rejects. */
  ready(timeoutMs: number): Promise<boolean>
  close(): Promise<void>
}

export function keyChangesChannel(prefix: string): string {
  return `${redisNamespace(prefix)}keys:changed`
}

/** One instance: a change is applied to the local cache, nothing else needs telling. */
export function createLocalKeyEvents(cache: KeyCache): KeyEvents {
  cache.setTrusted(true)
  return {
    changed: async (id) => {
      cache.invalidate(id)
    },
    ready: async () => true,
    close: async () => undefined,
  }
}

export interface RedisKeyEventsOptions {
  /** A URL, or any of the three topologies. */
  readonly redis: RedisTarget | string
  readonly channel: string
  readonly commandTimeoutMs: number
  readonly cache: KeyCache
  readonly log: Logger
  /** How often the subscriber connection is checked (on a cluster: a beat is sent). */
  readonly heartbeatMs?: number
  /** Delays between PUBLISH attempts after a failure. */
  readonly publishRetryDelaysMs?: readonly number[]
  /** CLIENT LIST names of the two connections: `<name>-pub`, `<name>-sub`. */
  readonly connectionName?: string
}

const DEFAULT_HEARTBEAT_MS = 1000
const DEFAULT_PUBLISH_RETRY_DELAYS_MS = [50, 200, 500]

/** The message body; anything else on the channel clears the whole cache. */
export function encodeKeyChange(id: string): string {
  return JSON.stringify({ id })
}

export function decodeKeyChange(message: string): string | null {
  try {
    const value: unknown = JSON.parse(message)
    if (typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'string') return value.id
  } catch {
    // fall through
  }
  return null
}

export function createRedisKeyEvents(options: RedisKeyEventsOptions): KeyEvents {
  const { cache, log, channel } = options
  const retryDelays = options.publishRetryDelaysMs ?? DEFAULT_PUBLISH_RETRY_DELAYS_MS
  const name = options.connectionName ?? 'tollgate-keys'
  const target: RedisTarget =
    typeof options.redis === 'string' ? { kind: 'standalone', url: options.redis } : options.redis
  const publisher = createRedisClient(target, {
    commandTimeoutMs: options.commandTimeoutMs,
    name: `${name}-pub`,
    onError: (err) => log.debug({ err: err.message }, 'key change publisher: redis error'),
  })
  cache.setTrusted(false)
  let closed = false
  const feed = subscribe({
    redis: target,
    commandTimeoutMs: options.commandTimeoutMs,
    name: `${name}-sub`,
    channels: [channel],
    sharded: true,
    heartbeat: { everyMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS, publisher },
    onMessage: (_from, message) => {
      const id = decodeKeyChange(message)
      if (id === null) cache.clear()
      else cache.invalidate(id)
    },
    onLive: (live) => {
      cache.setTrusted(live)
      if (live) log.info({ channel }, 'key change feed live')
      else if (!closed) log.warn('key change feed lost: key lookups go to the store until it is back')
    },
    onError: (err) => log.debug({ err: err.message }, 'key change subscriber: redis error'),
    onSubscribeFailed: (err) => log.warn({ err: err.message }, 'key change feed: SUBSCRIBE failed; reconnecting'),
  })

  const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms).unref())

  return {
    async changed(id) {
      cache.invalidate(id)
      const message = encodeKeyChange(id)
      for (let attempt = 0; ; attempt++) {
        try {
          await publish(publisher, channel, message, { sharded: true })
          return
        } catch (err) {
          const delay = retryDelays[attempt]
          if (delay === undefined || closed) {
            log.warn(
              { keyId: id, err: (err as Error).message },
              'key change could not be published; other instances pick it up when their cache entry expires',
            )
            return
          }
          await sleep(delay)
        }
      }
    },

    ready: (timeoutMs) => feed.ready(timeoutMs),

    async close() {
      closed = true
      await Promise.all([closeRedis(publisher), feed.close()])
    },
  }
}

/** The feed main.ts wires: through Redis when the store is Redis (any topology), else local. */
export function createKeyEvents(
  redis: RedisTarget | undefined,
  store: { readonly keyPrefix: string; readonly commandTimeoutMs: number },
  cache: KeyCache,
  log: Logger,
): KeyEvents {
  if (redis === undefined) return createLocalKeyEvents(cache)
  return createRedisKeyEvents({
    redis,
    channel: keyChangesChannel(store.keyPrefix),
    commandTimeoutMs: store.commandTimeoutMs,
    cache,
    log,
  })
}

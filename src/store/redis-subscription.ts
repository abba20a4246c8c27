// One way to listen on Redis pub/sub, for every feed between instances (key changes,
// revocations, queue signals): a connection of its own (a subscribed connection can send
// nothing else), subscribed by hand on every (re)connect so that "live" means the SUBSCRIBE
// was answered, messages handed to the feed by channel, and one close.
//
// Pub/sub delivers at most once, and nothing is queued while the connection is down: each
// feed says what covers a lost message. What this adds is knowing when messages may have
// been lost (onLive(false)), and, with a heartbeat, finding a connection that went silent
// (a partition sends no RST). On a Redis Cluster the subscription lives on one node the
// client picks (and picks again when that node goes) while PUBLISH reaches every node:
// there the heartbeat is a message to a channel of this subscription's own, and the feed
// counts as lost while its beats do not come back.
// A leaf: it imports only the connection (redis-client.ts).
import { randomBytes } from 'node:crypto'
import type { RedisTarget } from '../config/redis-target.ts'
import { closeRedis, createRedisClient, isCluster, type RedisConnection } from './redis-client.ts'

/** On a cluster, the feed is lost when no beat came back for this many heartbeats. */
const MISSED_BEATS = 3

export interface SubscriptionOptions {
  /** Where the connection goes (any topology). */
  readonly redis: RedisTarget
  readonly commandTimeoutMs: number
  /** Its CLIENT LIST name. */
  readonly name: string
  readonly channels: readonly string[]
  /** A message on one of `channels`. */
  onMessage(channel: string, message: string): void
  /** The feed went live (SUBSCRIBE answered) or was lost; called on each change only. */
  onLive?(live: boolean): void
  /** Connection errors (refused, reset...): a lost connection also shows as onLive(false). */
  onError?(error: Error): void
  /** SUBSCRIBE was refused or timed out: the connection is dropped and dialled again. */
  onSubscribeFailed?(error: Error): void
  /**
   * Watch the connection every `everyMs`: PING it (a silent one is then dropped by the
   * client's socket timeout), or on a cluster publish a beat through `publisher`.
   */
  readonly heartbeat?: { readonly everyMs: number; readonly publisher: RedisConnection }
}

export interface Subscription {
  /** Whether messages arrive now. */
  readonly live: boolean
  /** Resolves true once the feed is live, or false after timeoutMs or on close. Never rejects. */
  ready(timeoutMs: number): Promise<boolean>
  /** Ends the connection (QUIT, or a plain disconnect when it does not answer). */
  close(): Promise<void>
}

export function subscribe(options: SubscriptionOptions): Subscription {
  const { channels, heartbeat } = options
  const connection = createRedisClient(options.redis, {
    commandTimeoutMs: options.commandTimeoutMs,
    name: options.name,
    autoResubscribe: false,
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  })
  const onCluster = isCluster(connection)
  const beats =
    heartbeat !== undefined && onCluster
      ? `${channels[0] ?? options.name}:beat:${randomBytes(6).toString('hex')}`
      : null
  let lastBeat = 0
  let live = false
  let closed = false
  let waiters: Array<(live: boolean) => void> = []

  const setLive = (value: boolean): void => {
    if (live === value) return
    live = value
    options.onLive?.(value)
    if (value) {
      for (const wake of waiters) wake(true)
      waiters = []
    }
  }

  connection.on('ready', () => {
    connection.subscribe(...channels, ...(beats === null ? [] : [beats])).then(
      () => {
        lastBeat = Date.now()
        setLive(true)
      },
      (error: unknown) => {
        options.onSubscribeFailed?.(error instanceof Error ? error : new Error(String(error)))
        connection.disconnect(true)
      },
    )
  })
  connection.on('close', () => setLive(false))
  connection.on('end', () => setLive(false))
  connection.on('message', (channel: string, message: string) => {
    if (channel === beats) {
      lastBeat = Date.now()
      // The cluster client found a new node for the subscription by itself.
      if (!live && !closed && connection.status === 'ready') setLive(true)
      return
    }
    if (channels.includes(channel)) options.onMessage(channel, message)
  })

  let timer: NodeJS.Timeout | undefined
  if (heartbeat !== undefined) {
    timer = setInterval(() => {
      if (beats === null) {
        if (connection.status === 'ready') connection.ping().catch(() => undefined)
        return
      }
      if (live && Date.now() - lastBeat > MISSED_BEATS * heartbeat.everyMs) setLive(false)
      heartbeat.publisher.publish(beats, '1').catch(() => undefined)
    }, heartbeat.everyMs)
    timer.unref()
  }

  return {
    get live() {
      return live
    },
    ready(timeoutMs) {
      if (closed) return Promise.resolve(false)
      if (live) return Promise.resolve(true)
      return new Promise((done) => {
        const wake = (value: boolean): void => {
          clearTimeout(late)
          done(value)
        }
        const late = setTimeout(() => {
          waiters = waiters.filter((w) => w !== wake)
          done(false)
        }, timeoutMs)
        late.unref()
        waiters.push(wake)
      })
    },
    async close() {
      closed = true
      clearInterval(timer)
      for (const wake of waiters) wake(false)
      waiters = []
      await closeRedis(connection)
      setLive(false)
    },
  }
}

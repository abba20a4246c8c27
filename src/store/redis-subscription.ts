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
//
// A feed whose publishers all send through publish() below may ask for sharded pub/sub
// (`sharded`): on a cluster of Redis 7 or later it then uses SSUBSCRIBE and SPUBLISH, so a
// message travels within the shard that serves its channel's slot instead of over the
// cluster bus to every node (classic PUBLISH reaches every node of the cluster, which
// costs every node more as nodes are added). Its channels must share one hash tag (they
// do: they live under the gateway's namespace). On a Redis without sharded pub/sub, and
// on a single server or Sentinel, it is classic pub/sub.
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
  /**
   * Sharded pub/sub on a cluster (SSUBSCRIBE); every publisher of these channels must then
   * send through publish(…, { sharded: true }). Default false.
   */
  readonly sharded?: boolean
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

/** Connections whose Redis answered SPUBLISH or SSUBSCRIBE with "unknown command" (older than 7). */
const classicOnly = new WeakSet<RedisConnection>()

const isUnknownCommand = (error: unknown): boolean => error instanceof Error && /unknown command/i.test(error.message)

/**
 * Publishes a message to a feed: SPUBLISH for a sharded feed on a cluster that has it,
 * PUBLISH otherwise (what subscribe() listens with for the same `sharded`). Resolves to the
 * number of subscribers that got it (on a cluster, those of the node that took it).
 */
export async function publish(
  publisher: RedisConnection,
  channel: string,
  message: string,
  options: { readonly sharded?: boolean } = {},
): Promise<number> {
  if (options.sharded === true && isCluster(publisher) && !classicOnly.has(publisher)) {
    try {
      return Number(await publisher.spublish(channel, message))
    } catch (error) {
      if (!isUnknownCommand(error)) throw error
      classicOnly.add(publisher)
    }
  }
  return publisher.publish(channel, message)
}

/** Whether a sharded publish() through `publisher` goes out as SPUBLISH (as far as it has been tried). */
export function publishesSharded(publisher: RedisConnection): boolean {
  return isCluster(publisher) && !classicOnly.has(publisher)
}

export function subscribe(options: SubscriptionOptions): Subscription {
  const { channels, heartbeat } = options
  const connection = createRedisClient(options.redis, {
    commandTimeoutMs: options.commandTimeoutMs,
    name: options.name,
    autoResubscribe: false,
    shardedPubSub: options.sharded === true,
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  })
  const onCluster = isCluster(connection)
  const sharded = (): boolean => options.sharded === true && onCluster && !classicOnly.has(connection)
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

  const all = [...channels, ...(beats === null ? [] : [beats])]
  const listen = async (): Promise<void> => {
    if (sharded()) {
      try {
        await connection.ssubscribe(...all)
        return
      } catch (error) {
        if (!isUnknownCommand(error)) throw error
        classicOnly.add(connection)
      }
    }
    await connection.subscribe(...all)
  }
  connection.on('ready', () => {
    listen().then(
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
  const onMessage = (channel: string, message: string): void => {
    if (channel === beats) {
      lastBeat = Date.now()
      // The cluster client found a new node for the subscription by itself.
      if (!live && !closed && connection.status === 'ready') setLive(true)
      return
    }
    if (channels.includes(channel)) options.onMessage(channel, message)
  }
  connection.on('message', onMessage)
  connection.on('smessage', onMessage)

  let timer: NodeJS.Timeout | undefined
  if (heartbeat !== undefined) {
    timer = setInterval(() => {
      if (beats === null) {
        if (connection.status === 'ready') connection.ping().catch(() => undefined)
        return
      }
      if (live && Date.now() - lastBeat > MISSED_BEATS * heartbeat.everyMs) setLive(false)
      publish(heartbeat.publisher, beats, '1', { sharded: sharded() }).catch(() => undefined)
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

// The one way Tollgate builds a Redis connection. A gateway on the request path must not
// wait on a dead Redis: commands are never queued while disconnected (they fail at once),
// every command has a deadline, and the client reconnects by itself in the background.
//
// Three topologies (config/redis-target.ts): one server by URL; a Redis Cluster, where
// the client follows the slots (MOVED, a failover) by itself; and a Sentinel set, where
// the client asks the sentinels for the master on every (re)connect. Every multi-key script and MULTI of Tollgate keeps
// its keys under one hash tag, so all three run the same commands.
import { createRequire } from 'node:module'
import type * as IORedis from 'ioredis'
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis'
import type { RedisTarget } from '../config/redis-target.ts'
import { corkTurns } from './redis-turn-writes.ts'

const requireCjs = createRequire(import.meta.url)

/**
 * ioredis, loaded when the first Redis connection is made: a gateway on the embedded
 * store never pays for it (about 15 MB of RSS).
 */
export function ioredis(): typeof IORedis {
  return requireCjs('ioredis') as typeof IORedis
}

/** Whether a connection is to a Redis Cluster. */
export function isCluster(redis: RedisConnection): redis is Cluster {
  return redis.isCluster
}

/** A connection to any of the three topologies: what the stores, limiter and queue hold. */
export type RedisConnection = Redis | Cluster

export interface RedisClientOptions {
  /** Longest wait for the reply to one command. */
  readonly commandTimeoutMs: number
  /** Shown by CLIENT LIST, to tell Tollgate's connections apart. */
  readonly name?: string
  /**
   * Open no connection until `connect()` (or the first store call or ping). Commands sent
   * by hand before that fail, since nothing is queued while disconnected.
   */
  readonly lazyConnect?: boolean
  /** Longest wait for the TCP (and TLS) connection; defaults to max(commandTimeoutMs, 1000). */
  readonly connectTimeoutMs?: number
  /** Cap of the reconnect backoff; defaults to 2000. */
  readonly maxReconnectDelayMs?: number
  /**
   * Connection errors (refused, reset, timed out) as they happen, e.g. to log them. They
   * also surface as rejected commands and a false ping, so they are dropped when unset.
   */
  readonly onError?: (error: Error) => void
  /**
   * Whether ioredis subscribes again by itself after a reconnect (its default). Off for a
   * subscriber that subscribes on every `ready` itself (redis-subscription.ts), so it knows
   * when the subscription is live. A cluster client keeps its own resubscription.
   */
  readonly autoResubscribe?: boolean
  /**
   * Send every command issued in one turn of the event loop in one write: on one server (or
   * Sentinel's master) by corking its socket for the turn (redis-turn-writes.ts corkTurns), on
   * a cluster by ioredis's auto-pipelining (one write per node). Only for a connection that
   * carries nothing with a tight deadline: the commands leave at the end of the turn, which is
   * late when a turn runs long. The settlements connection (main.ts openStores) uses it.
   */
  readonly autoPipelining?: boolean
  /**
   * On a cluster, keep a subscriber connection per master for sharded pub/sub (SSUBSCRIBE):
   * for the feeds of redis-subscription.ts that use it.
   */
  readonly shardedPubSub?: boolean
}

const FIRST_RECONNECT_DELAY_MS = 50
const DEFAULT_MAX_RECONNECT_DELAY_MS = 2000

/** Exponential backoff from 50 ms up to the cap, with jitter so instances don't reconnect in step. */
export function reconnectDelay(attempt: number, maxDelayMs: number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 16)
  const base = Math.min(FIRST_RECONNECT_DELAY_MS * 2 ** exponent, maxDelayMs)
  return Math.round(base / 2 + Math.random() * (base / 2))
}

function positiveMs(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0)
    throw new RangeError(`${name} must be a positive integer of milliseconds, got ${value}`)
  return value
}

/**
 * Replies that mean "no master for this right now" rather than "no": a cluster slot whose
 * master is being replaced (CLUSTERDOWN, TRYAGAIN), a former master now a replica
 * (READONLY), a replica cut off from its master (MASTERDOWN), a node still loading.
 */
const TRANSIENT_REPLY = /^(CLUSTERDOWN|TRYAGAIN|READONLY|MASTERDOWN|LOADING)\b/

/**
 * Whether a failed command means Redis is (for now) unreachable. ioredis reports a Redis it
 * cannot reach (refused, reset, timed out, not connected, retries exhausted) as a plain
 * Error, a MaxRetriesPerRequestError or, on a cluster, a ClusterAllFailedError; during a
 * failover the server itself answers with one of TRANSIENT_REPLY. Any other ReplyError
 * (Redis answered "no") and the adapters' own errors are not outages.
 */
export function isRedisUnavailable(error: unknown): error is Error {
  if (!(error instanceof Error)) return false
  if (error.name === 'Error' || error.name === 'MaxRetriesPerRequestError' || error.name === 'ClusterAllFailedError')
    return true
  return error.name === 'ReplyError' && TRANSIENT_REPLY.test(error.message)
}

/** A replica that was the master until a failover answers writes with READONLY: find the master again. */
function reconnectOnReadonly(error: Error): boolean | 1 | 2 {
  return error.message.startsWith('READONLY') ? 2 : false
}

export function createRedisClient(url: string, options: RedisClientOptions): Redis
export function createRedisClient(target: RedisTarget, options: RedisClientOptions): RedisConnection
export function createRedisClient(target: RedisTarget | string, options: RedisClientOptions): RedisConnection {
  const commandTimeout = positiveMs('commandTimeoutMs', options.commandTimeoutMs)
  const connectTimeout = positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? Math.max(commandTimeout, 1000))
  const maxDelay = positiveMs('maxReconnectDelayMs', options.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS)
  const per = {
    commandTimeout,
    connectTimeout,
    maxRetriesPerRequest: 1,
    // A command in flight when the connection drops fails; ioredis would otherwise send it
    // again after the reconnect, although Redis may have run it already (its reply was
    // lost): an INCR sent through a proxy cut mid-script ran twice. The callers decide
    // what a failed write means (the meter's writes carry ids for that; see keys/meter.ts).
    autoResendUnfulfilledCommands: false,
    // A socket silent for two command deadlines while replies are owed is dead (a
    // partition sends no RST): drop it and reconnect rather than time out forever.
    // Not for blocking commands (BLPOP...), which this client is not meant for.
    socketTimeout: commandTimeout * 2,
    // No auto-pipelining by default, although it halves the socket writes under load: it
    // sends a command only at the end of the event loop's turn, so a turn that runs long (an
    // overloaded machine) sends the limiter's admission late and its reply misses the
    // limiter's deadline, which then takes Redis for down and admits per instance
    // (test/limits/gateway.test.ts over-admitted so under a loaded full test run).
    // Settlements, which have no such deadline, go on a connection of their own that has it.
    ...(options.name === undefined ? {} : { connectionName: options.name }),
  } satisfies RedisOptions
  const retryStrategy = (attempt: number): number => reconnectDelay(attempt, maxDelay)
  const lazyConnect = options.lazyConnect ?? false
  const resubscribe = options.autoResubscribe === undefined ? {} : { autoResubscribe: options.autoResubscribe }
  const spec: RedisTarget = typeof target === 'string' ? { kind: 'standalone', url: target } : target
  const { Redis, Cluster } = ioredis()
  let redis: RedisConnection
  const single = { ...per, ...resubscribe, enableOfflineQueue: false, retryStrategy, lazyConnect }
  if (spec.kind !== 'cluster') {
    const server = spec.kind === 'standalone' ? new Redis(spec.url, single) : new Redis(sentinelOptions(spec, single))
    if (options.autoPipelining === true) corkTurns(server)
    redis = server
  } else {
    redis = new Cluster(
      spec.nodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions(spec, per, {
        lazyConnect,
        retryStrategy,
        connectTimeout,
        autoPipelining: options.autoPipelining === true,
        shardedPubSub: options.shardedPubSub === true,
      }),
    )
  }
  // Without a listener ioredis prints every connection error to stderr.
  const onError = options.onError ?? (() => {})
  redis.on('error', (error: Error) => onError(error))
  return redis
}

/** ioredis options of a Sentinel-backed connection to the master, on top of `base`. */
export function sentinelOptions(target: Extract<RedisTarget, { kind: 'sentinel' }>, base: RedisOptions): RedisOptions {
  return {
    ...base,
    sentinels: target.sentinels.map((s) => ({ host: s.host, port: s.port })),
    name: target.masterName,
    role: 'master',
    ...target.auth,
    ...(target.sentinelAuth.username === undefined ? {} : { sentinelUsername: target.sentinelAuth.username }),
    ...(target.sentinelAuth.password === undefined ? {} : { sentinelPassword: target.sentinelAuth.password }),
    ...(target.tls ? { tls: {} } : {}),
    ...(target.sentinelTls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    // Not ioredis's failoverDetector (+switch-master): in tests it left one client in three
    // ended for good after a failover (status "end", never reconnecting). A dead master
    // closes the connection anyway, and the reconnect asks the sentinels again.
    sentinelRetryStrategy: (attempt: number) => reconnectDelay(attempt, 2000),
    reconnectOnError: reconnectOnReadonly,
  }
}

/** ioredis options of a cluster client; `per` applies to each node's connection. */
export function clusterOptions(
  target: Extract<RedisTarget, { kind: 'cluster' }>,
  per: Omit<
    RedisOptions,
    'port' | 'host' | 'path' | 'sentinels' | 'retryStrategy' | 'enableOfflineQueue' | 'readOnly' | 'himportFieldsets'
  >,
  options: {
    readonly lazyConnect: boolean
    readonly retryStrategy: (attempt: number) => number
    readonly connectTimeout: number
    readonly enableOfflineQueue?: boolean
    readonly autoPipelining?: boolean
    readonly shardedPubSub?: boolean
  },
): ClusterOptions {
  return {
    ...(options.shardedPubSub === true ? { shardedSubscribers: true } : {}),
    ...(options.autoPipelining === true ? { enableAutoPipelining: true } : {}),
    redisOptions: { ...per, ...target.auth, ...(target.tls ? { tls: {} } : {}) },
    enableOfflineQueue: options.enableOfflineQueue ?? false,
    lazyConnect: options.lazyConnect,
    clusterRetryStrategy: options.retryStrategy,
    // While a master is replaced its slots answer nothing, then CLUSTERDOWN or MOVED: a
    // command is tried again every 100 ms within its deadline, and the slot map is read
    // again whenever a node fails, so the new master is found by itself.
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: options.connectTimeout,
    slotsRefreshInterval: 1000,
  }
}

/** Per connection that is opening, the one wait its callers share (one set of listeners, however many wait). */
const opening = new WeakMap<RedisConnection, Promise<void>>()

/**
 * Resolves once the client is ready. Waits for a connection that is opening (a lazy
 * client's first, or a reconnect already dialling), bounded by the connect and command
 * timeouts; rejects at once when none is (Redis down between retries, or closed). The calls
 * that wait on one opening share one wait: a burst of requests as a gateway connects adds
 * three listeners to the connection, not three each (Node warned of a leak past ten).
 */
export function whenReady(redis: RedisConnection): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve()
  // connect() moves the status to "connecting" synchronously; its own rejection is
  // reported through the events below.
  if (redis.status === 'wait') redis.connect().catch(() => {})
  if (redis.status !== 'connecting' && redis.status !== 'connect') {
    return Promise.reject(new Error(`Redis is not connected (${redis.status})`))
  }
  const waiting = opening.get(redis)
  if (waiting !== undefined) return waiting
  const own = isCluster(redis) ? (redis.options.redisOptions ?? {}) : redis.options
  const limitMs = (own.connectTimeout ?? 10_000) + (own.commandTimeout ?? 0)
  const wait = new Promise<void>((resolve, reject) => {
    const settle = (error?: Error): void => {
      clearTimeout(timer)
      redis.off('ready', onReady)
      redis.off('close', onClose)
      redis.off('end', onClose)
      // Settled: the next opening (a reconnect) gets a wait of its own.
      if (opening.get(redis) === wait) opening.delete(redis)
      if (error) reject(error)
      else resolve()
    }
    const onReady = (): void => settle()
    const onClose = (): void => settle(new Error('Redis connection closed while connecting'))
    const timer = setTimeout(() => settle(new Error(`Redis not ready after ${limitMs} ms`)), limitMs)
    redis.once('ready', onReady)
    redis.once('close', onClose)
    redis.once('end', onClose)
  })
  opening.set(redis, wait)
  return wait
}

/** Closes a connection: QUIT when it answers, a plain disconnect when it does not. */
export async function closeRedis(redis: RedisConnection): Promise<void> {
  if (redis.status === 'end') return
  try {
    await redis.quit()
  } catch {
    redis.disconnect()
  }
}

/**
 * True when Redis answers now. Never throws; bounded by the client's timeouts. With
 * `slotKey`, a read of that key instead of PING: on a cluster any node answers PING, but
 * only the master of the key's slot (hash tag) serves the data.
 */
export async function pingRedis(redis: RedisConnection, slotKey?: string): Promise<boolean> {
  try {
    await whenReady(redis)
    if (slotKey !== undefined) return typeof (await redis.exists(slotKey)) === 'number'
    return (await redis.ping()) === 'PONG'
  } catch {
    return false
  }
}

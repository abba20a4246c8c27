// The one way Tollgate builds a Redis connection. A gateway on the request path must not
// wait on a dead Redis: commands are never queued while disconnected (they fail at once),
// every command has a deadline, and the client reconnects by itself in the background.
import { Redis } from 'ioredis'

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
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer of milliseconds, got ${value}`)
  return value
}

export function createRedisClient(url: string, options: RedisClientOptions): Redis {
  const commandTimeout = positiveMs('commandTimeoutMs', options.commandTimeoutMs)
  const connectTimeout = positiveMs('connectTimeoutMs', options.connectTimeoutMs ?? Math.max(commandTimeout, 1000))
  const maxDelay = positiveMs('maxReconnectDelayMs', options.maxReconnectDelayMs ?? DEFAULT_MAX_RECONNECT_DELAY_MS)
  const redis = new Redis(url, {
    commandTimeout,
    connectTimeout,
    // One resend after a reconnect at most; with the offline queue off this rarely applies.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    // A socket silent for two command deadlines while replies are owed is dead (a
    // partition sends no RST): drop it and reconnect rather than time out forever.
    // Not for blocking commands (BLPOP...), which this client is not meant for.
    socketTimeout: commandTimeout * 2,
    retryStrategy: (attempt) => reconnectDelay(attempt, maxDelay),
    lazyConnect: options.lazyConnect ?? false,
    ...(options.name === undefined ? {} : { connectionName: options.name }),
  })
  // Without a listener ioredis prints every connection error to stderr.
  const onError = options.onError ?? (() => {})
  redis.on('error', (error: Error) => onError(error))
  return redis
}

/**
 * Resolves once the client is ready. Waits for a connection that is opening (a lazy
 * client's first, or a reconnect already dialling), bounded by the connect and command
 * timeouts; rejects at once when none is (Redis down between retries, or closed).
 */
export function whenReady(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve()
  // connect() moves the status to "connecting" synchronously; its own rejection is
  // reported through the events below.
  if (redis.status === 'wait') redis.connect().catch(() => {})
  if (redis.status !== 'connecting' && redis.status !== 'connect') {
    return Promise.reject(new Error(`Redis is not connected (${redis.status})`))
  }
  const limitMs = (redis.options.connectTimeout ?? 10_000) + (redis.options.commandTimeout ?? 0)
  return new Promise<void>((resolve, reject) => {
    const settle = (error?: Error): void => {
      clearTimeout(timer)
      redis.off('ready', onReady)
      redis.off('close', onClose)
      redis.off('end', onClose)
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
}

/** True when Redis answers PING now. Never throws; bounded by the client's timeouts. */
export async function pingRedis(redis: Redis): Promise<boolean> {
  try {
    await whenReady(redis)
    return (await redis.ping()) === 'PONG'
  } catch {
    return false
  }
}

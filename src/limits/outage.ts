// Whether the limiter's Redis answers: the outage state machine (up → down → probing → up)
// and the deadline on every call to Redis.
//
// Redis trouble is expected, so it is one small state machine rather than error handling
// spread over admit, check and peek. Each call is bounded by a short deadline; the first
// failure marks Redis down, logs the outage once and starts a probe; from then on no call
// is sent until the probe (or the client's reconnect) finds the counters answering again.
// What the limiter does meanwhile (insurance, fail-open, fail-closed) is its own business:
// this room only names the mode and keeps the tollgate_limiter_mode gauge.
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { LimiterHealth, LimiterMode } from './port.ts'
import type { RedisCounters } from './redis-counters.ts'

export type OnRedisDown = 'insurance' | 'fail-open' | 'fail-closed'

export const LIMITER_MODES: readonly LimiterMode[] = ['redis', 'memory', 'insurance', 'fail_open', 'fail_closed']

/** What the watch needs of a Redis connection (ioredis' Redis or Cluster): its status, its reconnects, closing it. */
export interface WatchedConnection {
  readonly status: string
  on(event: 'ready', listener: () => void): unknown
  off(event: 'ready', listener: () => void): unknown
  quit(): Promise<unknown>
  disconnect(): void
}

export interface RedisWatchOptions {
  readonly redis: WatchedConnection
  /** The probe reads these counters' own slot. */
  readonly counters: Pick<RedisCounters, 'reachable' | 'warm'>
  readonly onRedisDown: OnRedisDown
  /** Longest wait for Redis on the request path. */
  readonly timeoutMs: number
  /** How often to look for Redis again during an outage. */
  readonly probeIntervalMs: number
  readonly log: Logger
  readonly metrics?: Pick<Metrics, 'limiterMode'>
  /** Disconnect `redis` on close (it was made for the limiter). */
  readonly closeRedis?: boolean
  /** Each time Redis answers again after an outage. */
  readonly onBack?: () => void
}

export interface RedisWatch {
  /** 'redis' while it answers, else the stand-in onRedisDown names. */
  mode(): LimiterMode
  health(): LimiterHealth
  /** Runs work on Redis within the deadline; undefined when Redis is (or just turned out to be) unreachable. */
  call<T>(work: () => Promise<T>): Promise<T | undefined>
  /** Looks for Redis now, as the probe timer and a reconnect do. */
  probe(): Promise<void>
  /** Stops probing and listening; quits the connection if closeRedis. */
  close(): Promise<void>
}

/** Sets the mode gauge: 1 for the current mode, 0 for the others. */
export function publishMode(metrics: Pick<Metrics, 'limiterMode'> | undefined, current: LimiterMode): void {
  for (const m of LIMITER_MODES) metrics?.limiterMode.set({ mode: m }, m === current ? 1 : 0)
}

const STAND_IN: Readonly<Record<OnRedisDown, { readonly mode: LimiterMode; readonly meanwhile: string }>> = {
  insurance: { mode: 'insurance', meanwhile: 'enforcing limits per instance in memory' },
  'fail-open': { mode: 'fail_open', meanwhile: 'admitting every request' },
  'fail-closed': { mode: 'fail_closed', meanwhile: 'refusing requests' },
}

export function watchRedis(options: RedisWatchOptions): RedisWatch {
  const { redis, counters, onRedisDown, timeoutMs, log, metrics } = options
  const standIn = STAND_IN[onRedisDown]

  let up = redis.status === 'ready'
  /** Whether the current outage has been logged (at most once). */
  let announced = false
  let downSince: number | null = null
  let outages = 0
  let probe: NodeJS.Timeout | null = null
  let probing = false
  let closed = false

  const mode = (): LimiterMode => (up ? 'redis' : standIn.mode)

  function markDown(reason: unknown): void {
    const wasUp = up
    up = false
    if (wasUp || downSince === null) downSince = Date.now()
    if (!announced) {
      announced = true
      outages++
      log.warn(
        { err: reason instanceof Error ? reason.message : String(reason), onRedisDown, mode: mode() },
        `rate limiter cannot reach Redis: ${standIn.meanwhile} until it answers again`,
      )
    }
    publishMode(metrics, mode())
    startProbe()
  }

  function markUp(): void {
    if (up || closed) return
    const downMs = downSince === null ? 0 : Date.now() - downSince
    up = true
    if (announced) log.info({ downMs }, 'rate limiter back on Redis')
    announced = false
    downSince = null
    if (probe) clearInterval(probe)
    probe = null
    publishMode(metrics, mode())
    options.onBack?.()
  }

  /**
   * Bounds a Redis call by the deadline, whatever the client's own timeouts are. The
   * deadline runs from the end of the turn the call was made in, when its command has left
   * for sure (an admission's is sent with the rest of its turn's, redis-turn-writes.ts): a
   * turn that runs long on a starved machine is the gateway's delay, not Redis's. When it
   * fires, the refusal waits for setImmediate: a busy process may have let the timer expire
   * while the reply was already in the socket, and the I/O phase that runs first delivers
   * it. Only a reply that really is late counts as Redis trouble.
   */
  function bounded<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    let sent: NodeJS.Immediate | undefined
    const deadline = new Promise<never>((_, reject) => {
      sent = setImmediate(() => {
        timer = setTimeout(
          () => setImmediate(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`))),
          timeoutMs,
        )
      })
    })
    return Promise.race([work, deadline]).finally(() => {
      clearImmediate(sent)
      clearTimeout(timer)
    })
  }

  async function check(): Promise<void> {
    if (up || probing || closed) return
    probing = true
    try {
      // The probe asks the counters' masters themselves (RedisCounters.reachable): the
      // client's PING answers from any node of a cluster, even while a master is being
      // replaced. The scripts then go to every master once, before the calls that need them.
      if (redis.status === 'ready' && (await bounded(counters.reachable()))) {
        await bounded(counters.warm())
        markUp()
      } else {
        markDown(new Error(`Redis connection is ${redis.status}`))
      }
    } catch (error) {
      markDown(error)
    } finally {
      probing = false
    }
  }

  function startProbe(): void {
    if (probe || closed) return
    probe = setInterval(() => void check(), options.probeIntervalMs)
    probe.unref()
  }

  const onReady = (): void => void check()
  redis.on('ready', onReady)
  if (!up) startProbe()
  else void counters.warm().catch(() => undefined)
  publishMode(metrics, mode())

  return {
    mode,
    health() {
      return {
        mode: mode(),
        healthy: up,
        outages,
        downSince: !up && downSince !== null ? new Date(downSince).toISOString() : null,
      }
    },
    async call(work) {
      if (!up) return undefined
      if (redis.status !== 'ready') {
        markDown(new Error(`Redis connection is ${redis.status}`))
        return undefined
      }
      try {
        return await bounded(work())
      } catch (error) {
        markDown(error)
        return undefined
      }
    },
    probe: check,
    async close() {
      if (closed) return
      closed = true
      if (probe) clearInterval(probe)
      probe = null
      redis.off('ready', onReady)
      if (options.closeRedis) await bounded(redis.quit()).catch(() => redis.disconnect())
    },
  }
}

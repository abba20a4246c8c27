// The limiter: admits a call on its estimate, answers with x-ratelimit-* headers or a 429,
// and reconciles the reservation with the real usage when the call ends.
//
// Counters live in Redis when there is one (shared by every instance, one script call per
// admission), otherwise in this process. Redis trouble is expected: each call to it is
// bounded by a short deadline, the first failure switches the limiter to its configured
// stand-in (in-memory insurance, fail-open or fail-closed) and logs the outage once, and
// no later request touches Redis until a probe (or a reconnect) finds it answering again.
import { readFileSync } from 'node:fs'
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Usage } from '../backends/port.ts'
import { gatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import type { Counters, Subject } from './counters.ts'
import { adjustmentsFor, chargesOf, dimensionsOf, fits, type Adjustment, type Charge, type CounterState, type Dimension } from './dimensions.ts'
import { rateLimitHeaders } from './headers.ts'
import { memoryCounters } from './memory-counters.ts'
import type { Admission, AdmissionRequest, Limiter, LimiterHealth, LimiterMode, RateLimitHeaders } from './port.ts'
import { redisCounters, type RedisCounters } from './redis-counters.ts'
import { refusalOf } from './refusal.ts'

export type OnRedisDown = 'insurance' | 'fail-open' | 'fail-closed'

export const LIMITER_MODES: readonly LimiterMode[] = ['redis', 'memory', 'insurance', 'fail_open', 'fail_closed']

export interface LimiterOptions {
  /** Shared counters. Without it the counters live in this process (the embedded store). */
  readonly redis?: RedisConnection
  /** Prefix of the Redis keys (the gateway's store.keyPrefix). */
  readonly prefix?: string
  /** What admission does while Redis is unreachable. Default: insurance. */
  readonly onRedisDown?: OnRedisDown
  /** Length of the fixed window. Default 60 s: rpm and tpm are per minute. */
  readonly windowMs?: number
  /** Longest wait for Redis on the request path. Default 200 ms. */
  readonly redisTimeoutMs?: number
  /** How often to look for Redis again during an outage. Default 1 s. */
  readonly probeIntervalMs?: number
  /** Instances sharing the traffic: during an outage each enforces its share of the windowed limits. Default 1. */
  readonly insuranceInstances?: number
  readonly log: Logger
  readonly metrics?: Metrics
  /** Disconnect `redis` on close (it was made for the limiter). */
  readonly closeRedis?: boolean
  /**
   * Without Redis: a file that keeps the counters (the lifetime quotas above all) across
   * restarts. Read at creation, written every snapshotEveryMs and on close.
   */
  readonly snapshotFile?: string
  readonly snapshotEveryMs?: number
}

export interface ManagedLimiter extends Limiter {
  health(): LimiterHealth
}

const NO_ADMISSION: Admission = Object.freeze({ headers: Object.freeze({}), settle: async () => undefined })
/** Last quota counters seen in Redis, for the insurance limiter to start from. */
const QUOTA_MEMORY = 10_000

/** Usage from an upstream is trusted as far as being whole, non-negative numbers. */
function clean(usage: Usage): Usage {
  const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0)
  return { inputTokens: count(usage.inputTokens), outputTokens: count(usage.outputTokens) }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

export function createLimiter(options: LimiterOptions): ManagedLimiter {
  const { log, metrics, redis } = options
  const windowMs = options.windowMs ?? 60_000
  const timeoutMs = options.redisTimeoutMs ?? 200
  const probeMs = options.probeIntervalMs ?? 1000
  const onRedisDown = options.onRedisDown ?? 'insurance'
  const instances = Math.max(1, Math.floor(options.insuranceInstances ?? 1))
  const memory = memoryCounters(windowMs)
  const sharedRedis: RedisCounters | null = redis ? redisCounters(redis, options.prefix ?? 'tollgate:', windowMs) : null
  const shared: Counters | null = sharedRedis

  let up = redis?.status === 'ready'
  /** Whether the current outage has been logged (at most once). */
  let announced = false
  let downSince: number | null = null
  let outages = 0
  let probe: NodeJS.Timeout | null = null
  let probing = false
  let closed = false
  const lastQuota = new Map<string, number>()

  const subjectKey = (s: Subject): string => `${s.keyId}\u0000${s.model}`

  function mode(): LimiterMode {
    if (!shared) return 'memory'
    if (up) return 'redis'
    return onRedisDown === 'insurance' ? 'insurance' : onRedisDown === 'fail-open' ? 'fail_open' : 'fail_closed'
  }

  function publishMode(): void {
    const current = mode()
    for (const m of LIMITER_MODES) metrics?.limiterMode.set({ mode: m }, m === current ? 1 : 0)
  }

  function markDown(reason: unknown): void {
    const wasUp = up
    up = false
    if (wasUp || downSince === null) downSince = Date.now()
    if (!announced) {
      announced = true
      outages++
      log.warn({ err: describe(reason), onRedisDown, mode: mode() },
        `rate limiter cannot reach Redis: ${onRedisDown === 'insurance' ? 'enforcing limits per instance in memory' : onRedisDown === 'fail-open' ? 'admitting every request' : 'refusing requests'} until it answers again`)
    }
    publishMode()
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
    publishMode()
    if (onRedisDown === 'insurance') void handOverQuota()
  }

  /**
   * Bounds a Redis call by the deadline, whatever the client's own timeouts are. When the
   * deadline fires, the refusal waits for setImmediate: a busy process may have let the
   * timer expire while the reply was already in the socket, and the I/O phase that runs
   * first delivers it. Only a reply that really is late counts as Redis trouble.
   */
  function bounded<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => setImmediate(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`))), timeoutMs)
    })
    return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
  }

  /** Runs fn on Redis; undefined when Redis is (or just turned out to be) unreachable. */
  async function viaRedis<T>(fn: (counters: Counters) => Promise<T>): Promise<T | undefined> {
    if (!shared || !redis || !up) return undefined
    if (redis.status !== 'ready') {
      markDown(new Error(`Redis connection is ${redis.status}`))
      return undefined
    }
    try {
      return await bounded(fn(shared))
    } catch (error) {
      markDown(error)
      return undefined
    }
  }

  async function check(): Promise<void> {
    if (!redis || up || probing || closed) return
    probing = true
    try {
      // The probe reads the counters' own slot rather than PING: on a cluster any node
      // answers PING, even while the master of that slot is being replaced. The scripts
      // then go to that master in full once, before the calls that need them.
      if (redis.status === 'ready' && sharedRedis && (await bounded(sharedRedis.reachable()))) {
        await bounded(sharedRedis.warm())
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
    if (probe || closed || !redis) return
    probe = setInterval(() => void check(), probeMs)
    probe.unref()
  }

  /** Tokens counted against quotas in memory during the outage go to Redis once it is back. */
  async function handOverQuota(): Promise<void> {
    for (const { subject, name, used } of memory.drainLifetime()) {
      await viaRedis((c) => c.settle(subject, [{ name, windowed: false, delta: used, reserved: 0, expiresAt: 0 }]))
    }
  }

  const snapshotFile = redis ? undefined : options.snapshotFile
  let snapshotTimer: NodeJS.Timeout | null = null
  async function saveSnapshot(file: string): Promise<void> {
    try {
      await mkdir(dirname(file), { recursive: true, mode: 0o700 })
      await writeFile(`${file}.tmp`, JSON.stringify(memory.snapshot()), { mode: 0o600 })
      await rename(`${file}.tmp`, file)
    } catch (error) {
      log.warn({ err: describe(error), file }, 'rate limiter could not save its counters')
    }
  }
  if (snapshotFile !== undefined) {
    try {
      memory.restore(JSON.parse(readFileSync(snapshotFile, 'utf8')))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err: describe(error), file: snapshotFile }, 'rate limiter could not read its saved counters; starting empty')
    }
    snapshotTimer = setInterval(() => void saveSnapshot(snapshotFile), options.snapshotEveryMs ?? 10_000)
    snapshotTimer.unref()
  }

  const onReady = (): void => void check()
  if (redis) {
    redis.on('ready', onReady)
    if (!up) startProbe()
    else void sharedRedis?.warm().catch(() => undefined)
  }
  publishMode()

  function remember(subject: Subject, charges: readonly Charge[], states: readonly { used: number }[]): void {
    const i = charges.findIndex((c) => c.name === 'quota')
    if (i === -1) return
    const key = subjectKey(subject)
    lastQuota.delete(key)
    lastQuota.set(key, states[i]?.used ?? 0)
    if (lastQuota.size > QUOTA_MEMORY) lastQuota.delete(lastQuota.keys().next().value ?? '')
  }

  function rememberSettled(subject: Subject, adjustments: readonly Adjustment[]): void {
    const quota = adjustments.find((a) => a.name === 'quota')
    const key = subjectKey(subject)
    const known = lastQuota.get(key)
    if (quota && known !== undefined) lastQuota.set(key, Math.max(0, known + quota.delta))
  }

  /** During an outage each instance enforces its share; the quota starts from what Redis last said. */
  function insurance<D extends Dimension>(subject: Subject, dimensions: readonly D[]): D[] {
    return dimensions.map((d) => {
      if (d.windowed) return { ...d, limit: Math.max(1, Math.floor(d.limit / instances)) }
      return { ...d, limit: Math.max(0, d.limit - (lastQuota.get(subjectKey(subject)) ?? 0)) }
    })
  }

  function conclude(
    request: AdmissionRequest, counters: Counters, subject: Subject, charges: readonly Charge[],
    result: { admitted: boolean; states: readonly { used: number; resetMs: number; expiresAt: number }[] },
  ): Admission {
    const headers = rateLimitHeaders(charges, result.states)
    if (!result.admitted) {
      const refusal = refusalOf(request.model, charges, result.states, windowMs, headers, request.reservationNote)
      metrics?.rateLimited.inc({ model: request.model, tier: request.tier, reason: refusal.reason })
      throw refusal.error
    }
    let settled = false
    return {
      headers,
      async settle(usage) {
        if (settled) return
        settled = true
        const adjustments = adjustmentsFor(charges, result.states, clean(usage))
        if (adjustments.length === 0) return
        try {
          // A reservation made in Redis stays there if Redis is away now: the window
          // it was made in overcounts until it resets, which errs on the safe side.
          if (counters === shared) {
            if ((await viaRedis((c) => c.settle(subject, adjustments).then(() => true))) === true) rememberSettled(subject, adjustments)
          } else {
            await counters.settle(subject, adjustments)
          }
        } catch (error) {
          log.warn({ err: describe(error), keyId: subject.keyId, model: subject.model }, 'rate limiter could not reconcile a call')
        }
      },
    }
  }

  /** Throws the refusal when a charge could never fit, whatever the window holds; else the headers. */
  function never(request: AdmissionRequest, charges: readonly Charge[], states: readonly CounterState[]): RateLimitHeaders {
    const headers = rateLimitHeaders(charges, states)
    const hopeless = charges.some((c, i) => (c.windowed ? c.cost > c.limit : !fits(c, states[i]?.used ?? 0)))
    if (!hopeless) return headers
    const refusal = refusalOf(request.model, charges, states, windowMs, headers)
    metrics?.rateLimited.inc({ model: request.model, tier: request.tier, reason: refusal.reason })
    throw refusal.error
  }

  return {
    async admit(request) {
      const charges = chargesOf(request.limits, clean(request.estimate))
      if (charges.length === 0) return NO_ADMISSION
      const subject: Subject = { keyId: request.keyId, model: request.model }
      if (shared) {
        const result = await viaRedis((c) => c.admit(subject, charges))
        if (result) {
          remember(subject, charges, result.states)
          return conclude(request, shared, subject, charges, result)
        }
        if (onRedisDown === 'fail-open') return { headers: rateLimitHeaders(charges), settle: async () => undefined }
        if (onRedisDown === 'fail-closed') {
          throw gatewayError('store_unavailable', {
            message: 'Rate limits cannot be checked right now (the limiter cannot reach its store). Please try again shortly.',
            headers: { 'retry-after': '1' },
          })
        }
        const local = insurance(subject, charges)
        return conclude(request, memory, subject, local, await memory.admit(subject, local))
      }
      return conclude(request, memory, subject, charges, await memory.admit(subject, charges))
    },

    async check(request) {
      const charges = chargesOf(request.limits, clean(request.estimate))
      if (charges.length === 0) return {}
      const subject: Subject = { keyId: request.keyId, model: request.model }
      if (shared) {
        const states = await viaRedis((c) => c.peek(subject, charges))
        if (states) return never(request, charges, states)
        if (onRedisDown !== 'insurance') return rateLimitHeaders(charges)
        const local = insurance(subject, charges)
        return never(request, local, await memory.peek(subject, local))
      }
      return never(request, charges, await memory.peek(subject, charges))
    },

    async peek(request): Promise<RateLimitHeaders> {
      const dimensions = dimensionsOf(request.limits)
      if (dimensions.length === 0) return {}
      const subject: Subject = { keyId: request.keyId, model: request.model }
      if (shared) {
        const states = await viaRedis((c) => c.peek(subject, dimensions))
        if (states) return rateLimitHeaders(dimensions, states)
        if (onRedisDown !== 'insurance') return rateLimitHeaders(dimensions)
        const local = insurance(subject, dimensions)
        return rateLimitHeaders(local, await memory.peek(subject, local))
      }
      return rateLimitHeaders(dimensions, await memory.peek(subject, dimensions))
    },

    health() {
      const current = mode()
      return {
        mode: current,
        healthy: current === 'redis' || current === 'memory',
        outages,
        downSince: !up && downSince !== null && shared ? new Date(downSince).toISOString() : null,
      }
    },

    async close() {
      if (closed) return
      closed = true
      if (probe) clearInterval(probe)
      probe = null
      if (snapshotTimer) clearInterval(snapshotTimer)
      if (snapshotFile !== undefined) await saveSnapshot(snapshotFile)
      if (redis) {
        redis.off('ready', onReady)
        if (options.closeRedis) {
          await bounded(redis.quit()).catch(() => redis.disconnect())
        }
      }
    },
  }
}

// The limiter: admits a call on its estimate, answers with x-ratelimit-* headers or a 429,
// and reconciles the reservation with the real usage when the call ends.
//
// Counters live in Redis when there is one (shared by every instance, one script call per
// admission), otherwise in this process. This room composes the others: whether Redis
// answers is outage.ts, what an instance enforces alone while it does not is insurance.ts,
// keeping the in-process counters across restarts is snapshot.ts. Here admit, check and
// peek pick the counters and turn their states into headers or a refusal.
import type { Usage } from '../backends/port.ts'
import { gatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import type { Counters, Subject } from './counters.ts'
import { adjustmentsFor, chargesOf, dimensionsOf, fits, type Charge, type CounterState } from './dimensions.ts'
import { rateLimitHeaders } from './headers.ts'
import { createInsurance, handOverQuota } from './insurance.ts'
import { memoryCounters } from './memory-counters.ts'
import { publishMode, watchRedis, type OnRedisDown, type RedisWatch } from './outage.ts'
import type { Admission, AdmissionRequest, Limiter, LimiterHealth, RateLimitHeaders } from './port.ts'
import { redisCounters } from './redis-counters.ts'
import { refusalOf } from './refusal.ts'
import { keepSnapshots, type Snapshots } from './snapshot.ts'

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

/** Usage from an upstream is trusted as far as being whole, non-negative numbers. */
function clean(usage: Usage): Usage {
  const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0)
  return { inputTokens: count(usage.inputTokens), outputTokens: count(usage.outputTokens) }
}

export function createLimiter(options: LimiterOptions): ManagedLimiter {
  const { log, metrics, redis } = options
  const windowMs = options.windowMs ?? 60_000
  const onRedisDown = options.onRedisDown ?? 'insurance'
  const memory = memoryCounters(windowMs)
  const insurance = createInsurance(Math.max(1, Math.floor(options.insuranceInstances ?? 1)))
  const shared = redis ? redisCounters(redis, options.prefix ?? 'tollgate:', windowMs) : null

  const watch: RedisWatch | null =
    redis && shared
      ? watchRedis({
          redis,
          counters: shared,
          onRedisDown,
          timeoutMs: options.redisTimeoutMs ?? 200,
          probeIntervalMs: options.probeIntervalMs ?? 1000,
          log,
          metrics,
          closeRedis: options.closeRedis,
          // Tokens counted against quotas in memory during the outage go to Redis once it is back.
          onBack:
            onRedisDown === 'insurance'
              ? () => void handOverQuota(memory, (s, a) => viaRedis((c) => c.settle(s, a)))
              : undefined,
        })
      : null
  if (!watch) publishMode(metrics, 'memory')

  /** Runs fn on Redis; undefined when Redis is (or just turned out to be) unreachable. */
  function viaRedis<T>(fn: (counters: Counters) => Promise<T>): Promise<T | undefined> {
    return shared && watch ? watch.call(() => fn(shared)) : Promise.resolve(undefined)
  }

  const snapshots: Snapshots | null =
    !redis && options.snapshotFile !== undefined
      ? keepSnapshots(memory, { file: options.snapshotFile, everyMs: options.snapshotEveryMs ?? 10_000, log })
      : null
  let closed = false

  function conclude(
    request: AdmissionRequest,
    counters: Counters,
    subject: Subject,
    charges: readonly Charge[],
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
            if ((await viaRedis((c) => c.settle(subject, adjustments).then(() => true))) === true)
              insurance.settled(subject, adjustments)
          } else {
            await counters.settle(subject, adjustments)
          }
        } catch (error) {
          log.warn(
            { err: error instanceof Error ? error.message : String(error), keyId: subject.keyId, model: subject.model },
            'rate limiter could not reconcile a call',
          )
        }
      },
    }
  }

  /** Throws the refusal when a charge could never fit, whatever the window holds; else the headers. */
  function never(
    request: AdmissionRequest,
    charges: readonly Charge[],
    states: readonly CounterState[],
  ): RateLimitHeaders {
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
          insurance.remember(subject, charges, result.states)
          return conclude(request, shared, subject, charges, result)
        }
        if (onRedisDown === 'fail-open') return { headers: rateLimitHeaders(charges), settle: async () => undefined }
        if (onRedisDown === 'fail-closed') {
          throw gatewayError('store_unavailable', {
            message:
              'Rate limits cannot be checked right now (the limiter cannot reach its store). Please try again shortly.',
            headers: { 'retry-after': '1' },
          })
        }
        const local = insurance.share(subject, charges)
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
        const local = insurance.share(subject, charges)
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
        const local = insurance.share(subject, dimensions)
        return rateLimitHeaders(local, await memory.peek(subject, local))
      }
      return rateLimitHeaders(dimensions, await memory.peek(subject, dimensions))
    },

    health() {
      return watch ? watch.health() : { mode: 'memory', healthy: true, outages: 0, downSince: null }
    },

    async close() {
      if (closed) return
      closed = true
      await snapshots?.close()
      await watch?.close()
    },
  }
}

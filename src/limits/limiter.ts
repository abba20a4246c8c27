// The limiter: admits a call on its estimate, answers with x-ratelimit-* headers or a 429,
// and reconciles the reservation with the real usage when the call ends.
//
// Counters live in Redis when there is one (shared by every instance, one script call per
// admission), otherwise in this process. This room composes the others: whether Redis
// answers is outage.ts, what an instance enforces alone while it does not is insurance.ts,
// keeping the in-process counters across restarts is snapshot.ts. Here admit, check and
// peek pick the counters and turn their states into headers or a refusal.
import type { Usage } from '../backends/port.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { BudgetSpec, OnBudgetThreshold } from '../budgets/port.ts'
import { callCost, DEFAULT_CURRENCY, reservedCostNanos, toUnits } from '../keys/money.ts'
import {
  budgetChargesOf,
  budgetExhausted,
  budgetFits,
  EMPTY_BUDGET,
  type BudgetCharge,
  type BudgetCrossing,
  type BudgetState,
} from './budget-charges.ts'
import { gatewayError } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import type { Counters, HeldCall, Subject } from './counters.ts'
import { adjustmentsFor, chargesOf, dimensionsOf, fits, type Charge, type CounterState } from './dimensions.ts'
import { rateLimitHeaders } from './headers.ts'
import { DEFAULT_LEASE_MS, holdIds, keepLeases } from './holds.ts'
import { createInsurance, handOverQuota } from './insurance.ts'
import { memoryCounters } from './memory-counters.ts'
import { openBudgetLedger } from './budget-ledger.ts'
import type { TurnCommit } from '../store/sqlite.ts'
import { publishMode, watchRedis, type OnRedisDown, type RedisWatch } from './outage.ts'
import type { Admission, AdmissionRequest, BudgetStatus, Limiter, LimiterHealth, RateLimitHeaders } from './port.ts'
import { redisCounters } from './redis-counters.ts'
import { budgetRefusalOf, refusalOf } from './refusal.ts'
import { keepSnapshots, type Snapshots } from './snapshot.ts'

export interface LimiterOptions {
  /** Shared counters. Without it the counters live in this process (the embedded store). */
  readonly redis?: RedisConnection
  /**
   * The connection settles go on (the gateway's settlements connection, which sends the
   * writes of one event-loop turn together); default `redis`. Not closed by the limiter.
   */
  readonly settlements?: RedisConnection
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
  /** Embedded mode: the store's group commit (tollgate.db) that every settle's budget spend joins (budget-ledger.ts). */
  readonly budgetLedgerOn?: TurnCommit
  /** The budgets that apply to a call (docs/budgets.md); absent: none. */
  readonly budgets?: Pick<BudgetBook, 'applicable'>
  /** The plans' currency, for budget messages and events (a function: the plans in force, which a reload replaces). */
  readonly currency?: string | (() => string)
  /** Told once per threshold a budget's spend reaches in a period (the events outbox). Default: nothing. */
  readonly onBudgetThreshold?: OnBudgetThreshold
  /** The clock budget periods are read on (tests move it). Default Date.now. */
  readonly now?: () => number
  /**
   * On Redis: how long a call's budget hold outlives this instance's last renewal of it
   * (renewed every third of it while the call runs; an instance that dies lets its holds
   * lapse this much later). Default 30 s.
   */
  readonly holdLeaseMs?: number
}

export interface ManagedLimiter extends Limiter {
  health(): LimiterHealth
}

const NO_ADMISSION: Admission = Object.freeze({ headers: Object.freeze({}), settle: async () => undefined })

/** Usage from an upstream is trusted as far as being whole, non-negative numbers. */
function clean(usage: Usage): Usage {
  const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0)
  const inputTokens = count(usage.inputTokens)
  const read = Math.min(count(usage.cacheReadTokens ?? 0), inputTokens)
  const write = Math.min(count(usage.cacheWriteTokens ?? 0), inputTokens - read)
  return { inputTokens, outputTokens: count(usage.outputTokens), cacheReadTokens: read, cacheWriteTokens: write }
}

/** What the windowed limits reserve: a learned output reservation when there is one (port.ts rateEstimate). */
const rateOf = (request: AdmissionRequest, estimate: Usage): Usage =>
  request.rateEstimate === undefined ? estimate : clean(request.rateEstimate)

/** Whose counters a call is on: a batch's line on its key's batch pool (pools.ts). */
const subjectOf = (request: Pick<AdmissionRequest, 'keyId' | 'model' | 'owner' | 'batch'>): Subject => ({
  keyId: request.keyId,
  model: request.model,
  owner: request.owner,
  ...(request.batch === true ? { pool: 'batch' as const } : {}),
})

export function createLimiter(options: LimiterOptions): ManagedLimiter {
  const { log, metrics, redis } = options
  const now = options.now ?? Date.now
  const currencyOption = options.currency ?? DEFAULT_CURRENCY
  const currencyOf = typeof currencyOption === 'function' ? currencyOption : () => currencyOption
  const onThreshold = options.onBudgetThreshold
  const windowMs = options.windowMs ?? 60_000
  const onRedisDown = options.onRedisDown ?? 'insurance'
  const ledger = !redis && options.budgetLedgerOn !== undefined ? openBudgetLedger(options.budgetLedgerOn) : null
  const memory = memoryCounters(windowMs, ledger?.journal)
  const insurance = createInsurance(Math.max(1, Math.floor(options.insuranceInstances ?? 1)))
  const leaseMs = options.holdLeaseMs ?? DEFAULT_LEASE_MS
  const shared = redis
    ? redisCounters(redis, options.prefix ?? 'tollgate:', windowMs, options.settlements, leaseMs)
    : null
  const nextHold = holdIds()
  // The holds of calls admitted on Redis and still running here: renewed until they settle.
  const leases = shared
    ? keepLeases<HeldCall>({
        everyMs: Math.max(Math.floor(leaseMs / 3), 1),
        // Not through the watch: a renewal is not on any call's path, and a slow one must not count as an outage.
        renew: async (held) => (watch?.health().healthy === false ? undefined : shared.renew(held)),
        log,
      })
    : null

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
  // Over the snapshot: the ledger kept every settle since, the snapshot only those before its last write
  // (each counter at the larger of the two: a commit the ledger failed still counts from the snapshot).
  if (ledger !== null) memory.restore({ version: 1, budgets: ledger.read() })
  let closed = false

  function conclude(
    request: AdmissionRequest,
    counters: Counters,
    subject: Subject,
    charges: readonly Charge[],
    result: {
      admitted: boolean
      states: readonly { used: number; resetMs: number; expiresAt: number }[]
      budgets: readonly BudgetState[]
    },
    budgets: readonly BudgetCharge[],
    hold: string,
  ): Admission {
    const headers = rateLimitHeaders(charges, result.states)
    if (!result.admitted) {
      const budgetRefusal = refuseOnBudget(request, budgets, result.budgets, headers, charges, result.states)
      if (budgetRefusal) throw budgetRefusal
      const refusal = refusalOf(request.model, charges, result.states, windowMs, headers, request.reservationNote)
      metrics?.rateLimited.inc({ model: request.model, tier: request.tier, reason: refusal.reason })
      throw refusal.error
    }
    let settled = false
    // What the call holds until it settles: its budgets' estimate, and its quota's.
    const quota = charges.find((c) => !c.windowed)?.cost ?? 0
    const held: HeldCall = { subject, hold, quota, budgets }
    const renewed = counters === shared && (budgets.length > 0 || quota > 0) ? leases : null
    renewed?.keep(held)
    return {
      headers,
      async settle(usage, how) {
        if (settled) return
        settled = true
        // Before the settle is sent: a renewal sent after it would hold the budget again.
        renewed?.drop(held)
        const real = clean(usage)
        const adjustments = adjustmentsFor(charges, result.states, real, how?.withdrawn === true, hold)
        // The real cost: cache reads and writes at their prices (the hold assumed the dearest).
        const cost = budgets.length === 0 ? 0 : callCost(request.limits, request.model, real).totalNanos
        const budgetSettles = budgets.map((charge) => ({ charge, real: cost }))
        if (adjustments.length === 0 && budgetSettles.length === 0) return
        try {
          // A reservation made in Redis stays there if Redis is away now: the window
          // it was made in overcounts until it resets, which errs on the safe side.
          let crossings: BudgetCrossing[] | undefined
          if (counters === shared) {
            crossings = await viaRedis((c) => c.settle(subject, adjustments, budgetSettles, how?.once))
            if (crossings !== undefined) insurance.settled(subject, adjustments)
          } else {
            crossings = await counters.settle(subject, adjustments, budgetSettles, how?.once)
          }
          if (crossings !== undefined) report(budgets, crossings)
        } catch (error) {
          log.warn(
            { err: error instanceof Error ? error.message : String(error), keyId: subject.keyId, model: subject.model },
            'rate limiter could not reconcile a call',
          )
        }
      },
    }
  }

  /** The budget refusal, when a budget refused (an exhausted one before a rate limit; a held one after). */
  function refuseOnBudget(
    request: AdmissionRequest,
    budgets: readonly BudgetCharge[],
    found: readonly BudgetState[],
    headers: RateLimitHeaders,
    charges: readonly Charge[],
    states: readonly CounterState[],
  ): Error | undefined {
    const at = budgets.findIndex((b, j) => !budgetFits(b, found[j] ?? EMPTY_BUDGET))
    const charge = budgets[at]
    if (charge === undefined) return undefined
    const state = found[at] ?? EMPTY_BUDGET
    const rateLimited = charges.some((c, i) => !fits(c, states[i]?.used ?? 0))
    if (rateLimited && !budgets.some((b, j) => budgetExhausted(b, found[j] ?? EMPTY_BUDGET))) return undefined
    const exhausted = budgets.findIndex((b, j) => budgetExhausted(b, found[j] ?? EMPTY_BUDGET))
    const which = budgets[exhausted] ?? charge
    metrics?.rateLimited.inc({
      model: request.model,
      tier: request.tier,
      reason: exhausted === -1 ? 'budget_reserved' : 'budget',
    })
    return budgetRefusalOf(which, found[exhausted] ?? state, currencyOf(), now(), headers)
  }

  /** Tells the hook of each threshold crossed; a hook that fails is logged, never the call's business. */
  function report(budgets: readonly BudgetCharge[], crossings: readonly BudgetCrossing[]): void {
    if (onThreshold === undefined) return
    for (const crossing of crossings) {
      const charge = budgets[crossing.index]
      if (charge === undefined) continue
      const { spec, span } = charge
      const event = {
        scope: spec.scope,
        id: spec.id,
        period: spec.period,
        periodStart: new Date(span.start).toISOString(),
        threshold: crossing.threshold,
        spent: toUnits(crossing.spent),
        amount: toUnits(spec.amountNanos),
        currency: currencyOf(),
      }
      void Promise.resolve()
        .then(() => onThreshold(event))
        .catch((error: unknown) =>
          log.warn(
            { err: error instanceof Error ? error.message : String(error), scope: spec.scope },
            'budget threshold hook failed',
          ),
        )
    }
  }

  /** The budget charges of a call at its estimated cost (none without a book or an owner). */
  function budgetCharges(request: AdmissionRequest, estimate: Usage, hold = ''): BudgetCharge[] {
    if (options.budgets === undefined || request.owner === undefined) return []
    const specs = options.budgets.applicable({ keyId: request.keyId, owner: request.owner, tier: request.tier })
    if (specs.length === 0) return []
    const cost = reservedCostNanos(request.limits, request.model, estimate.inputTokens, estimate.outputTokens)
    return budgetChargesOf(specs, cost, now(), { keyId: request.keyId, owner: request.owner }, undefined, hold)
  }

  /** Budgets cannot be read while Redis is away (the admin views; check() under fail-closed). */
  const budgetsUnavailable = (): Error =>
    gatewayError('budget_unavailable', {
      message: 'Budgets cannot be checked right now (the limiter cannot reach its store). Please try again shortly.',
      headers: { 'retry-after': '1' },
    })

  async function statusOf(specs: readonly BudgetSpec[], owners?: ReadonlyMap<string, string>): Promise<BudgetStatus[]> {
    if (specs.length === 0) return []
    const at = now()
    const charges = budgetChargesOf(specs, 0, at, undefined, owners)
    const states = shared ? await viaRedis((c) => c.peekBudgets(charges)) : await memory.peekBudgets(charges)
    if (states === undefined) throw budgetsUnavailable()
    return charges.map((c, j) => {
      const s = states[j] ?? EMPTY_BUDGET
      const finite = Number.isFinite(c.span.end)
      return {
        scope: c.spec.scope,
        id: c.spec.id,
        origin: c.spec.origin,
        period: c.spec.period,
        time_zone: c.spec.timeZone,
        amount: toUnits(c.spec.amountNanos),
        spent: toUnits(s.spent),
        reserved: toUnits(s.held),
        remaining: toUnits(Math.max(c.spec.amountNanos - s.spent - s.held, 0)),
        currency: currencyOf(),
        period_start: finite ? new Date(c.span.start).toISOString() : null,
        resets_at: finite ? new Date(c.span.end).toISOString() : null,
        thresholds: c.spec.thresholds,
      }
    })
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
      const estimate = clean(request.estimate)
      const charges = chargesOf(request.limits, estimate, rateOf(request, estimate))
      const hold = nextHold()
      const budgets = budgetCharges(request, estimate, hold)
      if (charges.length === 0 && budgets.length === 0) return NO_ADMISSION
      const subject = subjectOf(request)
      if (shared) {
        const result = await viaRedis((c) => c.admit(subject, charges, budgets, hold))
        if (result) {
          insurance.remember(subject, charges, result.states)
          return conclude(request, shared, subject, charges, result, budgets, hold)
        }
        if (onRedisDown === 'fail-open') return { headers: rateLimitHeaders(charges), settle: async () => undefined }
        // Insurance keeps each instance's share of the rate limits; a budget cannot be shared out
        // that way, so it is not checked until Redis answers again (docs/budgets.md). Fail-closed refuses.
        if (onRedisDown === 'fail-closed') {
          throw gatewayError('store_unavailable', {
            message:
              'Rate limits cannot be checked right now (the limiter cannot reach its store). Please try again shortly.',
            headers: { 'retry-after': '1' },
          })
        }
        const local = insurance.share(subject, charges)
        return conclude(request, memory, subject, local, await memory.admit(subject, local, [], hold), [], hold)
      }
      return conclude(
        request,
        memory,
        subject,
        charges,
        await memory.admit(subject, charges, budgets, hold),
        budgets,
        hold,
      )
    },

    async check(request) {
      const estimate = clean(request.estimate)
      const charges = chargesOf(request.limits, estimate, rateOf(request, estimate))
      const budgets = budgetCharges(request, estimate)
      if (budgets.length > 0) {
        // A spent budget refuses at once (the queue does not wait for a period's end).
        const found = shared ? await viaRedis((c) => c.peekBudgets(budgets)) : await memory.peekBudgets(budgets)
        if (found === undefined && onRedisDown === 'fail-closed') throw budgetsUnavailable()
        const at = budgets.findIndex((b, j) => budgetExhausted(b, found?.[j] ?? EMPTY_BUDGET))
        const charge = budgets[at]
        if (charge !== undefined) {
          metrics?.rateLimited.inc({ model: request.model, tier: request.tier, reason: 'budget' })
          throw budgetRefusalOf(charge, found?.[at] ?? EMPTY_BUDGET, currencyOf(), now(), {})
        }
      }
      if (charges.length === 0) return {}
      const subject = subjectOf(request)
      if (shared) {
        const states = await viaRedis((c) => c.peek(subject, charges))
        if (states) return never(request, charges, states)
        if (onRedisDown !== 'insurance') return rateLimitHeaders(charges)
        const local = insurance.share(subject, charges)
        return never(request, local, await memory.peek(subject, local))
      }
      return never(request, charges, await memory.peek(subject, charges))
    },

    async spendBudgets(request) {
      const cost = Math.max(0, Math.round(request.costNanos))
      if (cost === 0 || options.budgets === undefined || request.owner === undefined) return
      const identity = { keyId: request.keyId, owner: request.owner }
      const specs = options.budgets.applicable({ ...identity, tier: request.tier })
      if (specs.length === 0) return
      const hold = nextHold()
      const budgets = budgetChargesOf(specs, cost, now(), identity, undefined, hold)
      const subject = subjectOf(request)
      const counters = shared ?? memory
      // Held and checked like an admission with no rate-limit charges, then committed at once.
      const result = shared
        ? await viaRedis((c) => c.admit(subject, [], budgets, hold))
        : await memory.admit(subject, [], budgets, hold)
      if (result === undefined) {
        // Redis away: as an admission under insurance, budgets are not checked (fail-closed refuses).
        if (onRedisDown === 'fail-closed') throw budgetsUnavailable()
        return
      }
      if (!result.admitted) {
        const admission = { ...request, limits: {}, estimate: { inputTokens: 0, outputTokens: 0 } }
        throw refuseOnBudget(admission, budgets, result.budgets, {}, [], []) ?? budgetsUnavailable()
      }
      const settles = budgets.map((charge) => ({ charge, real: cost }))
      const crossings =
        counters === shared
          ? await viaRedis((c) => c.settle(subject, [], settles, request.once))
          : await memory.settle(subject, [], settles, request.once)
      if (crossings !== undefined) report(budgets, crossings)
    },

    async peek(request): Promise<RateLimitHeaders> {
      const dimensions = dimensionsOf(request.limits)
      if (dimensions.length === 0) return {}
      const subject = subjectOf(request)
      if (shared) {
        const states = await viaRedis((c) => c.peek(subject, dimensions))
        if (states) return rateLimitHeaders(dimensions, states)
        if (onRedisDown !== 'insurance') return rateLimitHeaders(dimensions)
        const local = insurance.share(subject, dimensions)
        return rateLimitHeaders(local, await memory.peek(subject, local))
      }
      return rateLimitHeaders(dimensions, await memory.peek(subject, dimensions))
    },

    async budgetStatus(subject) {
      return statusOf(options.budgets?.applicable(subject) ?? [], new Map([[subject.keyId, subject.owner]]))
    },

    budgetStatusOf: statusOf,

    health() {
      return watch ? watch.health() : { mode: 'memory', healthy: true, outages: 0, downSince: null }
    },

    async close() {
      if (closed) return
      closed = true
      leases?.close()
      await snapshots?.close()
      await watch?.close()
    },
  }
}

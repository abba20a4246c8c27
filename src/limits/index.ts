// The limiter as main.ts builds it from the configuration.
import { join, resolve } from 'node:path'
import type { Config, PlansConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createRedisClient, whenReady, type RedisConnection } from '../store/redis-client.ts'
import type { TurnCommit } from '../store/sqlite.ts'
import { createLimiter, type ManagedLimiter } from './limiter.ts'
import { migrateLimiterCounters, type OwnerOf } from './limiter-migration.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { OnBudgetThreshold } from '../budgets/port.ts'
import { planCurrency } from '../keys/money.ts'

export { createLimiter, type LimiterOptions, type ManagedLimiter } from './limiter.ts'
export { LIMITER_MODES, type OnRedisDown } from './outage.ts'
export { formatDuration, parseDuration } from './duration.ts'

/**
 * Counters on Redis when limits.redisUrl is set or the store is on Redis (any topology;
 * on a connection of their own, with the limiter's short timeout), in memory otherwise (kept in the data
 * directory across restarts). Waits for the first
 * connection at most the connect timeout; a Redis that is down at start is an outage
 * like any other.
 */
export async function createLimiterFromConfig(
  config: Config,
  deps: {
    readonly log: Logger
    readonly metrics: Metrics
    readonly budgets?: BudgetBook
    readonly onBudgetThreshold?: OnBudgetThreshold
    /** The gateway's settlements connection to config.redis; used when the limits live there too. */
    readonly settlements?: RedisConnection
    /** The owner of a key, to carry lifetime counters of the `{tg}` layout over (limiter-migration.ts). */
    readonly ownerOf?: OwnerOf
    /** The embedded store's group commit: budgets' spend is kept in it, with the usage rows (budget-ledger.ts). */
    readonly budgetLedgerOn?: TurnCommit
    /** The plans in force (a reload replaces them); default the boot configuration's. */
    readonly plans?: () => PlansConfig
  },
): Promise<ManagedLimiter> {
  const { limits } = config
  const target = limits.redisUrl !== undefined ? { kind: 'standalone' as const, url: limits.redisUrl } : config.redis
  const common = {
    log: deps.log,
    metrics: deps.metrics,
    onRedisDown: limits.onRedisDown,
    windowMs: limits.windowMs,
    redisTimeoutMs: limits.redisTimeoutMs,
    probeIntervalMs: limits.probeIntervalMs,
    insuranceInstances: limits.insuranceInstances,
    currency: () => planCurrency(deps.plans?.() ?? config.plans),
    ...(deps.budgets === undefined ? {} : { budgets: deps.budgets }),
    ...(deps.onBudgetThreshold === undefined ? {} : { onBudgetThreshold: deps.onBudgetThreshold }),
  }
  if (target === undefined)
    return createLimiter({
      ...common,
      snapshotFile: join(resolve(config.store.dataDir), 'limits.json'),
      ...(deps.budgetLedgerOn === undefined ? {} : { budgetLedgerOn: deps.budgetLedgerOn }),
    })
  const redis = createRedisClient(target, {
    // The limiter bounds every call by redisTimeoutMs itself, allowing for a busy event
    // loop; the client's own deadline only clears commands that never get a reply.
    commandTimeoutMs: Math.max(limits.redisTimeoutMs * 10, 1000),
    connectTimeoutMs: Math.max(limits.redisTimeoutMs, 1000),
    maxReconnectDelayMs: limits.probeIntervalMs,
    name: 'tollgate-limits',
    onError: (error) => deps.log.debug({ err: error.message }, 'rate limiter redis error'),
  })
  await whenReady(redis).catch(() => undefined)
  if (deps.ownerOf !== undefined && redis.status === 'ready') {
    // Before the first call: a quota or budget counted in the old place counts on. A failure
    // is logged, not fatal: the next start tries again (what moved stays moved).
    await migrateLimiterCounters(redis, config.store.keyPrefix, deps.ownerOf, deps.log).catch((error: unknown) =>
      deps.log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        'rate limiter: lifetime counters of the {tg} layout not carried over yet',
      ),
    )
  }
  const settlements = limits.redisUrl === undefined ? deps.settlements : undefined
  return createLimiter({
    ...common,
    redis,
    ...(settlements === undefined ? {} : { settlements }),
    prefix: config.store.keyPrefix,
    closeRedis: true,
  })
}

// Fair shares between parties under contention (docs/limits.md "Fair shares"), as main.ts
// builds them: counters on the gateway's Redis when there is one (shared by every instance),
// in this process otherwise; none when `queue.fairShares` is false (no charges, first come
// first served). /v2's part (capacity-share.ts) reads the same counters.
import type { Config, PlansConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { createFairCapacity, type FairCapacity } from './capacity-share.ts'
import { createFairShares, type FairShares } from './shares.ts'
import { memoryFairStore, redisFairStore } from './store.ts'

export { createFairShares, partyOf, weightOf, withFairShares, type FairShares } from './shares.ts'

export function createFairSharesFromConfig(
  config: Pick<Config, 'store' | 'queue'>,
  redis: RedisConnection | undefined,
  log: Logger,
  plans: () => PlansConfig,
  metrics?: Pick<Metrics, 'fairShareTokens' | 'fairShareOvertakes'>,
): FairShares | undefined {
  if (!config.queue.fairShares) return undefined
  const store = redis === undefined ? memoryFairStore() : redisFairStore(redis, config.store.keyPrefix)
  return createFairShares({ store, plans, log, ...(metrics === undefined ? {} : { metrics }) })
}

/** /v2's part of fair shares (capacity-share.ts), as the corridor's deps take it: nothing without counters or with no reserve. */
export function fairCapacityOf(shares: FairShares | undefined, reserve: number): { fairCapacity?: FairCapacity } {
  const fairCapacity = shares === undefined ? undefined : createFairCapacity(shares, reserve)
  return fairCapacity === undefined ? {} : { fairCapacity }
}

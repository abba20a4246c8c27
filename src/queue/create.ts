// The queue as main.ts builds it: on Redis (the queue store's Lua, BullMQ workers, pub/sub
// between gateways) when the store is on Redis (any topology), otherwise embedded (queue.db in the data
// directory, an in-process runner).
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { LineFairness } from './capacity-line.ts'
import type { Tracing } from '../observability/tracing.ts'
import type { Corridor } from '../inference/corridor.ts'
import type { Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createRedisClient } from '../store/redis-client.ts'
import type { KeyStore } from '../store/ports.ts'
import { createBullmqRunner } from './bullmq-runner.ts'
import { openEmbeddedQueueStore } from './embedded-store.ts'
import { createLocalRunner } from './local-runner.ts'
import { createRedisQueueStore } from './redis-store.ts'
import { createQueueService, type QueueService } from './service.ts'
import { localSignals, redisSignals } from './signals.ts'

export interface QueueParts {
  readonly config: Config
  readonly log: Logger
  readonly metrics: Metrics
  readonly limiter: Limiter
  readonly corridor: Corridor
  readonly keys: Pick<KeyStore, 'get'>
  /** This gateway's name in the lines, leases and heartbeats; random per process. */
  readonly instance: string
  /** Room coming back on a deployment wakes the calls waiting for one. */
  readonly capacity?: Pick<DeploymentCapacity, 'onRoom' | 'learnedElsewhere'>
  /** Traces: a stored request's run continues the trace that accepted it. */
  readonly tracing?: Tracing
  /** Fair shares in the capacity line (src/fairness/). */
  readonly fairness?: LineFairness
}

/** queue.shards on a cluster unless set: a share for each master of any common size. */
const CLUSTER_SHARDS = 8

export function createQueueFromConfig(parts: QueueParts): QueueService {
  const { config, log } = parts
  const retention = { resultTtlMs: config.queue.resultTtlSeconds * 1000 }
  const queueLog = log.child({ component: 'queue' })
  const target = config.redis
  if (target === undefined) {
    return createQueueService({
      ...parts,
      log: queueLog,
      store: openEmbeddedQueueStore({ dataDir: resolve(config.store.dataDir), ...retention }),
      runner: createLocalRunner({
        onError: (error, id) => queueLog.error({ err: error, queueId: id }, 'queue worker error'),
      }),
      signals: localSignals,
    })
  }
  const redis = createRedisClient(target, {
    commandTimeoutMs: config.store.commandTimeoutMs,
    name: 'tollgate-queue-store',
    onError: (error) => queueLog.debug({ err: error.message }, 'queue store redis error'),
  })
  const { instance } = parts
  const shards = config.queue.shards ?? (target.kind === 'cluster' ? CLUSTER_SHARDS : 1)
  return createQueueService({
    ...parts,
    log: queueLog,
    store: createRedisQueueStore(redis, config.store.keyPrefix, retention, shards),
    runner: createBullmqRunner({
      redis: target,
      keyPrefix: config.store.keyPrefix,
      shards,
      log: queueLog,
      commandTimeoutMs: config.store.commandTimeoutMs,
      recoverAfterMs: config.queue.recoverAfterMs,
    }),
    signals: (handlers) =>
      redisSignals(
        { publisher: redis, redis: target, keyPrefix: config.store.keyPrefix, instance, log: queueLog },
        handlers,
      ),
  })
}

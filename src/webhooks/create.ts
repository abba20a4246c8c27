// The webhooks as main.ts builds them: on Redis (the store's keys under `wh:`, BullMQ's
// queue "webhooks") when the store is on Redis, otherwise embedded (webhooks.db in the data
// directory, an in-process runner).
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import { createBullmqRunner } from '../queue/bullmq-runner.ts'
import { createLocalRunner } from '../queue/local-runner.ts'
import { createRedisClient } from '../store/redis-client.ts'
import { createAddressGuard } from './address-guard.ts'
import { createDispatcher, type Dispatcher } from './dispatcher.ts'
import { openEmbeddedWebhookStore } from './embedded-store.ts'
import { WebhookEndpoints } from './endpoints.ts'
import type { WebhookStore } from './port.ts'
import { createRedisWebhookStore } from './redis-store.ts'

export interface Webhooks {
  readonly store: WebhookStore
  readonly dispatcher: Dispatcher
  readonly endpoints: WebhookEndpoints
  close(graceMs?: number): Promise<void>
}

export function createWebhooksFromConfig(
  config: Pick<Config, 'webhooks' | 'store' | 'redis' | 'queue'>,
  log: Logger,
): Webhooks {
  const w = config.webhooks
  const hookLog = log.child({ component: 'webhooks' })
  const target = config.redis
  let store: WebhookStore
  let runner
  if (target === undefined) {
    store = openEmbeddedWebhookStore(resolve(config.store.dataDir))
    runner = createLocalRunner({
      onError: (error, id) => hookLog.error({ err: error, deliveryId: id }, 'webhook worker error'),
    })
  } else {
    const redis = createRedisClient(target, {
      commandTimeoutMs: config.store.commandTimeoutMs,
      name: 'tollgate-webhooks',
      onError: (error) => hookLog.debug({ err: error.message }, 'webhook store redis error'),
    })
    store = createRedisWebhookStore(redis, config.store.keyPrefix)
    runner = createBullmqRunner({
      redis: target,
      keyPrefix: config.store.keyPrefix,
      log: hookLog,
      commandTimeoutMs: config.store.commandTimeoutMs,
      name: 'webhooks',
      recoverAfterMs: config.queue.recoverAfterMs,
    })
  }
  const guard = createAddressGuard(w.allowAddresses)
  const dispatcher = createDispatcher({
    store,
    runner,
    guard,
    limits: { connectTimeoutMs: w.connectTimeoutMs, timeoutMs: w.timeoutMs, maxResponseBytes: w.maxResponseBytes },
    retry: w.retry,
    concurrency: w.concurrency,
    sweepIntervalMs: w.sweepIntervalMs,
    retentionMs: w.retentionDays * 86_400_000,
    log: hookLog,
  })
  return {
    store,
    dispatcher,
    endpoints: new WebhookEndpoints(store, guard),
    async close(graceMs = 0) {
      await dispatcher.close(graceMs)
      await store.close()
    },
  }
}

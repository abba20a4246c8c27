// Batches as main.ts builds them: on Redis when the store is, otherwise batches.db in the
// data directory; the runner that drives them on this instance; the routes.
import type { ClientCalls } from '../priority/client-calls.ts'
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { Router } from '../http/router.ts'
import type { OpenCall } from '../inference/caller.ts'
import type { Guardrails } from '../guardrails/create.ts'
import type { Corridor } from '../inference/corridor.ts'
import type { BatchEventData, Events } from '../events/types.ts'
import type { Logger } from '../observability/logger.ts'
import type { QueueService } from '../queue/service.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import { createRedisClient } from '../store/redis-client.ts'
import type { KeyStore, OwnershipStore } from '../store/ports.ts'
import { openEmbeddedBatchStore } from './embedded-store.ts'
import { isFinalBatch } from './port.ts'
import { createRedisBatchStore } from './redis-store.ts'
import { createBatchRunner } from './runner.ts'
import { registerBatchRoutes } from './routes.ts'

export interface BatchParts {
  readonly config: Config
  readonly log: Logger
  readonly runtime: RuntimeSource
  readonly corridor: Corridor
  readonly queue: QueueService
  readonly ownership: OwnershipStore
  readonly keys: Pick<KeyStore, 'get'>
  readonly instance: string
  /** batch.completed, batch.failed, batch.expired, batch.cancelled (webhooks). */
  readonly events?: Events
  /** Each line's text checked when it runs (guardrails/). */
  readonly guardrails?: Guardrails
  /** The client requests this instance serves now: a batch keeps fewer lines in flight while any are. */
  readonly clientCalls?: ClientCalls
}

export interface Batches {
  /** The /v2/batches and /v1/batches routes. */
  register(router: Router, openCall: OpenCall): void
  /** Starts driving unfinished batches (after the queue started). */
  start(): void
  close(): Promise<void>
}

export function createBatchesFromConfig(parts: BatchParts): Batches {
  const { config } = parts
  const log = parts.log.child({ component: 'batches' })
  const store =
    config.redis === undefined
      ? openEmbeddedBatchStore(resolve(config.store.dataDir))
      : createRedisBatchStore(
          createRedisClient(config.redis, {
            commandTimeoutMs: config.store.commandTimeoutMs,
            name: 'tollgate-batches',
            onError: (error) => log.debug({ err: error.message }, 'batch store redis error'),
          }),
          config.store.keyPrefix,
        )
  const events = parts.events
  const runner = createBatchRunner({
    ...parts,
    log,
    store,
    tickMs: 200,
    window: 32,
    busyWindow: 2,
    // Said once per batch and ending, whichever instance ends it (and again after a restart: deduped).
    onFinished: (batch) => {
      if (events === undefined || !isFinalBatch(batch.status)) return
      const status = batch.status as BatchEventData['status']
      events.fire(
        `batch.${status}`,
        {
          batch_id: batch.id,
          key_id: batch.keyId,
          owner: batch.owner,
          status,
          request_counts: batch.counts,
          output_file_id: batch.outputFileId,
          error_file_id: batch.errorFileId,
        },
        { dedupeKey: `batch:${batch.id}:${status}` },
      )
    },
  })
  // A line collected as it ends, and its place in the window refilled: waiting for the next
  // look (tickMs) instead paced a batch at a window per tick (bench/results.md).
  parts.queue.onBatchLineEnded(() => runner.wake())
  return {
    register(router, openCall) {
      registerBatchRoutes(router, openCall, {
        store,
        runner,
        ownership: parts.ownership,
        runtime: parts.runtime,
        jsonBodyLimitBytes: config.server.jsonBodyLimitBytes,
      })
    },
    start: () => runner.start(),
    async close() {
      await runner.close()
      await store.close()
    },
  }
}

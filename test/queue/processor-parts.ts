// A processor (worker.ts) on a coordinator the test built, with stand-ins for what it
// calls: keys that always exist, a limiter that admits or refuses as the test says, and a
// corridor that only admits and answers 200 (or first waits for the test: `upstream`).
import { NO_USAGE } from '../../src/backends/port.ts'
import { gatewayError } from '../../src/errors.ts'
import type { CallResult, Corridor } from '../../src/inference/corridor.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import type { Limiter } from '../../src/limits/port.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts'
import type { Coordinator } from '../../src/queue/coordinator.ts'
import type { NewRequest, Processor, QueuedRequest } from '../../src/queue/ports.ts'
import { createProcessor } from '../../src/queue/worker.ts'
import type { Runtime } from '../../src/runtime/snapshot.ts'
import { queuedAs } from './store-contract.ts'

const NOW = new Date().toISOString()

export function keyRecord(id: string): KeyRecord {
  return {
    id,
    hash: 'h',
    previousHash: null,
    previousHashValidUntil: null,
    prefix: 'tg_',
    name: null,
    owner: 'owner-a',
    tier: 'Basic',
    models: null,
    endpoints: null,
    limits: null,
    status: 'active',
    createdAt: NOW,
    updatedAt: NOW,
    expiresAt: null,
  } as KeyRecord
}

export interface ProcessorParts {
  /** Refuses an admission (over the limit for 5 s) while it answers true. */
  readonly refuse?: () => boolean
  /** Called once admitted, before the answer: the "upstream call" ends when it resolves. */
  readonly upstream?: (id: string) => Promise<void>
}

/** What the stand-ins saw: admissions asked, refused, and calls sent upstream. */
export interface Seen {
  admissions: number
  refused: number
  upstream: number
}

export function processorParts(coordinator: Coordinator, parts: ProcessorParts = {}) {
  const seen: Seen = { admissions: 0, upstream: 0, refused: 0 }
  const limiter: Limiter = {
    async admit() {
      seen.admissions++
      if (parts.refuse?.() === true) {
        seen.refused++
        throw gatewayError('rate_limit_requests', { headers: { 'retry-after-ms': '5000' } })
      }
      return { headers: {}, settle: async () => undefined }
    },
    peek: async () => ({}),
    close: async () => undefined,
  }
  const corridor: Corridor = {
    enter: async () => {
      throw new Error('not used by the processor')
    },
    restore: (principal, spec, restored) => ({
      // This fake corridor sends nothing anywhere: no configuration is read from it.
      runtime: {} as Runtime,
      principal,
      spec,
      ...restored,
      resolved: { model: 'm', tier: 'Basic', limits: {} },
    }),
    async run(call, exchange, strategy): Promise<CallResult> {
      const admission = await strategy.admit(
        { keyId: call.principal.keyId, tier: 'Basic', model: 'm', limits: {}, estimate: NO_USAGE },
        0,
      )
      seen.upstream++
      await parts.upstream?.(exchange.id)
      exchange.sink.statusCode = 200
      exchange.sink.setHeader('content-type', 'application/json')
      exchange.sink.end('{"ok":true}')
      await admission.settle(NO_USAGE)
      return { status: 200, usage: NO_USAGE, aborted: false }
    },
  }
  const metrics: Metrics = createMetrics()
  const processor: Processor = createProcessor({
    coordinator,
    corridor,
    limiter,
    keys: { get: async (id: string) => keyRecord(id) },
    metrics,
    log: createLogger('silent'),
    config: {
      queue: { resultTtlSeconds: 60, maxResultBytes: 1 << 20, upstreamRetries: 3, retryBackoffMs: 50 },
    } as Parameters<typeof createProcessor>[0]['config'],
  })
  /** What a gateway that accepted `request` with a free worker holds: its record, leased to `instance`, and its key. */
  const held = (request: NewRequest, instance: string): { request: QueuedRequest; key: KeyRecord } => ({
    request: queuedAs(request, instance),
    key: keyRecord(request.keyId),
  })
  return { processor, seen, metrics, held }
}

// The processor with leases, on the embedded store and a corridor that only admits and
// answers: a request leased to an instance is left to it by the shared queue's jobs; a held
// request runs on the record it was given, starts under its lease, and hands the lease back
// before it waits.
import t from 'tap'
import type { Test } from 'tap'
import { NO_USAGE } from '../../src/backends/port.ts'
import { gatewayError } from '../../src/errors.ts'
import type { CallResult, Corridor } from '../../src/inference/corridor.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import type { Limiter } from '../../src/limits/port.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import type { NewRequest, Outcome, QueuedRequest } from '../../src/queue/ports.ts'
import { createProcessor } from '../../src/queue/worker.ts'
import { localCoordinator } from './local-coordinator.ts'
import { newRequest, queuedAs } from './store-contract.ts'
import type { Runtime } from '../../src/runtime/snapshot.ts'

const NOW = new Date().toISOString()

function keyRecord(id: string): KeyRecord {
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

/** A processor for instance 'here', with a limiter that admits or refuses as `refuse` says. */
function setup(t: Test, refuse: () => boolean) {
  const { store, coordinator } = localCoordinator(t)
  const seen = { admissions: 0, upstream: 0, refused: 0 }
  const limiter: Limiter = {
    async admit() {
      seen.admissions++
      if (refuse()) {
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
    restore: (principal, spec, parts) => ({
      // This fake corridor sends nothing anywhere: no configuration is read from it.
      runtime: {} as Runtime,
      principal,
      spec,
      ...parts,
      resolved: { model: 'm', tier: 'Basic', limits: {} },
    }),
    async run(call, exchange, strategy): Promise<CallResult> {
      const admission = await strategy.admit(
        { keyId: call.principal.keyId, tier: 'Basic', model: 'm', limits: {}, estimate: NO_USAGE },
        0,
      )
      seen.upstream++
      exchange.sink.statusCode = 200
      exchange.sink.setHeader('content-type', 'application/json')
      exchange.sink.end('{"ok":true}')
      await admission.settle(NO_USAGE)
      return { status: 200, usage: NO_USAGE, aborted: false }
    },
  }
  const metrics = createMetrics()
  const keys = { get: async (id: string) => keyRecord(id) }
  const processor = createProcessor({
    coordinator,
    corridor,
    limiter,
    keys,
    metrics,
    log: createLogger('silent'),
    config: {
      queue: { resultTtlSeconds: 60, maxResultBytes: 1 << 20, upstreamRetries: 3, retryBackoffMs: 50 },
    } as Parameters<typeof createProcessor>[0]['config'],
  })
  const held = (request: NewRequest): { request: QueuedRequest; key: KeyRecord } => ({
    request: queuedAs(request, 'here'),
    key: keyRecord(request.keyId),
  })
  return { store, coordinator, processor, seen, held, metrics }
}

const signal = new AbortController().signal

t.test('a job of the shared queue leaves a request leased to an instance to it, and looks again later', async (t) => {
  const { store, processor, seen } = setup(t, () => false)
  const r = newRequest()
  await store.submit(r, null, 'elsewhere')
  const before = Date.now()
  const outcome = await processor(r, signal)
  t.equal(outcome.kind, 'later')
  t.ok(outcome.kind === 'later' && outcome.at - before >= 900, 'in about a second')
  t.equal(seen.admissions, 0, 'it asked for no admission')
  t.equal((await store.get(r.id))?.status, 'queued', 'and the request is as it was')
})

t.test('a held request runs on what it was given and starts under its lease; the lease ends with it', async (t) => {
  const { store, coordinator, processor, seen, held, metrics } = setup(t, () => false)
  const r = newRequest()
  coordinator.hold(r.id)
  t.equal(await store.submit(r, null, 'here'), 0)
  const outcome = await processor(r, signal, held(r))
  t.same(outcome, { kind: 'done' })
  t.equal(seen.upstream, 1)
  const after = await store.get(r.id)
  t.equal(after?.status, 'completed')
  t.equal(after?.attempts, 1)
  t.equal(after?.runner, null, 'not leased once finished')
  t.same(await store.leases(), [])
  t.match(await metrics.registry.metrics(), /tollgate_queue_async_starts_total\{path="here"\} 1/)
})

t.test('a held request that must wait hands its lease back first; the shared queue then runs it', async (t) => {
  let refusing = true
  const { store, coordinator, processor, seen, held } = setup(t, () => refusing)
  const r = newRequest()
  coordinator.hold(r.id)
  await store.submit(r, null, 'here')
  const outcome: Outcome = await processor(r, signal, held(r))
  t.equal(outcome.kind, 'later', 'over the limit: it waits')
  t.equal(seen.refused, 1)
  t.equal((await store.get(r.id))?.runner, null, 'its lease was handed back')
  t.equal((await store.get(r.id))?.status, 'queued')
  refusing = false
  t.same(await processor(r, signal), { kind: 'done' }, 'a job of the shared queue runs it')
  t.equal((await store.get(r.id))?.status, 'completed')
})

t.test('a held request whose lease was handed on meanwhile does not start', async (t) => {
  const { store, processor, seen, held } = setup(t, () => false)
  const r = newRequest()
  await store.submit(r, null, 'here')
  await store.release(r, 'here')
  t.same(await processor(r, signal, held(r)), { kind: 'done' })
  t.equal(seen.admissions, 1, 'admitted')
  t.equal(seen.upstream, 0, 'but never sent: whoever holds it now runs it')
  t.equal((await store.get(r.id))?.status, 'queued')
})

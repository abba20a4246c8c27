// The batch store contract, on both adapters: the per-key cap on unfinished batches, lists
// newest first with exact has_more, the runner's writes beside a client's cancel (neither
// undoes the other), finished batches leaving the active set, leases, and lines.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openEmbeddedBatchStore } from '../../src/batches/embedded-store.ts'
import { newBatchRecord, type BatchRecord, type BatchStore } from '../../src/batches/port.ts'
import { createRedisBatchStore } from '../../src/batches/redis-store.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { REDIS_URL, testNamespace } from '../helpers/redis.ts'

const { fresh } = testNamespace(t, 'bt', 'tgtest-bt')

function batch(id: string, owner = 'o1', keyId = 'k1'): BatchRecord {
  return newBatchRecord({
    id,
    owner,
    keyId,
    endpoint: 'chat.completions',
    endpointPath: '/v1/chat/completions',
    inputFileId: 'file-1',
    completionWindow: '24h',
    metadata: null,
    createdAt: Date.now(),
    expiresAt: Date.now() + 86_400_000,
  })
}

async function contract(t: Test, open: () => Promise<BatchStore>): Promise<void> {
  const store = await open()
  t.teardown(() => store.close())
  t.equal(await store.create(batch('batch_a'), 2), true)
  t.equal(await store.create(batch('batch_b'), 2), true)
  t.equal(await store.create(batch('batch_c'), 2), false, "the key's cap")
  t.equal(await store.create(batch('batch_x', 'o2', 'k2'), 2), true, 'another key has its own')
  t.same(await store.active(), ['batch_a', 'batch_b', 'batch_x'])

  const first = await store.list('o1', { limit: 1 })
  t.same([first.data.map((b) => b.id), first.hasMore], [['batch_b'], true], 'newest first')
  const next = await store.list('o1', { limit: 1, after: 'batch_b' })
  t.same([next.data.map((b) => b.id), next.hasMore], [['batch_a'], false])
  t.same((await store.list('o1', { limit: 5, after: 'batch_x' })).data, [], "another owner's cursor reads nothing")

  // A cancel and the runner's writes do not undo each other.
  const cancelled = await store.cancel('batch_a', 1000)
  t.equal(cancelled?.cancelAt, 1000)
  t.equal((await store.cancel('batch_a', 2000))?.cancelAt, 1000, 'the first ask counts')
  const updated = await store.update('batch_a', {
    status: 'in_progress',
    counts: { total: 3, completed: 1, failed: 0 },
  })
  t.equal(updated?.cancelAt, 1000)
  t.equal(updated?.status, 'in_progress')
  t.equal((await store.get('batch_a'))?.counts.completed, 1)
  t.equal(await store.cancel('batch_none', 1), null)

  // A finished batch frees its key's place.
  await store.update('batch_b', { status: 'completed', completedAt: 5 })
  t.same(await store.active(), ['batch_a', 'batch_x'])
  t.equal(await store.create(batch('batch_d'), 2), true)

  // Leases.
  t.equal(await store.lease('batch_a', 'gw1', 10_000), true)
  t.equal(await store.lease('batch_a', 'gw2', 10_000), false, "another instance's lease lasts")
  t.equal(await store.lease('batch_a', 'gw1', 10_000), true, 'renewed by its holder')
  await store.unlease('batch_a', 'gw1')
  t.equal(await store.lease('batch_a', 'gw2', 10_000), true, 'given up: taken')
  // The runner's writes name their instance: only the lease's holder writes.
  t.equal(await store.update('batch_a', { status: 'finalizing' }, 'gw1'), null, 'gw1 lost the lease: nothing written')
  t.equal((await store.get('batch_a'))?.status, 'in_progress')
  t.match(await store.update('batch_a', { status: 'finalizing' }, 'gw2'), { status: 'finalizing' }, 'its holder writes')
  t.equal(await store.update('batch_x', { status: 'finalizing' }, 'gw2'), null, 'no lease at all: nothing written')
  t.match(await store.update('batch_a', { status: 'completed' }, 'gw2'), { status: 'completed' })
  t.notOk((await store.active()).includes('batch_a'), 'a final write by its holder leaves the active set')

  // Lines.
  await store.putLines('batch_a', [
    { index: 1, customId: 'a', body: { model: 'm' }, queueId: null, result: null },
    { index: 3, customId: 'b', body: { model: 'm' }, queueId: null, result: null },
  ])
  await store.setLine('batch_a', 3, { queueId: 'qreq_1' })
  await store.setLine('batch_a', 3, {
    result: { kind: 'response', statusCode: 200, requestId: 'qreq_1', body: { ok: 1 } },
  })
  const lines = await store.lines('batch_a')
  t.same(
    lines.map((l) => [l.index, l.queueId, l.result?.kind ?? null]),
    [
      [1, null, null],
      [3, 'qreq_1', 'response'],
    ],
  )
  t.ok(await store.ping())
}

t.test('embedded', (t) => contract(t, async () => openEmbeddedBatchStore(mkdtempSync(join(tmpdir(), 'tgtest-bt-')))))
t.test('redis', (t) =>
  contract(t, async () => {
    const { prefix } = fresh()
    return createRedisBatchStore(createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-bt' }), prefix)
  }),
)

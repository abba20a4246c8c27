// A batch's lease renewed while long work runs (src/batches/lease.ts): no other instance
// takes the batch meanwhile, and the work learns when another did.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedBatchStore } from '../../src/batches/embedded-store.ts'
import { whileLeased } from '../../src/batches/lease.ts'
import { newBatchRecord } from '../../src/batches/port.ts'
import { pollUntil } from '../helpers/poll.ts'

const TTL = 150

t.test('work longer than the lease keeps it; a lease taken over is seen', async (t) => {
  const store = openEmbeddedBatchStore(mkdtempSync(join(tmpdir(), 'tgtest-bt-lease-')))
  t.teardown(() => store.close())
  const record = newBatchRecord({
    id: 'batch_l',
    owner: 'o',
    keyId: 'k',
    endpoint: 'chat.completions',
    endpointPath: '/v1/chat/completions',
    inputFileId: 'file_1',
    completionWindow: '24h',
    metadata: null,
    createdAt: 0,
    expiresAt: Date.now() + 60_000,
  })
  t.equal(await store.create(record, 5), true)
  t.equal(await store.lease('batch_l', 'gw1', TTL), true)
  const started = Date.now()
  await whileLeased({ store, id: 'batch_l', instance: 'gw1', ttlMs: TTL }, async (held) => {
    // For four lease lifetimes, gw2 never gets it.
    const { met, seen } = await pollUntil(
      async () => ({ taken: await store.lease('batch_l', 'gw2', TTL), at: Date.now() }),
      (look) => look.taken || look.at - started > 4 * TTL,
      1000,
      10,
    )
    t.ok(met)
    t.notOk(
      seen.some((look) => look.taken),
      'held by its renewals',
    )
    t.ok(held())
    t.match(await store.update('batch_l', { status: 'finalizing' }, 'gw1'), { status: 'finalizing' })
  })
  // Without renewals, it lapses; taken by gw2, gw1's renewals find it gone.
  await pollUntil(
    () => store.lease('batch_l', 'gw2', 60_000),
    (taken) => taken,
    100,
    20,
  )
  await whileLeased({ store, id: 'batch_l', instance: 'gw1', ttlMs: TTL }, async (held) => {
    const { met } = await pollUntil(
      async () => held(),
      (h) => !h,
      100,
      10,
    )
    t.ok(met, 'gw1 learns it lost the lease')
    t.equal(await store.update('batch_l', { status: 'completed' }, 'gw1'), null, 'and writes nothing')
  })
})

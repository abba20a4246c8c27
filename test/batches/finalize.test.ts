// A batch's end (src/batches/finalize.ts): its files written, then its final status, by the
// instance holding its lease. An instance that loses the lease between the two, or fails
// to write the second file, deletes the files it wrote: no batch names them, and the
// instance that finishes the batch writes its own.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openEmbeddedBatchStore } from '../../src/batches/embedded-store.ts'
import { finalize, type FinalizeDeps } from '../../src/batches/finalize.ts'
import { newBatchRecord, type BatchLine, type BatchStore } from '../../src/batches/port.ts'
import { createLogger } from '../../src/observability/logger.ts'

const ID = 'batch_f'

const lines: BatchLine[] = [
  {
    index: 0,
    customId: 'ok',
    body: {},
    queueId: 'qreq_0',
    submitted: true,
    result: { kind: 'response', statusCode: 200, requestId: 'qreq_0', body: {} },
  },
  {
    index: 1,
    customId: 'bad',
    body: {},
    queueId: 'qreq_1',
    submitted: true,
    result: { kind: 'error', code: 'model_not_found', message: 'no' },
  },
]

/** A batch in progress leased to gw1, and finalize's deps for gw1; `onUpload` runs inside each upload. */
async function setUp(t: Test, onUpload: (store: BatchStore, n: number) => Promise<void>) {
  const store = openEmbeddedBatchStore(mkdtempSync(join(tmpdir(), 'tgtest-bt-final-')))
  t.teardown(() => store.close())
  const record = newBatchRecord({
    id: ID,
    owner: 'o',
    keyId: 'k',
    endpoint: 'chat.completions',
    endpointPath: '/v1/chat/completions',
    inputFileId: 'file_in',
    completionWindow: '24h',
    metadata: null,
    createdAt: 0,
    expiresAt: Date.now() + 60_000,
  })
  t.equal(await store.create(record, 5), true)
  t.equal(await store.lease(ID, 'gw1', 60_000), true)
  const uploaded: string[] = []
  const discarded: string[] = []
  const update = (id: string, patch: Parameters<BatchStore['update']>[1]) => store.update(id, patch, 'gw1')
  const deps: FinalizeDeps = {
    store,
    instance: 'gw1',
    log: createLogger('silent'),
    update,
    finish: (r, patch) => update(r.id, patch),
    async upload(_owner, name) {
      await onUpload(store, uploaded.length)
      uploaded.push(`file_${name}`)
      return `file_${name}`
    },
    async discard(fileId) {
      discarded.push(fileId)
    },
  }
  await store.update(ID, { status: 'in_progress' }, 'gw1')
  return { store, record: { ...record, status: 'in_progress' as const }, deps, uploaded, discarded }
}

t.test('the lease kept: the batch names both files, none deleted', async (t) => {
  const { store, record, deps, uploaded, discarded } = await setUp(t, async () => undefined)
  await finalize(deps, record, lines, false)
  t.match(await store.get(ID), {
    status: 'completed',
    outputFileId: `file_${ID}_output.jsonl`,
    errorFileId: `file_${ID}_error.jsonl`,
  })
  t.equal(uploaded.length, 2)
  t.same(discarded, [])
})

t.test('the lease lost while the files were written: the loser deletes them', async (t) => {
  const { store, record, deps, uploaded, discarded } = await setUp(t, async (store, n) => {
    // gw1 stalled past its lease while it wrote the first file; gw2 took the batch on.
    if (n === 0) {
      await store.unlease(ID, 'gw1')
      t.equal(await store.lease(ID, 'gw2', 60_000), true, 'gw2 takes the batch')
    }
  })
  await finalize(deps, record, lines, false)
  const now = await store.get(ID)
  t.equal(now?.status, 'finalizing', 'gw1 wrote no ending')
  t.equal(now?.outputFileId, null)
  t.equal(uploaded.length, 2)
  t.same(discarded, uploaded, 'both files it wrote are deleted')
})

t.test('the second file not written: the first is deleted, and the drive tries again', async (t) => {
  const { store, record, deps, uploaded, discarded } = await setUp(t, async (_store, n) => {
    if (n === 1) throw new Error('resource backend down')
  })
  await t.rejects(finalize(deps, record, lines, false), /resource backend down/)
  t.same(uploaded, [`file_${ID}_output.jsonl`])
  t.same(discarded, uploaded, 'the file written is deleted')
  t.equal((await store.get(ID))?.status, 'finalizing', 'not ended: written again on the next drive')
})

// The queue store contract on the embedded store (SQLite in a temporary directory), and
// what only it does: a request that was running when the process stopped runs again first.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedQueueStore } from '../../src/queue/embedded-store.ts'
import { jobTicket } from '../../src/queue/tickets.ts'
import { newRequest, queueStoreContract } from './store-contract.ts'

const space = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-queue-'))
  return {
    open: async (options: { resultTtlMs?: number } = {}) => openEmbeddedQueueStore({ dataDir: dir, resultTtlMs: options.resultTtlMs ?? 60_000 }),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
}

queueStoreContract(t, 'embedded', space)

t.test('embedded: a request running when the process stopped is first in its line again', async (t) => {
  const s = await space()
  t.teardown(() => s.cleanup())
  const store = await s.open()
  const a = newRequest()
  const b = newRequest()
  await store.submit(a, null)
  await store.submit(b, null)
  await store.start(a, Date.now())
  await store.close()
  const again = await s.open()
  t.teardown(() => again.close())
  t.equal((await again.get(a.id))?.status, 'queued')
  t.equal((await again.get(a.id))?.attempts, 1, 'its attempt is remembered')
  t.equal(await again.position(a.line, jobTicket(a)), 0)
  t.equal(await again.position(b.line, jobTicket(b)), 1)
})

t.test('embedded: a request asked to stop while running is cancelled at the restart', async (t) => {
  const s = await space()
  t.teardown(() => s.cleanup())
  const store = await s.open()
  const a = newRequest()
  await store.submit(a, null)
  await store.start(a, Date.now())
  await store.cancel(a, Date.now())
  await store.close()
  const again = await s.open()
  t.teardown(() => again.close())
  t.equal((await again.get(a.id))?.status, 'cancelled')
  t.equal(await again.position(a.line, jobTicket(a)), null)
})

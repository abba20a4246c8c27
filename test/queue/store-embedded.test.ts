// The queue store contract on the embedded store (SQLite in a temporary directory), and
// what only it does: a request that was running when the process stopped runs again first.
import { mkdtempSync, rmSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedQueueStore, QUEUE_DATABASE_FILE } from '../../src/queue/embedded-store.ts'
import { jobTicket } from '../../src/queue/tickets.ts'
import { newRequest, queueStoreContract } from './store-contract.ts'

const space = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-queue-'))
  return {
    open: async (options: { resultTtlMs?: number } = {}) =>
      openEmbeddedQueueStore({ dataDir: dir, resultTtlMs: options.resultTtlMs ?? 60_000 }),
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

t.test(
  'embedded: a queue.db written before bodies were split off opens with its requests readable and counted',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-queue-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    // The first schema, and a row as it was written then: the body inside meta.
    const db = new DatabaseSync(join(dir, QUEUE_DATABASE_FILE))
    db.exec(`
    CREATE TABLE requests (
      id TEXT PRIMARY KEY, owner TEXT NOT NULL, created_at INTEGER NOT NULL, line TEXT NOT NULL, line_seq REAL NOT NULL,
      meta TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, started_at INTEGER, finished_at INTEGER,
      cancel INTEGER NOT NULL DEFAULT 0, result TEXT, body BLOB
    ) STRICT;
    CREATE INDEX requests_owner ON requests (owner, created_at);
    CREATE INDEX requests_status ON requests (status, line_seq);
    CREATE INDEX requests_finished ON requests (finished_at);
    PRAGMA user_version = 1;
  `)
    const old = newRequest()
    const meta = JSON.stringify({
      id: old.id,
      keyId: old.keyId,
      owner: old.owner,
      tier: old.tier,
      line: old.line,
      createdAt: old.createdAt,
      call: old.call,
    })
    db.prepare(
      `INSERT INTO requests (id, owner, created_at, line, line_seq, meta, status, body) VALUES (?, ?, ?, ?, 1, ?, 'queued', ?)`,
    ).run(old.id, old.owner, old.createdAt, old.line, meta, Buffer.alloc(100))
    db.close()

    const store = openEmbeddedQueueStore({ dataDir: dir, resultTtlMs: 60_000 })
    t.teardown(() => store.close())
    t.same((await store.get(old.id))?.call, old.call, 'its body is read from meta')
    t.equal(await store.position(old.line, jobTicket(old)), 0, 'it is in its line again')
    const pending = await store.pending(old.keyId)
    t.equal(pending.requests, 1)
    t.equal(pending.bytes, Buffer.byteLength(meta) + 100, 'its size is what it holds')
    const listed = await store.list(old.owner, { limit: 10, status: 'queued' })
    t.same(
      listed.data.map((r) => r.id),
      [old.id],
    )
    t.notOk('body' in (listed.data[0]?.call ?? {}), 'a list shows no body, old rows included')
  },
)

import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import t from 'tap'
import type { Test } from 'tap'
import { DATABASE_FILE, MIGRATIONS, openEmbeddedStores } from '../../src/store/embedded.ts'
import { storeContract } from './contract.ts'
import { APPLIED_WRITES_SCHEMA, appliedWrites } from '../../src/store/applied-writes.ts'
import { authStoreContract } from './auth-contract.ts'
import { makeBareKeyRecord, makeKeyRecord, makeUsage } from './records.ts'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'tg-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

storeContract(t, 'embedded', async () => openEmbeddedStores(':memory:'))
authStoreContract(t, 'embedded', async () => openEmbeddedStores(':memory:'))

t.test('embedded: the contract holds on a file database too (WAL)', async (t) => {
  const dir = tempDir(t)
  let n = 0
  storeContract(t, 'embedded file', async () => openEmbeddedStores(join(dir, `db${n++}`)))
})

t.test('embedded: a once charge counts once across a restart, and its id is forgotten when it runs out', async (t) => {
  const dataDir = join(tempDir(t), 'data')
  const once = { id: 'queue:req_1', keepIdMs: 60_000 }
  const first = openEmbeddedStores(dataDir)
  await first.usage.add([makeUsage({ ...once, inputTokens: 10 })])
  await first.close()
  const second = openEmbeddedStores(dataDir)
  t.teardown(() => second.close())
  await second.usage.add([makeUsage({ ...once, inputTokens: 10 })])
  t.strictSame(
    (await second.usage.query({})).map((r) => [r.requests, r.inputTokens]),
    [[1, 10]],
  )
  const db = new DatabaseSync(':memory:')
  db.exec(APPLIED_WRITES_SCHEMA)
  const applied = appliedWrites(db)
  t.equal(applied.first('a', 1000, 0), true, 'first')
  t.equal(applied.first('a', 1000, 999), false, 'within its time: a repeat')
  t.equal(applied.first('a', 1000, 1000), true, 'once run out: new again')
  t.equal(applied.first('a', 1000, 1999), false)
  db.close()
})

t.test('embedded: data survives close and reopen', async (t) => {
  const dataDir = join(tempDir(t), 'nested', 'data')
  const full = makeKeyRecord({ previousHash: 'aa'.repeat(32), previousHashValidUntil: '2025-03-02T00:00:00.000Z' })
  const bare = makeBareKeyRecord()

  const first = openEmbeddedStores(dataDir)
  t.equal(first.kind, 'embedded')
  await first.keys.insert(full)
  await first.keys.insert(bare)
  await first.ownership.claim('file', 'file-2', 'alice')
  await first.ownership.claim('file', 'file-1', 'alice')
  await first.usage.add([makeUsage({ costNanos: 100_000_000 }), makeUsage({ costNanos: 200_000_000 })])
  await first.close()
  t.ok(existsSync(join(dataDir, DATABASE_FILE)), 'the directory and file were created')

  const second = openEmbeddedStores(dataDir)
  t.teardown(() => second.close())
  t.strictSame(await second.keys.get(full.id), full)
  t.strictSame(await second.keys.findByHash('aa'.repeat(32)), full)
  t.strictSame(await second.keys.get(bare.id), bare)
  t.strictSame(await second.ownership.list('file', 'alice'), ['file-2', 'file-1'])
  const rows = await second.usage.query({})
  t.equal(rows.length, 1)
  t.equal(rows[0]?.requests, 2)
  t.equal(rows[0]?.costNanos, 300_000_000)

  // Claim order keeps going after a reopen, even after the newest claim was released.
  await second.ownership.release('file', 'file-1')
  await second.ownership.claim('file', 'file-0', 'alice')
  t.strictSame(await second.ownership.list('file', 'alice'), ['file-2', 'file-0'])
})

t.test('embedded: the database is in WAL mode at the latest schema version', async (t) => {
  const dataDir = tempDir(t)
  const stores = openEmbeddedStores(dataDir)
  t.teardown(() => stores.close())
  const db = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true })
  t.teardown(() => db.close())
  t.equal(db.prepare('PRAGMA journal_mode').get()?.journal_mode, 'wal')
  t.equal(db.prepare('PRAGMA user_version').get()?.user_version, MIGRATIONS.length)
  const tables = db
    .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all()
    .map((r) => r.name)
  t.strictSame(tables, [
    'accounts',
    'applied_writes',
    'key_hashes',
    'keys',
    'ownership',
    'refresh_tokens',
    'remembered',
    'sessions',
    'signing_keys',
    'streams',
    'usage',
  ])
})

t.test('embedded: costs kept as floats by an older Tollgate become exact nano-units', async (t) => {
  const dataDir = tempDir(t)
  const old = new DatabaseSync(join(dataDir, DATABASE_FILE))
  old.exec(MIGRATIONS[0] ?? '')
  old.exec('PRAGMA user_version = 1')
  old
    .prepare(
      'INSERT INTO usage (key_id, model, day, owner, tier, requests, input_tokens, output_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    )
    .run('key_a', 'gpt-4o', '2025-03-01', 'team-a', 'Basic', 3, 1210, 0, 0.0042713000000000004)
  old.close()
  const stores = openEmbeddedStores(dataDir)
  t.teardown(() => stores.close())
  const [row] = await stores.usage.query({})
  t.equal(row?.costNanos, 4_271_300, 'the float noise is gone')
  await stores.usage.add([makeUsage({ keyId: 'key_a', model: 'gpt-4o', owner: 'team-a', costNanos: 1 })])
  t.equal((await stores.usage.query({}))[0]?.costNanos, 4_271_301, 'and later calls add exactly')
})

t.test('embedded: a database from a newer Tollgate is refused, not migrated', async (t) => {
  const dataDir = tempDir(t)
  const db = new DatabaseSync(join(dataDir, DATABASE_FILE))
  db.exec('PRAGMA user_version = 99')
  db.close()
  t.throws(() => openEmbeddedStores(dataDir), /newer than this Tollgate knows/)
})

t.test("embedded: two handles on one file see each other's writes", async (t) => {
  const dataDir = tempDir(t)
  const a = openEmbeddedStores(dataDir)
  const b = openEmbeddedStores(dataDir)
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const record = makeKeyRecord()
  await a.keys.insert(record)
  t.strictSame(await b.keys.findByHash(record.hash), record)
  await Promise.all([a.usage.add([makeUsage()]), b.usage.add([makeUsage()])])
  t.equal((await a.usage.query({}))[0]?.requests, 2)
})

t.test('embedded: calls after close reject instead of crashing', async (t) => {
  const stores = openEmbeddedStores(':memory:')
  await stores.close()
  await t.rejects(stores.keys.get('key_x'))
  await t.rejects(stores.usage.add([makeUsage()]))
})

t.test(
  'embedded: usage rows added in one turn share a transaction; each add resolves once its rows are committed',
  async (t) => {
    const dir = tempDir(t)
    const stores = openEmbeddedStores(dir)
    t.teardown(() => stores.close())
    // A second connection sees only what was committed.
    const reader = new DatabaseSync(join(dir, DATABASE_FILE))
    t.teardown(() => reader.close())
    const committed = (): number => Number(reader.prepare('SELECT COALESCE(SUM(requests), 0) AS n FROM usage').get()?.n)
    const seenAtResolve: number[] = []
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        stores.usage.add([makeUsage({ keyId: `key_${i % 5}`, inputTokens: i })]).then(() => {
          seenAtResolve.push(committed())
        }),
      ),
    )
    t.ok(
      seenAtResolve.every((n) => n === 50),
      'every add resolved with all 50 rows committed (one batch)',
    )
    const rows = await stores.usage.query({})
    t.equal(rows.length, 5, 'one row per key')
    t.equal(
      rows.reduce((n, r) => n + r.requests, 0),
      50,
    )
    t.equal(
      rows.reduce((n, r) => n + r.inputTokens, 0),
      (49 * 50) / 2,
    )
  },
)

t.test('embedded: a batch that fails rejects every add in it, and close() writes a pending batch first', async (t) => {
  const dir = tempDir(t)
  const stores = openEmbeddedStores(dir)
  const lock = new DatabaseSync(join(dir, DATABASE_FILE), { timeout: 0 })
  lock.exec('PRAGMA busy_timeout = 0')
  lock.exec('BEGIN EXCLUSIVE')
  const outcomes = await Promise.allSettled([
    stores.usage.add([makeUsage()]),
    stores.usage.add([makeUsage({ keyId: 'key_b' })]),
  ])
  lock.exec('ROLLBACK')
  lock.close()
  t.same(
    outcomes.map((o) => o.status),
    ['rejected', 'rejected'],
    'both adds of the batch were refused while the database was locked',
  )

  const pending = stores.usage.add([makeUsage({ keyId: 'key_c' })])
  await stores.close()
  await pending
  const reopened = openEmbeddedStores(dir)
  t.teardown(() => reopened.close())
  t.same(
    (await reopened.usage.query({})).map((r) => r.keyId),
    ['key_c'],
    'the row added just before close() was written; the refused ones were not',
  )
})

import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import t from 'tap'
import type { Test } from 'tap'
import { DATABASE_FILE, openEmbeddedStores } from '../../src/store/embedded.ts'
import { storeContract } from './contract.ts'
import { makeBareKeyRecord, makeKeyRecord, makeUsage } from './records.ts'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'tg-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

storeContract(t, 'embedded', async () => openEmbeddedStores(':memory:'))

t.test('embedded: the contract holds on a file database too (WAL)', async (t) => {
  const dir = tempDir(t)
  let n = 0
  storeContract(t, 'embedded file', async () => openEmbeddedStores(join(dir, `db${n++}`)))
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
  await first.usage.add([makeUsage({ cost: 0.1 }), makeUsage({ cost: 0.2 })])
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
  t.ok(Math.abs((rows[0]?.cost ?? NaN) - 0.3) < 1e-9)

  // Claim order keeps going after a reopen, even after the newest claim was released.
  await second.ownership.release('file', 'file-1')
  await second.ownership.claim('file', 'file-0', 'alice')
  t.strictSame(await second.ownership.list('file', 'alice'), ['file-2', 'file-0'])
})

t.test('embedded: the database is in WAL mode at schema version 1', async (t) => {
  const dataDir = tempDir(t)
  const stores = openEmbeddedStores(dataDir)
  t.teardown(() => stores.close())
  const db = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true })
  t.teardown(() => db.close())
  t.equal(db.prepare('PRAGMA journal_mode').get()?.journal_mode, 'wal')
  t.equal(db.prepare('PRAGMA user_version').get()?.user_version, 1)
  const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all().map((r) => r.name)
  t.strictSame(tables, ['key_hashes', 'keys', 'ownership', 'usage'])
})

t.test('embedded: a database from a newer Tollgate is refused, not migrated', async (t) => {
  const dataDir = tempDir(t)
  const db = new DatabaseSync(join(dataDir, DATABASE_FILE))
  db.exec('PRAGMA user_version = 99')
  db.close()
  t.throws(() => openEmbeddedStores(dataDir), /newer than this Tollgate knows/)
})

t.test('embedded: two handles on one file see each other\'s writes', async (t) => {
  const dataDir = tempDir(t)
  const a = openEmbeddedStores(dataDir)
  const b = openEmbeddedStores(dataDir)
  t.teardown(async () => { await a.close(); await b.close() })
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

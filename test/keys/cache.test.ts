// The key cache: fast within its TTL, dropped on a change, never holding a record that an
// invalidation overtook, and never trusted while the change feed may miss messages.
import t from 'tap'
import type { KeyLookup } from '../../src/auth/api-key.ts'
import { createKeyCache } from '../../src/keys/cache.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import { makeKeyRecord } from '../store/records.ts'

interface FakeStore extends KeyLookup {
  reads: number
  records: Map<string, KeyRecord>
  failing: boolean
  /** When set, findByHash waits for this before answering. */
  gate: Promise<void> | null
}

function fakeStore(): FakeStore {
  const store: FakeStore = {
    reads: 0,
    records: new Map(),
    failing: false,
    gate: null,
    async findByHash(hash) {
      store.reads++
      const found = store.records.get(hash) ?? null
      if (store.gate) await store.gate
      if (store.failing) throw new Error('store down')
      return found
    },
  }
  return store
}

function clock(start = 1_000_000) {
  let now = start
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms
    },
  }
}

t.test('a found record is served from memory within the TTL, then read again', async (t) => {
  const store = fakeStore()
  const c = clock()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  const cache = createKeyCache({ store, ttlMs: 1000, now: c.now })
  t.same(await cache.findByHash(record.hash), record)
  t.same(await cache.findByHash(record.hash), record)
  t.equal(store.reads, 1, 'second lookup from memory')
  c.advance(999)
  await cache.findByHash(record.hash)
  t.equal(store.reads, 1, 'still fresh at 999 ms')
  c.advance(1)
  const revoked = { ...record, status: 'revoked' as const }
  store.records.set(record.hash, revoked)
  t.equal((await cache.findByHash(record.hash))?.status, 'revoked', 'after the TTL the store is asked again')
  t.equal(store.reads, 2)
})

t.test('an unknown hash is remembered as unknown for the negative TTL', async (t) => {
  const store = fakeStore()
  const c = clock()
  const cache = createKeyCache({ store, negativeTtlMs: 5000, now: c.now })
  for (let i = 0; i < 50; i++) t.equal(await cache.findByHash('nope'), null)
  t.equal(store.reads, 1, 'a flood of one wrong key costs one store read')
  c.advance(5000)
  await cache.findByHash('nope')
  t.equal(store.reads, 2)
})

t.test('invalidate drops the key at once, whichever of its hashes was cached', async (t) => {
  const store = fakeStore()
  const record = makeKeyRecord({ previousHash: 'old-hash', previousHashValidUntil: '2999-01-01T00:00:00.000Z' })
  const other = makeKeyRecord()
  store.records.set(record.hash, record)
  store.records.set('old-hash', record)
  store.records.set(other.hash, other)
  const cache = createKeyCache({ store, ttlMs: 60_000 })
  await cache.findByHash(record.hash)
  await cache.findByHash('old-hash')
  await cache.findByHash(other.hash)
  t.equal(cache.stats().entries, 3)
  const revoked = { ...record, status: 'revoked' as const }
  store.records.set(record.hash, revoked)
  store.records.delete('old-hash')
  cache.invalidate(record.id)
  t.equal(cache.stats().entries, 1, 'only the other key stays')
  t.equal((await cache.findByHash(record.hash))?.status, 'revoked')
  t.equal(await cache.findByHash('old-hash'), null)
  const reads = store.reads
  await cache.findByHash(other.hash)
  t.equal(store.reads, reads, 'the other key still comes from memory')
})

t.test('a lookup overtaken by an invalidation does not put its stale record back', async (t) => {
  const store = fakeStore()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  const cache = createKeyCache({ store, ttlMs: 60_000 })
  let open!: () => void
  store.gate = new Promise((done) => {
    open = done
  })
  const slow = cache.findByHash(record.hash)
  // The store changes and the message arrives while the read is still out.
  store.records.set(record.hash, { ...record, status: 'revoked' })
  cache.invalidate(record.id)
  const fresh = cache.findByHash(record.hash)
  open()
  store.gate = null
  t.equal((await slow)?.status, 'active', 'the slow read returns what it read')
  t.equal((await fresh)?.status, 'revoked', 'a lookup after the invalidation does not join the slow one')
  t.equal((await cache.findByHash(record.hash))?.status, 'revoked', 'and the cache holds the new record')
})

t.test('concurrent lookups of one hash make one store read', async (t) => {
  const store = fakeStore()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  let open!: () => void
  store.gate = new Promise((done) => {
    open = done
  })
  const cache = createKeyCache({ store })
  const all = Promise.all(Array.from({ length: 20 }, () => cache.findByHash(record.hash)))
  open()
  const found = await all
  t.equal(store.reads, 1)
  t.ok(found.every((r) => r?.id === record.id))
})

t.test('untrusted (feed down): every lookup reads the store; trusted again: the cache starts empty', async (t) => {
  const store = fakeStore()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  const cache = createKeyCache({ store, ttlMs: 60_000, trusted: false })
  await cache.findByHash(record.hash)
  await cache.findByHash(record.hash)
  await cache.findByHash('unknown')
  await cache.findByHash('unknown')
  t.equal(store.reads, 4, 'nothing served from memory while untrusted')
  cache.setTrusted(true)
  t.equal(cache.stats().entries, 0, 'what was read while untrusted is dropped')
  t.equal(cache.stats().trusted, true)
  await cache.findByHash(record.hash)
  await cache.findByHash(record.hash)
  t.equal(store.reads, 5)
})

t.test('while the store fails, a recent record still serves; an old one or an unknown hash does not', async (t) => {
  const store = fakeStore()
  const c = clock()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  const cache = createKeyCache({ store, ttlMs: 1000, staleIfErrorMs: 30_000, now: c.now })
  await cache.findByHash(record.hash)
  store.failing = true
  c.advance(5000)
  t.equal((await cache.findByHash(record.hash))?.id, record.id, 'served stale at 5 s')
  await t.rejects(cache.findByHash('never-seen'), /store down/, 'nothing unknown is accepted')
  c.advance(26_000)
  await t.rejects(cache.findByHash(record.hash), /store down/, 'too old at 31 s')
})

t.test(
  'the feed back before the store (a failover): a recent record still serves while the store fails, never fresh',
  async (t) => {
    const store = fakeStore()
    const c = clock()
    const record = makeKeyRecord()
    const other = makeKeyRecord()
    store.records.set(record.hash, record)
    store.records.set(other.hash, other)
    const cache = createKeyCache({ store, ttlMs: 60_000, staleIfErrorMs: 30_000, now: c.now })
    await cache.findByHash(record.hash)
    await cache.findByHash(other.hash)
    cache.setTrusted(false)
    cache.setTrusted(true)
    t.equal(cache.stats().entries, 0, 'the cache starts empty')
    const reads = store.reads
    t.equal((await cache.findByHash(record.hash))?.id, record.id)
    t.equal(store.reads, reads + 1, 'read from the store, not served from what was kept')
    store.failing = true
    cache.setTrusted(false)
    cache.setTrusted(true)
    c.advance(5000)
    t.equal((await cache.findByHash(record.hash))?.id, record.id, 'served stale while the store fails')
    cache.invalidate(other.id)
    await t.rejects(cache.findByHash(other.hash), /store down/, 'not a record a change message named')
    c.advance(26_000)
    await t.rejects(cache.findByHash(record.hash), /store down/, 'nor one read more than 30 s ago')
  },
)

t.test('the maps are bounded', async (t) => {
  const store = fakeStore()
  const cache = createKeyCache({ store, maxEntries: 10 })
  for (let i = 0; i < 100; i++) {
    const record = makeKeyRecord()
    store.records.set(record.hash, record)
    await cache.findByHash(record.hash)
    await cache.findByHash(`unknown-${i}`)
  }
  t.equal(cache.stats().entries, 10)
  t.equal(cache.stats().negativeEntries, 10)
})

t.test('clear forgets everything', async (t) => {
  const store = fakeStore()
  const record = makeKeyRecord()
  store.records.set(record.hash, record)
  const cache = createKeyCache({ store })
  await cache.findByHash(record.hash)
  await cache.findByHash('x')
  cache.clear()
  t.same({ e: cache.stats().entries, n: cache.stats().negativeEntries }, { e: 0, n: 0 })
})

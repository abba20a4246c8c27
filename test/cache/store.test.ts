// The two cache stores against one contract: caps hold under a flood of distinct entries,
// oldest first out, TTLs, purge by tenant, key and model; and what the stores keep is
// sealed per scope (seal.ts) and keyed so one scope cannot name another's entry (key.ts).
import t, { type Test } from 'tap'
import { createMemoryCacheStore } from '../../src/cache/memory-store.ts'
import { createRedisCacheStore } from '../../src/cache/redis-store.ts'
import { ENTRY_OVERHEAD_BYTES, type EntryLabels, type ResponseCacheStore } from '../../src/cache/port.ts'
import { cacheKey } from '../../src/cache/key.ts'
import { canonical } from '../../src/store/key-records.ts'
import { createSealer } from '../../src/cache/seal.ts'
import { IGNORED_FIELDS } from '../../src/cache/key-fields.ts'
import { clientAsk } from '../../src/cache/policy.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'

const labels = (over: Partial<EntryLabels> = {}): EntryLabels => ({
  keyId: 'key_a',
  owner: 'alice',
  tenant: 'acme',
  model: 'm1',
  ...over,
})
const SCOPE_CAP = 20 * (1000 + ENTRY_OVERHEAD_BYTES)

async function contract(
  t: Test,
  store: ResponseCacheStore,
  scopeBytes: (scope: string) => Promise<number>,
): Promise<void> {
  await t.test('a flood of distinct entries never takes a scope over its cap', async (t) => {
    let evicted = 0
    for (let i = 0; i < 200; i++) {
      const r = await store.put('o:alice', `k${i}`, Buffer.alloc(1000, i % 256), 60_000, labels())
      evicted += r.evicted
      t.ok((await scopeBytes('o:alice')) <= SCOPE_CAP, `within the cap after ${i + 1}`)
    }
    t.equal(evicted, 180, 'the oldest went first, one for each past the twentieth')
    t.equal(await store.get('o:alice', 'k0'), undefined)
    t.same(await store.get('o:alice', 'k199'), Buffer.alloc(1000, 199))
    t.same(await store.put('o:alice', 'huge', Buffer.alloc(SCOPE_CAP), 60_000, labels()), { evicted: 0, stored: false })
  })
  await t.test('scopes are apart, and an expired entry is gone', async (t) => {
    t.equal(await store.get('o:bob', 'k199'), undefined, "another scope's key names nothing")
    await store.put('o:bob', 'short', Buffer.from('x'), 1, labels({ owner: 'bob' }))
    const gone = await pollUntil(
      () => store.get('o:bob', 'short'),
      (v) => v === undefined,
      100,
      2,
    )
    t.ok(gone.met, 'gone once its 1 ms TTL passed')
  })
  await t.test('purge by tenant, key and model', async (t) => {
    await store.put('t:acme', 'a', Buffer.from('a'), 60_000, labels({ keyId: 'key_1', model: 'm1' }))
    await store.put('t:acme', 'b', Buffer.from('b'), 60_000, labels({ keyId: 'key_2', model: 'm2' }))
    await store.put('t:other', 'c', Buffer.from('c'), 60_000, labels({ tenant: 'other', keyId: 'key_3', model: 'm1' }))
    t.equal(await store.purge({ keyId: 'key_2' }), 1)
    t.equal(await store.get('t:acme', 'b'), undefined)
    t.equal(await store.purge({ tenant: 'other', model: 'm1' }), 1)
    t.equal(await store.get('t:other', 'c'), undefined)
    t.ok(await store.get('t:acme', 'a'))
    t.ok((await store.purge({})) >= 1)
    t.equal(await store.get('t:acme', 'a'), undefined)
    t.equal(await store.get('o:alice', 'k199'), undefined)
  })
}

t.test('memory store', async (t) => {
  const store = createMemoryCacheStore({ maxBytes: 10 * SCOPE_CAP, scopeMaxBytes: SCOPE_CAP })
  await contract(t, store, async () => store.bytes() ?? 0)
  await t.test('the whole cache is held to its own bound', async (t) => {
    const small = createMemoryCacheStore({ maxBytes: 5 * (1000 + ENTRY_OVERHEAD_BYTES), scopeMaxBytes: SCOPE_CAP })
    for (let i = 0; i < 50; i++) await small.put(`o:${i}`, 'k', Buffer.alloc(1000), 60_000, labels())
    t.ok((small.bytes() ?? 0) <= 5 * (1000 + ENTRY_OVERHEAD_BYTES))
  })
})

t.test('redis store', async (t) => {
  const ns = testNamespace(t, 'cache-store', 'cache-store-test')
  const { prefix } = ns.fresh()
  const store = createRedisCacheStore(ns.admin, prefix, { scopeMaxBytes: SCOPE_CAP })
  await contract(t, store, async (scope) =>
    Number((await ns.admin.get(`${prefix}{rc:${encodeURIComponent(scope)}}:b`)) ?? 0),
  )
})

t.test('keys and seals', async (t) => {
  const parts = {
    scope: 'o:alice',
    endpoint: 'chat.completions' as const,
    model: 'm',
    body: { b: 1, a: [{ y: 2, x: 1 }] },
  }
  t.equal(canonical({ b: 1, a: [{ y: 2, x: 1 }] }), '{"a":[{"x":1,"y":2}],"b":1}')
  const key = cacheKey('secret', parts)
  t.equal(cacheKey('secret', { ...parts, body: { a: [{ x: 1, y: 2 }], b: 1, stream: true, user: 'u' } }), key)
  t.not(cacheKey('secret', { ...parts, scope: 'o:bob' }), key, 'another scope, another key')
  t.not(cacheKey('secret', { ...parts, body: { ...parts.body, seed: 1 } }), key)
  t.not(cacheKey('other secret', parts), key)
  // A body cannot forge the scope by carrying its separators.
  t.not(cacheKey('s', { ...parts, scope: 'o:a', model: 'x' }), cacheKey('s', { ...parts, scope: 'o:a1:x', model: '' }))
  for (const row of IGNORED_FIELDS) t.ok(row.why.length > 10, `${row.field} says why`)

  const sealer = createSealer('secret')
  const sealed = sealer.seal('o:alice', 'k', Buffer.from('reply'))
  t.same(sealer.open('o:alice', 'k', sealed), Buffer.from('reply'))
  t.equal(sealer.open('o:bob', 'k', sealed), undefined, "another scope's key does not open it")
  t.equal(sealer.open('o:alice', 'k2', sealed), undefined, 'nor under another cache key')
  t.equal(createSealer('other').open('o:alice', 'k', sealed), undefined)
  t.notOk(sealed.includes(Buffer.from('reply')), 'encrypted at rest')

  t.same(clientAsk('no-cache'), { read: false, store: true })
  t.same(clientAsk('No-Store'), { read: false, store: false })
  t.same(clientAsk('max-age=30, foo'), { read: true, store: true, maxAgeSeconds: 30 })
  t.same(clientAsk(undefined), { read: true, store: true })
})

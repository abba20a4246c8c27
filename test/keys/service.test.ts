// The key lifecycle on a real (embedded) store: create, list, update, rotate, revoke,
// what each refuses, and that every change is announced for the caches.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { PlansConfig } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { createKeyHasher, isWellFormedKey } from '../../src/keys/format.ts'
import { KeyService, MAX_GRACE_SECONDS, publicKeyView } from '../../src/keys/service.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import { StoreConflictError } from '../../src/store/errors.ts'
import type { KeyStore, Stores } from '../../src/store/ports.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { createRedisStores } from '../../src/store/redis.ts'
import { REDIS_URL, redisMissing, redisNamespace } from './redis-namespace.ts'

const plans: PlansConfig = {
  defaultTier: 'Basic',
  tiers: {
    Basic: { default: { rpm: 20 }, models: {} },
    Standard4000: { default: { rpm: 600 }, models: { 'gpt-x': { input_price: 1, output_price: 2 } } },
  },
}

function setup(t: Test, start = new Date('2030-01-01T00:00:00Z')) {
  const stores = openEmbeddedStores(mkdtempSync(join(tmpdir(), 'tollgate-keys-')))
  t.teardown(() => stores.close())
  let now = start
  const changes: string[] = []
  const hash = createKeyHasher('test-secret-0123456789abcdefghijkl')
  const service = new KeyService({
    store: stores.keys,
    hash,
    plans,
    models: ['gpt-x', 'embed-y'],
    onChange: async (id) => {
      changes.push(id)
    },
    now: () => now,
  })
  return {
    stores,
    service,
    hash,
    changes,
    advance: (ms: number) => {
      now = new Date(now.getTime() + ms)
    },
  }
}

async function refused(
  t: Test,
  promise: Promise<unknown>,
  status: number,
  param?: string | null,
): Promise<GatewayError | undefined> {
  try {
    await promise
    t.fail(`expected a ${status}`)
    return undefined
  } catch (err) {
    t.type(err, GatewayError)
    const e = err as GatewayError
    t.equal(e.status, status, e.message)
    if (param !== undefined) t.equal(e.param, param)
    return e
  }
}

t.test('create stores only the hash and shows the secret once', async (t) => {
  const { service, stores, hash } = setup(t)
  const { record, key } = await service.create({
    name: 'ci',
    owner: 'team-a',
    tier: 'Standard4000',
    models: ['gpt-x', 'gpt-x'],
    endpoints: ['chat.completions'],
    expires_at: '2030-06-01T00:00:00+02:00',
    limits: { '*': { rpm: 5 } },
  })
  t.ok(isWellFormedKey(key))
  t.equal(record.hash, hash(key))
  t.equal(record.prefix, key.slice(0, 12))
  t.same(record.models, ['gpt-x'], 'duplicates dropped')
  t.equal(record.expiresAt, '2030-05-31T22:00:00.000Z', 'expiry normalised to UTC')
  const stored = await stores.keys.get(record.id)
  t.notMatch(JSON.stringify(stored), key, 'the secret is not stored')
  t.notMatch(JSON.stringify(publicKeyView(record)), record.hash, 'the view has no hash')
  t.notOk('hash' in publicKeyView(record))
})

t.test('create refuses unknown tier, past or malformed expiry, unknown fields, models and overrides', async (t) => {
  const { service } = setup(t)
  await refused(t, service.create({ tier: 'Gold' }), 400, 'tier')
  await refused(t, service.create({ expires_at: '2029-12-31T23:59:59Z' }), 400, 'expires_at')
  await refused(t, service.create({ expires_at: 'tomorrow' }), 400, 'expires_at')
  await refused(t, service.create({ expires_at: '2030-02-30T00:00:00Z' }), 400, 'expires_at')
  const unknown = await refused(t, service.create({ name: 'x', admin: true }), 400)
  t.match(unknown?.message, /Unknown field\(s\): admin/)
  await refused(t, service.create({ models: ['gpt-typo'] }), 400, 'models.0')
  await refused(t, service.create({ endpoints: ['chat.completions', 'shell'] }), 400, 'endpoints.1')
  await refused(t, service.create({ limits: { 'gpt-typo': { rpm: 1 } } }), 400, 'limits')
  await refused(t, service.create({ limits: { '*': { rpm: -1 } } }), 400)
  await refused(t, service.create({ name: '' }), 400, 'name')
  await refused(t, service.create('not an object'), 400)
})

t.test('list filters by owner, effective tier and effective status', async (t) => {
  const { service, advance } = setup(t)
  // A millisecond apart: list() is oldest first.
  const a = (await service.create({ owner: 'a' })).record
  advance(1)
  const b = (await service.create({ owner: 'b', tier: 'Standard4000' })).record
  advance(1)
  const c = (await service.create({ owner: 'a', tier: 'Basic', expires_at: '2030-01-01T00:00:10Z' })).record
  advance(1)
  const d = (await service.create({ owner: 'b' })).record
  await service.revoke(d.id)
  advance(20_000)
  const ids = async (filter: Parameters<KeyService['list']>[0]) => (await service.list(filter)).map((r) => r.id)
  t.same(await ids({}), [a.id, b.id, c.id, d.id])
  t.same(await ids({ owner: 'a' }), [a.id, c.id])
  t.same(await ids({ tier: 'Basic' }), [a.id, c.id, d.id], 'a key without a tier is on the default tier')
  t.same(await ids({ status: 'active' }), [a.id, b.id])
  t.same(await ids({ status: 'expired' }), [c.id])
  t.same(await ids({ status: 'revoked' }), [d.id])
  t.equal(service.view(c).status, 'expired')
  t.equal(service.view(a).tier, 'Basic')
})

t.test('update changes what it is given, resets with null, and is announced', async (t) => {
  const { service, changes } = setup(t)
  const { record } = await service.create({
    name: 'n',
    owner: 'o',
    models: ['gpt-x'],
    expires_at: '2031-01-01T00:00:00Z',
  })
  const updated = await service.update(record.id, {
    tier: 'Standard4000',
    models: null,
    endpoints: ['embeddings'],
    expires_at: null,
    name: 'renamed',
  })
  t.match(updated, {
    tier: 'Standard4000',
    models: null,
    endpoints: ['embeddings'],
    expiresAt: null,
    name: 'renamed',
    owner: 'o',
    hash: record.hash,
  })
  t.same(changes, [record.id], 'the change is announced')
  const again = await service.update(record.id, { tier: null })
  t.equal(again.tier, null)
  t.equal(again.name, 'renamed', 'untouched fields stay')
  await refused(t, service.update(record.id, { owner: 'someone-else' }), 400)
  await refused(t, service.update(record.id, { tier: 'Gold' }), 400, 'tier')
  await refused(t, service.update(record.id, { expires_at: '2000-01-01T00:00:00Z' }), 400, 'expires_at')
  await refused(t, service.update('key_000000000000000000000000', {}), 404)
  await refused(t, service.update('../../etc', {}), 404)
})

t.test('rotate: a new secret; the old hash kept only for the grace; bounds checked', async (t) => {
  const { service, hash, stores, changes } = setup(t)
  const { record, key: first } = await service.create({})
  const r1 = await service.rotate(record.id, { grace_seconds: 60 })
  t.not(r1.key, first)
  t.equal(r1.record.hash, hash(r1.key))
  t.equal(r1.record.previousHash, hash(first))
  t.equal(r1.record.previousHashValidUntil, '2030-01-01T00:01:00.000Z')
  t.equal(
    (await stores.keys.findByHash(hash(first)))?.id,
    record.id,
    'the old secret still finds the key during the grace',
  )
  const r2 = await service.rotate(record.id, {})
  t.equal(r2.record.previousHash, null, 'default grace: none')
  t.equal(await stores.keys.findByHash(hash(first)), null, 'a second rotation ends the first grace')
  t.equal(await stores.keys.findByHash(hash(r1.key)), null)
  t.equal((await stores.keys.findByHash(hash(r2.key)))?.id, record.id)
  t.same(changes, [record.id, record.id])
  await refused(t, service.rotate(record.id, { grace_seconds: MAX_GRACE_SECONDS + 1 }), 400, 'grace_seconds')
  await refused(t, service.rotate(record.id, { grace_seconds: -1 }), 400, 'grace_seconds')
  await refused(t, service.rotate(record.id, { grace_seconds: 1.5 }), 400, 'grace_seconds')
  await refused(t, service.rotate(record.id, { grace: 10 }), 400)
  await refused(t, service.rotate('key_ffffffffffffffffffffffff', {}), 404)
})

t.test('revoke is final and idempotent; a revoked key cannot be changed or rotated', async (t) => {
  const { service, changes, advance } = setup(t)
  const { record } = await service.create({})
  await service.rotate(record.id, { grace_seconds: 600 })
  const revoked = await service.revoke(record.id)
  t.equal(revoked.status, 'revoked')
  t.equal(revoked.revokedAt, '2030-01-01T00:00:00.000Z')
  t.not(revoked.previousHash, null, 'the previous secret stays indexed, to be refused as revoked too')
  t.equal(service.view(revoked).rotation_grace_until, null, 'no grace is shown for a revoked key')
  advance(1000)
  const again = await service.revoke(record.id)
  t.equal(again.revokedAt, revoked.revokedAt, 'revoking twice keeps the first time')
  t.equal(changes.length, 2, 'the second revoke announces nothing')
  await refused(t, service.update(record.id, { name: 'x' }), 400)
  await refused(t, service.rotate(record.id, {}), 400)
  await refused(t, service.revoke('key_ffffffffffffffffffffffff'), 404)
})

t.test('changes to one key on one instance run one at a time', async (t) => {
  const { service } = setup(t)
  const { record } = await service.create({})
  // Rotations and a revoke racing: the revoke must not be undone by a rotation that read before it.
  const results = await Promise.allSettled([
    service.rotate(record.id, {}),
    service.revoke(record.id),
    service.rotate(record.id, {}),
  ])
  t.equal(results[0]?.status, 'fulfilled')
  t.equal(results[1]?.status, 'fulfilled')
  t.equal(results[2]?.status, 'rejected', 'the rotation queued after the revoke sees it')
  t.equal((await service.get(record.id))?.status, 'revoked')
})

// --- across instances ------------------------------------------------------------------
// Two KeyServices on one store are two gateway instances: the per-instance queue above
// does not order them. Instance A's store pauses between A's read and A's write, and
// instance B acts on the key in that window.

/** The store as instance A sees it: its next replace waits until released. */
function pausingBeforeWrite(store: KeyStore) {
  let reached = (): void => undefined
  let release = (): void => undefined
  const atWrite = new Promise<void>((resolve) => {
    reached = resolve
  })
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let paused = false
  let writes = 0
  const wrapped: KeyStore = {
    insert: (record) => store.insert(record),
    get: (id) => store.get(id),
    findByHash: (hash) => store.findByHash(hash),
    list: (filter) => store.list(filter),
    async replace(record, expected) {
      writes++
      if (!paused) {
        paused = true
        reached()
        await released
      }
      return store.replace(record, expected)
    },
  }
  return { store: wrapped, atWrite, release, writes: () => writes }
}

/** One store, two instances: A (pausing before its next write) and B, each with its own connection. */
interface Shared {
  readonly storeA: Stores
  readonly storeB: Stores
}

function twoInstances(t: Test, { storeA, storeB }: Shared) {
  const hash = createKeyHasher('test-secret-0123456789abcdefghijkl')
  const pausing = pausingBeforeWrite(storeA.keys)
  const changesA: string[] = []
  const now = () => new Date('2030-01-01T00:00:00Z')
  const a = new KeyService({
    store: pausing.store,
    hash,
    plans,
    onChange: async (id) => {
      changesA.push(id)
    },
    now,
  })
  const b = new KeyService({ store: storeB.keys, hash, plans, now })
  t.teardown(() => pausing.release())
  return { a, b, hash, pausing, changesA }
}

async function raceTests(t: Test, open: () => Promise<Shared>): Promise<void> {
  const race = (title: string, body: (t: Test, keys: KeyStore, shared: Shared) => Promise<void>): void => {
    t.test(title, async (t) => {
      const shared = await open()
      t.teardown(async () => {
        await shared.storeA.close()
        await shared.storeB.close()
      })
      await body(t, shared.storeB.keys, shared)
    })
  }

  race('a revoke on another instance is not undone by an update that read before it', async (t, keys, shared) => {
    const { a, b, pausing, changesA } = twoInstances(t, shared)
    const { record } = await b.create({ name: 'before' })
    const update = a.update(record.id, { name: 'after', tier: 'Standard4000' })
    await pausing.atWrite // A has read the active key and built its update
    const revoked = await b.revoke(record.id)
    pausing.release()
    const e = await refused(t, update, 400)
    t.match(e?.message, /revoked/)
    t.strictSame(await keys.get(record.id), revoked, 'the revoked record stands, untouched')
    t.equal(pausing.writes(), 1, 'one write tried and refused; after re-reading, A refused the change')
    t.same(changesA, [], 'A announced nothing')
  })

  race('a revoke on another instance is not undone by a rotation that read before it', async (t, keys, shared) => {
    const { a, b, hash, pausing } = twoInstances(t, shared)
    const { record, key } = await b.create({})
    const rotate = a.rotate(record.id, { grace_seconds: 600 })
    await pausing.atWrite
    const revoked = await b.revoke(record.id)
    pausing.release()
    await refused(t, rotate, 400)
    t.strictSame(await keys.get(record.id), revoked)
    t.equal((await keys.findByHash(hash(key)))?.status, 'revoked', 'the old secret finds only the revoked key')
    t.same(
      (await keys.list({ status: 'active' })).map((r) => r.id),
      [],
      'no active key came back',
    )
  })

  race("a revoke that read before another instance's update still applies, on top of it", async (t, keys, shared) => {
    const { a, b, pausing, changesA } = twoInstances(t, shared)
    const { record } = await b.create({ name: 'before' })
    const revoke = a.revoke(record.id)
    await pausing.atWrite
    await b.update(record.id, { name: 'renamed meanwhile' })
    pausing.release()
    const revoked = await revoke
    t.equal(revoked.status, 'revoked')
    t.equal(revoked.name, 'renamed meanwhile', 'the revoke was re-applied to the record as it is now')
    t.strictSame(await keys.get(record.id), revoked)
    t.equal(pausing.writes(), 2, 'refused once, then applied')
    t.same(changesA, [record.id], 'announced once')
  })

  race('two updates on two instances: neither change is lost', async (t, keys, shared) => {
    const { a, b, pausing } = twoInstances(t, shared)
    const { record } = await b.create({ name: 'before' })
    const update = a.update(record.id, { name: 'from a' })
    await pausing.atWrite
    await b.update(record.id, { tier: 'Standard4000' })
    pausing.release()
    t.match(await update, { name: 'from a', tier: 'Standard4000' })
    t.match(await keys.get(record.id), { name: 'from a', tier: 'Standard4000', status: 'active' })
  })
}

t.test('across instances, embedded store (two connections to one database file)', async (t) => {
  const base = mkdtempSync(join(tmpdir(), 'tollgate-keys-race-'))
  t.teardown(() => rmSync(base, { recursive: true, force: true }))
  let n = 0
  await raceTests(t, async () => {
    const dir = join(base, `db${n++}`)
    return { storeA: openEmbeddedStores(dir), storeB: openEmbeddedStores(dir) }
  })
})

t.test('across instances, Redis store (two clients on one namespace)', async (t) => {
  const ns = await redisNamespace(t)
  if (!ns.up) {
    t.fail(redisMissing())
    return
  }
  let n = 0
  await raceTests(t, async () => {
    const prefix = `${ns.prefix}${n++}:`
    const instance = (name: string): Stores =>
      createRedisStores(createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name }), prefix)
    return { storeA: instance('tgtest-keys-race-a'), storeB: instance('tgtest-keys-race-b') }
  })
})

t.test('a key that keeps changing underneath gives up with a conflict after a bounded number of tries', async (t) => {
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  let writes = 0
  const busy: KeyStore = {
    ...stores.keys,
    replace: async () => {
      writes++
      return 'stale'
    },
  }
  const hash = createKeyHasher('test-secret-0123456789abcdefghijkl')
  const service = new KeyService({ store: busy, hash, plans })
  const { record } = await service.create({ name: 'busy' })
  await t.rejects(service.update(record.id, { name: 'x' }), StoreConflictError)
  t.ok(writes > 1 && writes <= 16, `retried, a bounded number of times (${writes})`)
  t.strictSame(await stores.keys.get(record.id), record, 'nothing changed')
})

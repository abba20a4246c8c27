// The key lifecycle on a real (embedded) store: create, list, update, rotate, revoke,
// what each refuses, and that every change is announced for the caches.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { PlansConfig } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { createKeyHasher, isWellFormedKey } from '../../src/keys/format.ts'
import { KeyService, MAX_GRACE_SECONDS, publicKeyView } from '../../src/keys/service.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'

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
    store: stores.keys, hash, plans, models: ['gpt-x', 'embed-y'],
    onChange: async (id) => { changes.push(id) },
    now: () => now,
  })
  return { stores, service, hash, changes, advance: (ms: number) => { now = new Date(now.getTime() + ms) } }
}

async function refused(t: Test, promise: Promise<unknown>, status: number, param?: string | null): Promise<GatewayError | undefined> {
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
  const { record, key } = await service.create({ name: 'ci', owner: 'team-a', tier: 'Standard4000', models: ['gpt-x', 'gpt-x'], endpoints: ['chat.completions'], expires_at: '2030-06-01T00:00:00+02:00', limits: { '*': { rpm: 5 } } })
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
  const { record } = await service.create({ name: 'n', owner: 'o', models: ['gpt-x'], expires_at: '2031-01-01T00:00:00Z' })
  const updated = await service.update(record.id, { tier: 'Standard4000', models: null, endpoints: ['embeddings'], expires_at: null, name: 'renamed' })
  t.match(updated, { tier: 'Standard4000', models: null, endpoints: ['embeddings'], expiresAt: null, name: 'renamed', owner: 'o', hash: record.hash })
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
  t.equal((await stores.keys.findByHash(hash(first)))?.id, record.id, 'the old secret still finds the key during the grace')
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
  t.equal(revoked.previousHash, null, 'the grace ends with the key')
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
    service.rotate(record.id, {}), service.revoke(record.id), service.rotate(record.id, {}),
  ])
  t.equal(results[0]?.status, 'fulfilled')
  t.equal(results[1]?.status, 'fulfilled')
  t.equal(results[2]?.status, 'rejected', 'the rotation queued after the revoke sees it')
  t.equal((await service.get(record.id))?.status, 'revoked')
})

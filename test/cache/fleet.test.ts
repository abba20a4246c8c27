// The cache as an operator sees it: under a flood of distinct bodies it stays within its caps
// (both stores), a reply cached on Redis survives a restart of the gateway and is gone after
// DELETE /admin/cache, and the key scope keeps one owner's keys apart.
import t from 'tap'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'
import { admin, adminSend, metric, onSharedRedis, startCacheGateway } from './helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const ask = (content: string) => ({ model: MODEL, temperature: 0, messages: [{ role: 'user' as const, content }] })
const CAP = 16 * 1024

t.test('a flood of distinct bodies stays within the caps', async (t) => {
  const ns = testNamespace(t, 'cache-fleet', 'cache-fleet-test')
  for (const store of ['embedded', 'redis'] as const) {
    await t.test(store, async (t) => {
      const { prefix } = ns.fresh()
      const gw = await startCacheGateway({
        store,
        redis: onSharedRedis(prefix),
        responseCache: { maxBytes: CAP, scopeMaxBytes: CAP },
      })
      t.teardown(() => gw.stop())
      const owner = 'flooder'
      const { key } = await gw.createKey({ tier: 'Standard4000', owner })
      const c = sdkClient(gw, key)
      const bytesOnRedis = async (): Promise<number> =>
        Number((await ns.admin.get(`${prefix}{rc:${encodeURIComponent(`o:${owner}`)}}:b`)) ?? 0)
      let peak = 0
      for (let round = 0; round < 8; round++) {
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            c.chat.completions.create(ask(`flood ${round} ${i} ${'x'.repeat(200)}`)),
          ),
        )
        const held = store === 'redis' ? await bytesOnRedis() : await metric(gw, 'tollgate_response_cache_bytes')
        peak = Math.max(peak, held)
      }
      t.ok(peak > 0, `something was kept (peak ${peak} bytes)`)
      t.ok(peak <= CAP, `never over the cap: peak ${peak} <= ${CAP}`)
      t.ok((await metric(gw, 'tollgate_response_cache_evictions_total')) > 0, 'older replies were evicted')
      t.ok((await metric(gw, 'tollgate_response_cache_stored_bytes_total')) > CAP, 'more than the cap went through')
    })
  }
})

t.test('on Redis a cached reply survives a restart, and DELETE /admin/cache empties it', async (t) => {
  const { prefix } = testNamespace(t, 'cache-restart', 'cache-restart-test').fresh()
  const redis = onSharedRedis(prefix)
  let gw = await startCacheGateway({ store: 'redis', redis })
  const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: 'survivor' })
  const body = ask('remember me')
  const first = await sdkClient(gw, key).chat.completions.create(body)
  const kept = await sdkClient(gw, key).chat.completions.create({ ...ask('and me'), max_tokens: 9 })
  t.equal(await gw.stop(), 0)
  gw = await startCacheGateway({ store: 'redis', redis })
  t.teardown(() => gw.stop())
  const c = sdkClient(gw, key)
  const again = await c.chat.completions.create(body).withResponse()
  t.equal(again.response.headers.get('x-tollgate-cache'), 'hit', 'served after the restart')
  t.equal(again.response.headers.get('x-tollgate-cache-origin-id'), first.id)

  t.same(await admin(gw, 'DELETE', `/admin/cache?key_id=${id}&model=nobody`), {
    object: 'response_cache.purge',
    deleted: 0,
  })
  t.same(await admin(gw, 'DELETE', `/admin/cache?key_id=${id}&model=${MODEL}`), {
    object: 'response_cache.purge',
    deleted: 2,
  })
  const after = await c.chat.completions.create(body).withResponse()
  t.equal(after.response.headers.get('x-tollgate-cache'), 'miss', 'gone after the purge')
  const other = await c.chat.completions.create({ ...ask('and me'), max_tokens: 9 }).withResponse()
  t.not(other.response.headers.get('x-tollgate-cache-origin-id'), kept.id)
  const audit = (await admin(gw, 'GET', '/admin/audit?action=response_cache.purge')) as { data: unknown[] }
  t.ok(audit.data.length >= 1, 'the purge is in the audit log')
  const refused = await fetch(`${gw.url}/admin/cache`, { method: 'DELETE' })
  t.equal(refused.status, 401)
})

t.test('the key scope keeps even the keys of one owner apart', async (t) => {
  const gw = await startCacheGateway({ store: 'embedded', cache: { scope: 'key' } })
  t.teardown(() => gw.stop())
  const one = await gw.createKey({ tier: 'Standard4000', owner: 'same-owner' })
  const two = await gw.createKey({ tier: 'Standard4000', owner: 'same-owner' })
  const body = ask('per key')
  await sdkClient(gw, one.key).chat.completions.create(body)
  const hit = await sdkClient(gw, one.key).chat.completions.create(body).withResponse()
  const otherKey = await sdkClient(gw, two.key).chat.completions.create(body).withResponse()
  t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
  t.equal(otherKey.response.headers.get('x-tollgate-cache'), 'miss', 'the key scope keeps even one owner’s keys apart')
})

t.test('the tenant scope: owners of one tenant share a reply, another tenant never sees it', async (t) => {
  const gw = await startCacheGateway({ store: 'embedded', cache: { scope: 'tenant' } })
  t.teardown(() => gw.stop())
  for (const [username, tenant] of [
    ['ann', 'acme'],
    ['art', 'acme'],
    ['eve', 'globex'],
  ])
    await adminSend(gw, 'POST', '/admin/users', { username, password: 'a long enough password 1', tenant })
  // The accounts' tenants are read while a tenant budget is set (budgets/book.ts).
  await adminSend(gw, 'PUT', '/admin/budgets/tenant/acme', { amount: 1000, period: 'month' })
  const client = async (owner: string) => sdkClient(gw, (await gw.createKey({ tier: 'Standard4000', owner })).key)
  const [ann, art, eve] = [await client('ann'), await client('art'), await client('eve')]
  // Until the accounts are read (a second at most) an owner is in no tenant: poll a probe until it is shared.
  const probe = ask('a probe')
  const known = await pollUntil(
    async () => {
      await ann.chat.completions.create(probe)
      return (await art.chat.completions.create(probe).withResponse()).response.headers.get('x-tollgate-cache')
    },
    (v) => v === 'hit',
    100,
    100,
  )
  t.ok(known.met, 'the tenants are known')
  const body = ask('the team question')
  const first = await ann.chat.completions.create(body)
  const shared = await art.chat.completions.create(body).withResponse()
  t.equal(shared.response.headers.get('x-tollgate-cache'), 'hit')
  t.equal(shared.response.headers.get('x-tollgate-cache-origin-id'), first.id, "art, in ann's tenant, gets ann's reply")
  const outside = await eve.chat.completions.create(body).withResponse()
  t.equal(outside.response.headers.get('x-tollgate-cache'), 'miss', 'eve, in another tenant, does not')
  const purged = (await admin(gw, 'DELETE', '/admin/cache?tenant=acme')) as { deleted: number }
  t.ok(purged.deleted >= 2, `the tenant's entries purged (${purged.deleted})`)
  const again = await art.chat.completions.create(body).withResponse()
  t.equal(again.response.headers.get('x-tollgate-cache'), 'miss')
  const eves = await eve.chat.completions.create(body).withResponse()
  t.equal(eves.response.headers.get('x-tollgate-cache'), 'hit', "another tenant's entries stay")
})

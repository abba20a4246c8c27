// A tier's chargeShare on a hit: exactly that share of the stored reply's price is spent from
// the key's budgets (and metered in usage), in integer nano-units, on both stores; a budget
// that cannot cover the share refuses the hit with admission's own 429; with a share of 0 no
// budget is touched, even a spent one.
import t from 'tap'
import OpenAI from 'openai'
import { costNanos, NANOS_PER_UNIT } from '../../src/keys/money.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { testNamespace } from '../helpers/redis.ts'
import type { RunningTollgate } from '../helpers/gateway.ts'
import type { ModelLimits } from '../../src/config/schema.ts'
import { admin, cachedPlans, onSharedRedis, startCacheGateway } from './helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const EMBED = 'text-embedding-bge-m3'
const SHARE = 0.25
// Standard4000's prices for MODEL, as the gateway reads them.
const PRICES = (cachedPlans() as { tiers: Record<string, { models: Record<string, ModelLimits> }> }).tiers.Standard4000
  ?.models[MODEL] ?? { input_price: 0, output_price: 0 }

interface KeyUsage {
  totals: { requests: number; cached_requests: number; cost: number }
  budgets: Array<{ scope: string; spent: number; reserved: number }>
}

async function put(gw: RunningTollgate, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${gw.url}${path}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status !== 200) throw new Error(`PUT ${path}: ${res.status} ${await res.text()}`)
}

const nanos = (units: number): number => Math.round(units * NANOS_PER_UNIT)

for (const store of ['embedded', 'redis'] as const) {
  t.test(store, async (t) => {
    const redis =
      store === 'redis'
        ? onSharedRedis(testNamespace(t, 'cache-charge', 'cache-charge-test').fresh().prefix)
        : undefined
    const gw = await startCacheGateway({
      store,
      ...(redis === undefined ? {} : { redis }),
      cache: { chargeShare: SHARE, models: { [EMBED]: { chargeShare: 0 } } },
    })
    t.teardown(() => gw.stop())
    const owner = `payer-${store}`
    const { key, id } = await gw.createKey({ tier: 'Standard4000', owner })
    await put(gw, `/admin/budgets/key/${id}`, { amount: 10, period: 'month' })
    await put(gw, `/admin/budgets/owner/${owner}`, { amount: 10, period: 'month' })
    const c = sdkClient(gw, key)
    const body = {
      model: MODEL,
      temperature: 0,
      max_tokens: 20,
      messages: [{ role: 'user' as const, content: `pay ${store}` }],
    }
    const usage = async (): Promise<KeyUsage> => (await admin(gw, 'GET', `/admin/keys/${id}/usage`)) as KeyUsage
    const spentOf = (u: KeyUsage): number[] => u.budgets.map((b) => nanos(b.spent))

    const miss = await c.chat.completions.create(body)
    const full = costNanos(PRICES, miss.usage?.prompt_tokens ?? 0, miss.usage?.completion_tokens ?? 0)
    t.ok(full > 0, `the miss cost ${full} nano-units`)
    const share = Math.round(full * SHARE)
    const afterMiss = await usage()
    t.same(spentOf(afterMiss), [full, full], 'the miss spent its price on the key and owner budgets')

    for (let i = 1; i <= 2; i++) {
      const hit = await c.chat.completions.create(body).withResponse()
      t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
      const now = await usage()
      t.same(spentOf(now), [full + i * share, full + i * share], `hit ${i}: exactly ${share} more on each budget`)
      t.same(
        now.budgets.map((b) => b.reserved),
        [0, 0],
        'nothing left held',
      )
      t.equal(nanos(now.totals.cost), full + i * share, 'and metered in usage')
    }

    // A share of 0 (the embedding model's own rule) touches nothing.
    const embed = { model: EMBED, input: `free ${store}` }
    await c.embeddings.create(embed)
    const beforeFree = spentOf(await usage())
    const freeHit = await c.embeddings.create(embed).withResponse()
    t.equal(freeHit.response.headers.get('x-tollgate-cache'), 'hit')
    t.same(spentOf(await usage()), beforeFree, 'a hit at share 0 spends nothing')

    // The key's budget lowered to what is spent: the next hit's share does not fit.
    const spent = spentOf(await usage())[0] ?? 0
    await put(gw, `/admin/budgets/key/${id}`, { amount: spent / NANOS_PER_UNIT, period: 'month' })
    const refused = await c.chat.completions.create(body).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(refused instanceof OpenAI.RateLimitError, 'the hit is refused with a 429')
    t.equal((refused as InstanceType<typeof OpenAI.RateLimitError>).code, 'insufficient_quota')
    const after = await usage()
    t.same(spentOf(after), [spent, spent], 'a refused hit spends nothing on any budget')
    t.equal(after.totals.cached_requests, 3, 'and is not metered')
    const stillFree = await c.embeddings.create(embed).withResponse()
    t.equal(stillFree.response.headers.get('x-tollgate-cache'), 'hit', 'a share-0 hit is served from a spent budget')
  })
}

t.test("on Redis a tenant's budget, on its own slot, is spent the share too", async (t) => {
  const { prefix } = testNamespace(t, 'cache-charge-tenant', 'cache-charge-tenant-test').fresh()
  const gw = await startCacheGateway({ store: 'redis', redis: onSharedRedis(prefix), cache: { chargeShare: SHARE } })
  t.teardown(() => gw.stop())
  const post = await fetch(`${gw.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'tess', password: 'a long enough password 1', tenant: 'tco' }),
  })
  t.equal(post.status, 201)
  await put(gw, '/admin/budgets/tenant/tco', { amount: 10, period: 'month' })
  const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: 'tess' })
  const tenantSpent = async (): Promise<number | undefined> => {
    const u = (await admin(gw, 'GET', `/admin/keys/${id}/usage`)) as KeyUsage
    const b = u.budgets.find((x) => x.scope === 'tenant')
    return b === undefined ? undefined : nanos(b.spent)
  }
  // The accounts' tenants are read within a second or so (budgets/book.ts).
  t.ok((await pollUntil(tenantSpent, (v) => v !== undefined, 100, 100)).met, "the tenant's budget applies")
  const c = sdkClient(gw, key)
  const body = {
    model: MODEL,
    temperature: 0,
    max_tokens: 20,
    messages: [{ role: 'user' as const, content: 'tenant pays' }],
  }
  const miss = await c.chat.completions.create(body)
  const full = costNanos(PRICES, miss.usage?.prompt_tokens ?? 0, miss.usage?.completion_tokens ?? 0)
  t.equal(await tenantSpent(), full)
  const hit = await c.chat.completions.create(body).withResponse()
  t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
  t.equal(await tenantSpent(), full + Math.round(full * SHARE), 'exactly the share more')
})

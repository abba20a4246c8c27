// A key that fills its stored queue (Prefer: respond-async) meets its cap: 429 queue_full
// with retry-after, in the contract's shape, while another key is unaffected and its own
// list still answers at once and exactly (a filtered page is full, has_more exact). A body
// larger than the whole byte cap is refused 413 (it can never fit). Caps are per tier.
// Run on the embedded store and on Redis. Workers are off (queue.concurrency 0): what is
// accepted stays queued, as behind a slow upstream.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { ASYNC, chatBody, cluster, del, embeddedGateway, get, post, type GatewaySettings } from './helpers.ts'

const plans = parse(readFileSync(join(resolve(import.meta.dirname, '../..'), 'config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
const settings: GatewaySettings = {
  queue: { concurrency: 0 },
  config: (doc) => {
    doc.storageCaps = { queuedRequests: 1000, queuedBytes: 67_108_864, files: 1000, fileBytes: 1_073_741_824 }
    // Basic: 6 requests; Standard1000: 30 KB of bodies.
    const tiers = structuredClone(plans.tiers)
    tiers.Basic = { ...tiers.Basic, storageCaps: { queuedRequests: 6 } }
    tiers.Standard1000 = { ...tiers.Standard1000, storageCaps: { queuedRequests: 100, queuedBytes: 30_000 } }
    doc.plans = { defaultTier: 'Basic', tiers }
  },
}

interface ListReply {
  data: Array<{ id: string; status: string }>
  has_more: boolean
  last_id: string | null
}

async function behaves(t: Test, gw: RunningTollgate): Promise<void> {
  const attacker = (await gw.createKey({ owner: 'mallory', tier: 'Basic' })).key
  const bystander = (await gw.createKey({ owner: 'bob', tier: 'Basic' })).key
  const url = `${gw.url}/queue/chat/completions`

  const accepted: string[] = []
  for (let i = 0; i < 6; i++) {
    const res = await post(url, attacker, chatBody(`fill ${i}`), ASYNC)
    t.equal(res.status, 202, `request ${i} is stored`)
    accepted.push(res.json<{ id: string }>().id)
  }
  const refused = await Promise.all(
    Array.from({ length: 8 }, (_, i) => post(url, attacker, chatBody(`more ${i}`), ASYNC)),
  )
  t.same(
    refused.map((r) => r.status),
    Array(8).fill(429),
    'past the cap every request is refused',
  )
  const full = refused[0]
  const error = full?.json().error
  t.same(Object.keys(error ?? {}).sort(), ['code', 'message', 'param', 'type'])
  t.equal(error?.code, 'queue_full')
  t.equal(error?.type, 'requests')
  t.match(error?.message, /6 stored asynchronous requests .* cap \(6\)/)
  // Basic allows this model 20 requests a minute: a place frees about every 3 s.
  t.equal(full?.headers.get('retry-after'), '3')
  t.equal(full?.headers.get('retry-after-ms'), '3000')
  t.equal(full?.headers.get('x-ratelimit-limit-requests'), '20', "the refusal carries the key's limit headers")

  const other = await post(url, bystander, chatBody('mine'), ASYNC)
  t.equal(other.status, 202, 'another key of the same tier is unaffected')

  const started = performance.now()
  const listed = await get(`${gw.url}/queue/requests?limit=100`, attacker)
  const ms = performance.now() - started
  t.equal(listed.status, 200)
  const list = listed.json<ListReply>()
  t.same(
    list.data.map((r) => r.id),
    [...accepted].reverse(),
    'the list holds exactly what was stored, newest first',
  )
  t.equal(list.has_more, false)
  t.ok(ms < 5000, `the list answers at the cap (${ms.toFixed(0)} ms)`)
  const page = (await get(`${gw.url}/queue/requests?status=queued&limit=2`, attacker)).json<ListReply>()
  t.same(
    page.data.map((r) => r.id),
    [accepted[5], accepted[4]],
  )
  t.equal(page.has_more, true)
  const tail = (
    await get(`${gw.url}/queue/requests?status=queued&limit=4&after=${page.last_id}`, attacker)
  ).json<ListReply>()
  t.equal(tail.data.length, 4)
  t.equal(tail.has_more, false, 'has_more is false on the page that ends with the last one')
  t.same((await get(`${gw.url}/queue/requests?status=completed&limit=10`, attacker)).json<ListReply>().data, [])
  t.same(
    (await get(`${gw.url}/queue/requests?limit=10`, bystander)).json<ListReply>().data.map((r) => r.id),
    [other.json<{ id: string }>().id],
  )

  t.equal((await del(`${gw.url}/queue/requests/${accepted[0]}`, attacker)).status, 200)
  t.equal(
    (await post(url, attacker, chatBody('after a cancel'), ASYNC)).status,
    202,
    'a cancelled request gives its place back',
  )
  t.equal((await post(url, attacker, chatBody('and again'), ASYNC)).status, 429)

  // Bytes: Standard1000 keeps 30 KB of bodies per key.
  const big = (await gw.createKey({ owner: 'carol', tier: 'Standard1000' })).key
  const filler = (n: number): Record<string, unknown> => chatBody('x'.repeat(n))
  t.equal((await post(url, big, filler(12_000), ASYNC)).status, 202)
  t.equal((await post(url, big, filler(12_000), ASYNC)).status, 202)
  const over = await post(url, big, filler(12_000), ASYNC)
  t.equal(over.status, 429)
  t.equal(over.json().error.code, 'queue_full')
  t.match(over.json().error.message, /cap \(30000 bytes\)/)
  t.equal((await post(url, big, filler(1_000), ASYNC)).status, 202, 'a smaller body still fits')
  const never = await post(url, big, filler(40_000), ASYNC)
  t.equal(never.status, 413, 'a body larger than the whole cap can never be queued')
  t.equal(never.json().error.code, 'request_too_large')
  t.notOk(never.headers.has('retry-after'))
}

t.test('embedded', async (t) => {
  await behaves(t, await embeddedGateway(t, settings))
})

t.test('redis', async (t) => {
  const c = await cluster(t)
  await behaves(t, await c.start(settings))
})

// The response cache on running gateways, on both stores, through the official openai SDK:
// hits and misses, replay in the shape asked (JSON <-> stream), embeddings and the
// Responses API, Cache-Control, hits free against limits and marked in usage, and two
// owners that send the same body never seeing each other's replies.
import t, { type Test } from 'tap'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { testNamespace } from '../helpers/redis.ts'
import { admin, metric, onSharedRedis, startCacheGateway, type StoreKind } from './helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const EMBED = 'text-embedding-bge-m3'

async function suite(t: Test, store: StoreKind, gw: RunningTollgate): Promise<void> {
  const alice = await gw.createKey({ tier: 'Standard4000', owner: `alice-${store}` })
  const bob = await gw.createKey({ tier: 'Standard4000', owner: `bob-${store}` })
  const a = sdkClient(gw, alice.key)
  const b = sdkClient(gw, bob.key)
  const ask = (content: string) => ({ model: MODEL, temperature: 0, messages: [{ role: 'user' as const, content }] })

  await t.test('chat: a miss, then a hit with a fresh id and the original named', async (t) => {
    const first = await a.chat.completions.create(ask(`hello ${store}`)).withResponse()
    t.equal(first.response.headers.get('x-tollgate-cache'), 'miss')
    const second = await a.chat.completions.create(ask(`hello ${store}`)).withResponse()
    t.equal(second.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(second.response.headers.get('x-tollgate-cache-origin-id'), first.data.id)
    t.not(second.data.id, first.data.id)
    t.match(second.data.id, /^chatcmpl-/)
    t.equal(second.data.choices[0]?.message.content, first.data.choices[0]?.message.content)
    t.same(second.data.usage, first.data.usage, 'the usage the reply reported is replayed')
    t.ok(second.response.headers.get('x-ratelimit-remaining-requests'), 'a hit still shows the limits')
    // Fields that do not change the answer do not change the key.
    const third = await a.chat.completions
      .create({ ...ask(`hello ${store}`), user: 'someone', metadata: { a: 'b' } })
      .withResponse()
    t.equal(third.response.headers.get('x-tollgate-cache'), 'hit', 'user and metadata are left out of the key')
    const other = await a.chat.completions.create({ ...ask(`hello ${store}`), max_tokens: 7 }).withResponse()
    t.equal(other.response.headers.get('x-tollgate-cache'), 'miss', 'max_tokens is part of the key')
  })

  await t.test('a stored JSON reply is replayed as a stream, and a stored stream as JSON', async (t) => {
    const json = await a.chat.completions.create(ask(`json first ${store}`))
    const { data: stream, response } = await a.chat.completions
      .create({ ...ask(`json first ${store}`), stream: true, stream_options: { include_usage: true } })
      .withResponse()
    t.equal(response.headers.get('x-tollgate-cache'), 'hit')
    let text = ''
    let usage: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    t.equal(text, json.choices[0]?.message.content)
    t.same(usage, json.usage)

    let streamed = ''
    for await (const chunk of await a.chat.completions.create({ ...ask(`stream first ${store}`), stream: true }))
      streamed += chunk.choices[0]?.delta.content ?? ''
    const whole = await a.chat.completions.create(ask(`stream first ${store}`)).withResponse()
    t.equal(whole.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(whole.data.choices[0]?.message.content, streamed)
    t.equal(whole.data.choices[0]?.finish_reason, 'stop')
    t.ok(whole.data.usage && whole.data.usage.total_tokens > 0, 'the metered usage is kept with a stream')
  })

  await t.test('completions and embeddings', async (t) => {
    const body = { model: MODEL, prompt: `complete ${store}`, temperature: 0 }
    const first = await a.completions.create(body)
    let text = ''
    const { data: s, response } = await a.completions.create({ ...body, stream: true }).withResponse()
    t.equal(response.headers.get('x-tollgate-cache'), 'hit')
    for await (const chunk of s) text += chunk.choices[0]?.text ?? ''
    t.equal(text, first.choices[0]?.text)

    const e1 = await a.embeddings.create({ model: EMBED, input: `embed ${store}` }).withResponse()
    const e2 = await a.embeddings.create({ model: EMBED, input: `embed ${store}` }).withResponse()
    t.equal(e1.response.headers.get('x-tollgate-cache'), 'miss', 'embeddings do not sample: cached without temperature')
    t.equal(e2.response.headers.get('x-tollgate-cache'), 'hit')
    t.same(e2.data.data[0]?.embedding, e1.data.data[0]?.embedding)
  })

  await t.test('responses: store false is cached and replayed as events; a stored response is not', async (t) => {
    const body = { model: MODEL, input: `respond ${store}`, temperature: 0, store: false }
    const first = await a.responses.create(body)
    const events: string[] = []
    let done: { output: Array<{ type: string; content?: Array<{ type: string; text?: string }> }> } | undefined
    const { data: s, response } = await a.responses.create({ ...body, stream: true }).withResponse()
    t.equal(response.headers.get('x-tollgate-cache'), 'hit')
    for await (const event of s) {
      events.push(event.type)
      if (event.type === 'response.completed') done = event.response
    }
    t.equal(events[0], 'response.created')
    t.equal(events.at(-1), 'response.completed')
    const text = done?.output
      .flatMap((item) => (item.type === 'message' ? (item.content ?? []) : []))
      .map((part) => part.text ?? '')
      .join('')
    t.equal(text, first.output_text)
    const stored = await a.responses.create({ ...body, store: true }).withResponse()
    t.equal(stored.response.headers.get('x-tollgate-cache'), 'bypass')
  })

  await t.test('Cache-Control and sampling', async (t) => {
    const body = ask(`control ${store}`)
    const noStore = await a.chat.completions.create(body, { headers: { 'cache-control': 'no-store' } }).withResponse()
    t.equal(noStore.response.headers.get('x-tollgate-cache'), 'bypass')
    const miss = await a.chat.completions.create(body).withResponse()
    t.equal(miss.response.headers.get('x-tollgate-cache'), 'miss', 'no-store kept nothing')
    const noCache = await a.chat.completions.create(body, { headers: { 'cache-control': 'no-cache' } }).withResponse()
    t.equal(noCache.response.headers.get('x-tollgate-cache'), 'bypass', 'no-cache does not read')
    const hit = await a.chat.completions.create(body).withResponse()
    t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(hit.response.headers.get('x-tollgate-cache-origin-id'), noCache.data.id, 'but it stores')
    const young = await a.chat.completions.create(body, { headers: { 'cache-control': 'max-age=0' } }).withResponse()
    t.equal(young.response.headers.get('x-tollgate-cache'), 'miss', 'max-age=0: only a reply younger than now')
    const aged = await a.chat.completions.create(body, { headers: { 'cache-control': 'max-age=600' } }).withResponse()
    t.equal(aged.response.headers.get('x-tollgate-cache'), 'hit')
    const sampled = await a.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: `control ${store}` }] })
      .withResponse()
    t.equal(sampled.response.headers.get('x-tollgate-cache'), 'bypass', 'temperature unset samples: not cached')
  })

  await t.test('two owners sending the same body never share a reply', async (t) => {
    const body = ask(`shared words ${store}`)
    const fromA = await a.chat.completions.create(body).withResponse()
    const hitA = await a.chat.completions.create(body).withResponse()
    const fromB = await b.chat.completions.create(body).withResponse()
    t.equal(hitA.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(fromB.response.headers.get('x-tollgate-cache'), 'miss', "bob does not get alice's reply")
    const hitB = await b.chat.completions.create(body).withResponse()
    t.equal(hitB.response.headers.get('x-tollgate-cache-origin-id'), fromB.data.id, 'bob gets his own')
    t.not(fromB.data.id, fromA.data.id)
  })

  await t.test("a cached reply naming alice's file is never served to bob, whatever he sends", async (t) => {
    const file = await a.files.create({ file: new File(['notes'], 'notes.txt'), purpose: 'user_data' })
    const body = {
      model: MODEL,
      temperature: 0,
      messages: [
        {
          role: 'user' as const,
          content: [
            { type: 'text' as const, text: 'summarise' },
            { type: 'file' as const, file: { file_id: file.id } },
          ],
        },
      ],
    }
    await a.chat.completions.create(body)
    const hit = await a.chat.completions.create(body).withResponse()
    t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
    for (const headers of [{}, { 'cache-control': 'max-age=999999' }]) {
      const refused = await b.chat.completions
        .create({ ...body, user: `alice-${store}` }, { headers })
        .catch((e: unknown) => e)
      t.match(refused, { status: 404 }, "bob is refused at intake: alice's file is not his to name")
    }
  })

  await t.test('a hit is free against the limits and marked in usage', async (t) => {
    const carol = await gw.createKey({ tier: 'Standard4000', owner: `carol-${store}` })
    const c = sdkClient(gw, carol.key)
    const body = ask(`limits ${store}`)
    const miss = await c.chat.completions.create(body).withResponse()
    const tokensAfterMiss = Number(miss.response.headers.get('x-ratelimit-remaining-tokens'))
    for (let i = 0; i < 3; i++) {
      const hit = await c.chat.completions.create(body).withResponse()
      t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
      t.ok(Number(hit.response.headers.get('x-ratelimit-remaining-tokens')) >= tokensAfterMiss, 'no tokens spent')
    }
    const usage = (await admin(gw, 'GET', `/admin/keys/${carol.id}/usage`)) as {
      totals: { requests: number; cached_requests: number; input_tokens: number; cost: number }
    }
    t.equal(usage.totals.requests, 4)
    t.equal(usage.totals.cached_requests, 3)
    t.equal(usage.totals.input_tokens, miss.data.usage?.prompt_tokens, 'only the miss is charged tokens')
    t.ok((await metric(gw, 'tollgate_response_cache_lookups_total', 'result="hit"')) >= 3)
  })
}

for (const store of ['embedded', 'redis'] as const) {
  t.test(store, async (t) => {
    const redis = store === 'redis' ? onSharedRedis(testNamespace(t, 'cache', 'cache-test').fresh().prefix) : undefined
    const gw = await startCacheGateway({ store, ...(redis === undefined ? {} : { redis }) })
    t.teardown(() => gw.stop())
    await suite(t, store, gw)
  })
}

t.test('the Anthropic Messages API walks the same corridor: a hit in its shape, JSON and stream', async (t) => {
  const { default: Anthropic } = await import('@anthropic-ai/sdk')
  const gw = await startCacheGateway({ store: 'embedded' })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ tier: 'Standard4000', owner: 'claude-user' })
  const sdk = new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 })
  const body = { model: MODEL, max_tokens: 50, temperature: 0, messages: [{ role: 'user' as const, content: 'hi' }] }
  const first = await sdk.messages.create(body).withResponse()
  t.equal(first.response.headers.get('x-tollgate-cache'), 'miss')
  const second = await sdk.messages.create(body).withResponse()
  t.equal(second.response.headers.get('x-tollgate-cache'), 'hit')
  t.same(second.data.content, first.data.content)
  t.equal(second.data.type, 'message')
  const stream = sdk.messages.stream(body)
  const final = await stream.finalMessage()
  t.same(final.content, first.data.content, 'replayed as Anthropic events')
})

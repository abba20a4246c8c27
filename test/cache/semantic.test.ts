// The semantic cache on running gateways, on both stores, through the official openai SDK,
// with an embeddings upstream whose vectors the test chooses: a paraphrase at or above the
// threshold is a hit (the reply of its first wording, in the shape asked, with the
// similarity in a header), one below it or unrelated is a miss, and nothing matches across
// scopes, system prompts, parameters or models. The embedding is an embeddings call of the
// caller's key: metered to it like one.
import t, { type Test } from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { admin, metric, onSharedRedis, type StoreKind } from './helpers.ts'
import {
  EMBED_TOKENS,
  EMBEDDER,
  startFakeEmbedder,
  startSemanticGateway,
  type FakeEmbedder,
} from './semantic-helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const OTHER_MODEL = 'Mistral-Small-24B-Instruct-2501'

/** A 64-wide vector with these leading values (the rest 0): cosines are easy to read. */
const vec = (...lead: number[]): number[] => [...lead, ...new Array<number>(64 - lead.length).fill(0)]

/** The header's similarity of vec(x, y) to vec(1): its cosine, to four places. */
const cosine = (x: number, y: number): string => (x / Math.hypot(x, y)).toFixed(4)

const embedder = await startFakeEmbedder()
t.teardown(() => embedder.close())

async function suite(t: Test, store: StoreKind, gw: RunningTollgate, fake: FakeEmbedder): Promise<void> {
  const alice = await gw.createKey({ tier: 'Standard4000', owner: `sem-alice-${store}` })
  const bob = await gw.createKey({ tier: 'Standard4000', owner: `sem-bob-${store}` })
  const a = sdkClient(gw, alice.key)
  const b = sdkClient(gw, bob.key)
  const ask = (content: string, system?: string) => ({
    model: MODEL,
    temperature: 0,
    messages: [
      ...(system === undefined ? [] : [{ role: 'system' as const, content: system }]),
      { role: 'user' as const, content },
    ],
  })
  const q = (s: string): string => `${s} (${store})`
  fake.vectors.set(q('What is the capital of France?'), vec(1, 0, 0))
  fake.vectors.set(q("Which city is France's capital?"), vec(0.98, 0.2, 0)) // cos 0.9798
  fake.vectors.set(q('Name the French capital.'), vec(0.95, 0.31, 0)) // cos 0.9507
  fake.vectors.set(q('What is the capital of Belgium?'), vec(0.8, 0.6, 0)) // cos 0.8: below 0.9
  fake.vectors.set(q('How tall is Mont Blanc?'), vec(0, 0, 1)) // cos 0

  await t.test('a paraphrase above the threshold hits; below it or unrelated misses', async (t) => {
    const first = await a.chat.completions.create(ask(q('What is the capital of France?'))).withResponse()
    t.equal(first.response.headers.get('x-tollgate-cache'), 'miss')
    const para = await a.chat.completions.create(ask(q("Which city is France's capital?"))).withResponse()
    t.equal(para.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(para.response.headers.get('x-tollgate-cache-match'), 'semantic')
    t.equal(para.response.headers.get('x-tollgate-cache-similarity'), cosine(0.98, 0.2))
    t.equal(para.response.headers.get('x-tollgate-cache-origin-id'), first.data.id)
    t.not(para.data.id, first.data.id, 'a fresh id, as an exact hit')
    t.equal(para.data.choices[0]?.message.content, first.data.choices[0]?.message.content)
    const exact = await a.chat.completions.create(ask(q('What is the capital of France?'))).withResponse()
    t.equal(exact.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(exact.response.headers.get('x-tollgate-cache-match'), null, 'an exact hit is exact: no similarity')
    for (const other of ['What is the capital of Belgium?', 'How tall is Mont Blanc?']) {
      const miss = await a.chat.completions.create(ask(q(other))).withResponse()
      t.equal(miss.response.headers.get('x-tollgate-cache'), 'miss', other)
      t.not(miss.response.headers.get('x-tollgate-cache-origin-id'), first.data.id)
    }
  })

  await t.test('a paraphrase hit is replayed in the shape asked (a stream)', async (t) => {
    const { data: stream, response } = await a.chat.completions
      .create({ ...ask(q('Name the French capital.')), stream: true })
      .withResponse()
    t.equal(response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(response.headers.get('x-tollgate-cache-similarity'), cosine(0.95, 0.31))
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    const first = await a.chat.completions.create(ask(q('What is the capital of France?')))
    t.equal(text, first.choices[0]?.message.content)
  })

  await t.test('never across scopes, system prompts, parameters or models', async (t) => {
    const fromBob = await b.chat.completions.create(ask(q("Which city is France's capital?"))).withResponse()
    t.equal(fromBob.response.headers.get('x-tollgate-cache'), 'miss', "bob's identical vector does not reach alice's")
    const system = await a.chat.completions
      .create(ask(q("Which city is France's capital?"), 'Answer in French.'))
      .withResponse()
    t.equal(system.response.headers.get('x-tollgate-cache'), 'miss', 'another system prompt is another partition')
    const capped = await a.chat.completions
      .create({ ...ask(q("Which city is France's capital?")), max_tokens: 9 })
      .withResponse()
    t.equal(capped.response.headers.get('x-tollgate-cache'), 'miss', 'max_tokens is part of the partition')
    const tools = await a.chat.completions
      .create({
        ...ask(q("Which city is France's capital?")),
        tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
      })
      .withResponse()
    t.equal(tools.response.headers.get('x-tollgate-cache'), 'miss', 'tools are part of the partition')
    const model = await a.chat.completions
      .create({ ...ask(q("Which city is France's capital?")), model: OTHER_MODEL })
      .withResponse()
    t.equal(model.response.headers.get('x-tollgate-cache'), 'miss', 'another model')
    const completion = await a.completions
      .create({ model: MODEL, temperature: 0, prompt: q("Which city is France's capital?") })
      .withResponse()
    t.equal(completion.response.headers.get('x-tollgate-cache'), 'miss', 'another endpoint')
    // Bob's own paraphrase hits his own reply.
    const bobPara = await b.chat.completions.create(ask(q('Name the French capital.'))).withResponse()
    t.equal(bobPara.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(bobPara.response.headers.get('x-tollgate-cache-origin-id'), fromBob.data.id)
  })

  await t.test('completions and responses: the prompt, or the input, is embedded', async (t) => {
    fake.vectors.set(q('complete: red fruit'), vec(0, 0, 0, 1))
    fake.vectors.set(q('complete: a fruit that is red'), vec(0, 0, 0, 0.99, 0.14))
    const c1 = await a.completions.create({ model: MODEL, temperature: 0, prompt: q('complete: red fruit') })
    const c2 = await a.completions
      .create({ model: MODEL, temperature: 0, prompt: q('complete: a fruit that is red') })
      .withResponse()
    t.equal(c2.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(c2.data.choices[0]?.text, c1.choices[0]?.text)
    const body = { model: MODEL, temperature: 0, store: false }
    const r1 = await a.responses.create({ ...body, input: q('complete: red fruit') })
    const r2 = await a.responses.create({ ...body, input: q('complete: a fruit that is red') }).withResponse()
    t.equal(r2.response.headers.get('x-tollgate-cache'), 'hit')
    t.equal(r2.data.output_text, r1.output_text)
  })

  await t.test('the embedding is an embeddings call of the key: metered to it', async (t) => {
    const carol = await gw.createKey({ tier: 'Standard4000', owner: `sem-carol-${store}` })
    const c = sdkClient(gw, carol.key)
    const seen = fake.inputs.length
    const miss = await c.chat.completions.create(ask(q('What is the capital of France?')))
    const hit = await c.chat.completions.create(ask(q("Which city is France's capital?"))).withResponse()
    t.equal(hit.response.headers.get('x-tollgate-cache'), 'hit')
    t.same(fake.inputs.slice(seen), [q('What is the capital of France?'), q("Which city is France's capital?")])
    const usage = (await admin(gw, 'GET', `/admin/keys/${carol.id}/usage`)) as {
      totals: { requests: number; cached_requests: number; input_tokens: number }
      by_model: Array<{ model: string; requests: number; input_tokens: number }>
    }
    t.equal(usage.totals.requests, 4, 'the miss, the hit and two embeddings calls')
    t.equal(usage.totals.cached_requests, 1)
    const embeds = usage.by_model.find((m) => m.model === EMBEDDER)
    t.equal(embeds?.requests, 2)
    t.equal(embeds?.input_tokens, 2 * EMBED_TOKENS, 'the embedder reported its tokens, charged to the key')
    t.equal(usage.totals.input_tokens, (miss.usage?.prompt_tokens ?? 0) + 2 * EMBED_TOKENS)
    t.ok((await metric(gw, 'tollgate_response_cache_semantic_lookups_total', 'result="hit"')) >= 1)
  })

  await t.test('DELETE /admin/cache empties the index with the replies', async (t) => {
    await admin(gw, 'DELETE', `/admin/cache?key_id=${alice.id}`)
    const after = await a.chat.completions.create(ask(q("Which city is France's capital?"))).withResponse()
    t.equal(after.response.headers.get('x-tollgate-cache'), 'miss')
  })
}

for (const store of ['embedded', 'redis'] as const) {
  t.test(store, async (t) => {
    const redis =
      store === 'redis' ? onSharedRedis(testNamespace(t, 'semcache', 'semcache-test').fresh().prefix) : undefined
    const gw = await startSemanticGateway({ store, embedder, ...(redis === undefined ? {} : { redis }) })
    t.teardown(() => gw.stop())
    await suite(t, store, gw, embedder)
  })
}

t.test('a key that may not use the embedding model is looked up exactly only', async (t) => {
  const gw = await startSemanticGateway({ store: 'embedded', embedder })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ tier: 'Standard4000', owner: 'sem-scoped', models: [MODEL] })
  const c = sdkClient(gw, key)
  const seen = embedder.inputs.length
  const body = { model: MODEL, temperature: 0, messages: [{ role: 'user' as const, content: 'scoped question' }] }
  t.equal((await c.chat.completions.create(body).withResponse()).response.headers.get('x-tollgate-cache'), 'miss')
  t.equal((await c.chat.completions.create(body).withResponse()).response.headers.get('x-tollgate-cache'), 'hit')
  t.equal(embedder.inputs.length, seen, 'no embeddings call was made for it')
})

t.test('redis: another instance on the same store (a fleet, a restart) finds the first one’s vectors', async (t) => {
  const redis = onSharedRedis(testNamespace(t, 'semcache-fleet', 'semcache-fleet-test').fresh().prefix)
  const first = await startSemanticGateway({ store: 'redis', redis, embedder })
  const { key } = await first.createKey({ tier: 'Standard4000', owner: 'sem-fleet' })
  embedder.vectors.set('fleet: how do I reset my password?', vec(0, 0, 0, 0, 0, 1))
  embedder.vectors.set('fleet: password reset, how?', vec(0, 0, 0, 0, 0, 0.97, 0.24))
  const ask = (content: string) => ({ model: MODEL, temperature: 0, messages: [{ role: 'user' as const, content }] })
  await sdkClient(first, key).chat.completions.create(ask('fleet: how do I reset my password?'))
  // Stored once the reply ended: the same instance sees it first (the reply it names is the one kept).
  const seen = await pollUntil(
    async () =>
      (await sdkClient(first, key).chat.completions.create(ask('fleet: how do I reset my password?')).withResponse())
        .response.headers,
    (h) => h.get('x-tollgate-cache') === 'hit',
    50,
    40,
  )
  t.ok(seen.met)
  await first.stop()
  const second = await startSemanticGateway({ store: 'redis', redis, embedder })
  t.teardown(() => second.stop())
  const para = await sdkClient(second, key).chat.completions.create(ask('fleet: password reset, how?')).withResponse()
  t.equal(para.response.headers.get('x-tollgate-cache'), 'hit')
  t.equal(para.response.headers.get('x-tollgate-cache-origin-id'), seen.value.get('x-tollgate-cache-origin-id'))
  t.equal(para.response.headers.get('x-tollgate-cache-similarity'), cosine(0.97, 0.24))
})

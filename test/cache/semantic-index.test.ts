// The semantic index's two adapters against one contract: a flood of vectors never takes a
// scope over its count or byte bound (oldest out first), partitions and scopes are apart,
// expired vectors are not returned, purge by labels; on Redis the vectors are sealed per
// scope. And the pure parts: nearest (cosine, threshold, widths), what is embedded of a
// body and what is its partition.
import t, { type Test } from 'tap'
import { tierCacheSchema, type PlansConfig } from '../../src/config/schema.ts'
import { ruleOf } from '../../src/cache/policy.ts'
import { ENTRY_OVERHEAD_BYTES, type EntryLabels } from '../../src/cache/port.ts'
import { createSealer } from '../../src/cache/seal.ts'
import { createMemorySemanticIndex, nearest, unit, type SemanticIndex } from '../../src/cache/semantic-index.ts'
import { partitionKey, semanticSplit } from '../../src/cache/semantic-prompt.ts'
import { createRedisSemanticIndex } from '../../src/cache/semantic-redis.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'

const labels = (over: Partial<EntryLabels> = {}): EntryLabels => ({
  keyId: 'key_a',
  owner: 'alice',
  tenant: 'acme',
  model: 'm1',
  ...over,
})
const DIMS = 16
const SIZE = DIMS * 4 + ENTRY_OVERHEAD_BYTES
const bounds = { scopeMaxVectors: 10, scopeMaxBytes: 1000 * SIZE, maxBytes: 1000 * SIZE }
const oneHot = (i: number): Float32Array => unit(Array.from({ length: DIMS }, (_, j) => (j === i % DIMS ? 1 : 0)))!

async function contract(t: Test, index: SemanticIndex, smaller: SemanticIndex): Promise<void> {
  await t.test('a flood of vectors never takes a scope over its count', async (t) => {
    let evicted = 0
    for (let i = 0; i < 50; i++) {
      evicted += (await index.add('o:alice', 'p1', `k${i}`, oneHot(i), 60_000, labels())).evicted
      t.ok((await index.vectors('o:alice', 'p1')).length <= 10, `at most 10 after ${i + 1}`)
    }
    t.equal(evicted, 40, 'one out for each past the tenth')
    const keys = (await index.vectors('o:alice', 'p1')).map((c) => c.key).sort()
    t.same(keys, Array.from({ length: 10 }, (_, i) => `k${40 + i}`).sort(), 'the oldest went first')
    const found = (await index.vectors('o:alice', 'p1')).find((c) => c.key === 'k45')
    t.same(Array.from(found?.vector ?? []), Array.from(oneHot(45)), 'a vector comes back as it went in')
  })
  await t.test('and never over its bytes', async (t) => {
    for (let i = 0; i < 20; i++) await smaller.add('o:carol', 'p', `k${i}`, oneHot(i), 60_000, labels())
    t.equal((await smaller.vectors('o:carol', 'p')).length, 3, 'three vectors fit the byte bound')
  })
  await t.test('partitions and scopes are apart; expired vectors are not returned', async (t) => {
    t.same(await index.vectors('o:alice', 'p2'), [], 'another partition')
    t.same(await index.vectors('o:bob', 'p1'), [], 'another scope')
    await index.add('o:bob', 'p1', 'short', oneHot(1), 1, labels({ owner: 'bob' }))
    const gone = await pollUntil(
      () => index.vectors('o:bob', 'p1'),
      (v) => v.length === 0,
      100,
      2,
    )
    t.ok(gone.met, 'gone once its 1 ms TTL passed')
  })
  await t.test('purge by labels', async (t) => {
    await index.add('t:acme', 'p', 'a', oneHot(1), 60_000, labels({ keyId: 'key_1' }))
    await index.add('t:acme', 'p', 'b', oneHot(2), 60_000, labels({ keyId: 'key_2' }))
    t.equal(await index.purge({ keyId: 'key_2' }), 1)
    t.same(
      (await index.vectors('t:acme', 'p')).map((c) => c.key),
      ['a'],
    )
    t.ok((await index.purge({})) >= 11)
    t.same(await index.vectors('o:alice', 'p1'), [])
  })
}

t.test('memory index', async (t) => {
  await contract(
    t,
    createMemorySemanticIndex(bounds),
    createMemorySemanticIndex({ ...bounds, scopeMaxBytes: 3 * SIZE + 10 }),
  )
  await t.test('all scopes together are held to maxBytes', async (t) => {
    const small = createMemorySemanticIndex({ ...bounds, maxBytes: 5 * SIZE })
    for (let i = 0; i < 20; i++) await small.add(`o:${i}`, 'p', 'k', oneHot(i), 60_000, labels())
    let held = 0
    for (let i = 0; i < 20; i++) held += (await small.vectors(`o:${i}`, 'p')).length
    t.equal(held, 5)
  })
})

t.test('redis index', async (t) => {
  const ns = testNamespace(t, 'semcache-index', 'semcache-index-test')
  const { prefix } = ns.fresh()
  const sealer = createSealer('secret')
  await contract(
    t,
    createRedisSemanticIndex(ns.admin, prefix, bounds, sealer),
    createRedisSemanticIndex(ns.admin, prefix, { ...bounds, scopeMaxBytes: 3 * SIZE + 10 }, sealer),
  )
  await t.test('vectors are sealed per scope', async (t) => {
    const index = createRedisSemanticIndex(ns.admin, prefix, bounds, sealer)
    await index.add('o:dave', 'p', 'k', oneHot(3), 60_000, labels())
    const raw = await ns.admin.hgetBuffer(`${prefix}{rc:${encodeURIComponent('o:dave')}}:sv:p`, 'k')
    t.ok(raw)
    t.notOk(raw?.includes(Buffer.from(oneHot(3).buffer)), 'the floats are not readable in Redis')
    const other = createRedisSemanticIndex(ns.admin, prefix, bounds, createSealer('another secret'))
    t.same(await other.vectors('o:dave', 'p'), [], 'another secret opens none')
  })
})

t.test('nearest: cosine at or above the threshold, best first, same width only', async (t) => {
  const q = unit([1, 0, 0])!
  const candidates = [
    { key: 'close', vector: unit([0.98, 0.2, 0])! },
    { key: 'same', vector: unit([2, 0, 0])! },
    { key: 'far', vector: unit([0, 1, 0])! },
    { key: 'wide', vector: unit([1, 0, 0, 0])! },
  ]
  t.same(
    nearest(q, candidates, 0.9, 3).map((m) => m.key),
    ['same', 'close'],
  )
  t.same(nearest(q, candidates, 0.99, 3)[0], { key: 'same', similarity: 1 })
  t.equal(unit([0, 0]), undefined, 'a zero vector has no direction')
})

t.test('what is embedded, and the partition', async (t) => {
  const chat = (last: unknown, system = 'be brief') => ({
    model: 'm',
    temperature: 0,
    messages: [{ role: 'system', content: system }, last],
  })
  t.same(semanticSplit('chat.completions', chat({ role: 'user', content: 'hi' })), {
    text: 'hi',
    rest: { model: 'm', temperature: 0, messages: [{ role: 'system', content: 'be brief' }] },
  })
  t.equal(
    semanticSplit(
      'chat.completions',
      chat({
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      }),
    )?.text,
    'a\nb',
  )
  t.equal(semanticSplit('chat.completions', chat({ role: 'assistant', content: 'hi' })), undefined, 'not a user turn')
  const image = { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }
  t.equal(semanticSplit('chat.completions', chat(image)), undefined, 'not text only')
  t.equal(semanticSplit('completions', { model: 'm', prompt: ['a', 'b'] }), undefined, 'several prompts')
  t.equal(semanticSplit('responses', { model: 'm', input: 'q' })?.text, 'q')
  const part = (body: Record<string, unknown>, scope = 'o:a') =>
    partitionKey('s', {
      scope,
      endpoint: 'chat.completions',
      model: 'm',
      embeddingModel: 'e',
      rest: semanticSplit('chat.completions', body)!.rest,
    })
  const base = part(chat({ role: 'user', content: 'one question' }))
  t.equal(part(chat({ role: 'user', content: 'another question' })), base, 'the question is not the partition')
  t.equal(part({ ...chat({ role: 'user', content: 'x' }), user: 'u', stream: true }), base, 'ignored fields ignored')
  t.not(part(chat({ role: 'user', content: 'x' }, 'be long')), base, 'another system prompt')
  t.not(part({ ...chat({ role: 'user', content: 'x' }), temperature: 0.5 }), base, 'another temperature')
  t.not(part(chat({ role: 'user', content: 'x' }), 'o:b'), base, 'another scope')
})

t.test('the rule: a model replaces the tier whole; an enabled semantic cache names its model', async (t) => {
  const tier = tierCacheSchema.parse({
    enabled: true,
    semantic: { embeddingModel: 'e', threshold: 0.8 },
    models: { quiet: { semantic: { enabled: false } }, own: { semantic: { embeddingModel: 'f' } } },
  })
  const plans = { tiers: { T: { cache: tier } } } as unknown as PlansConfig
  t.same(ruleOf(plans, 'T', 'any')?.semantic, { embeddingModel: 'e', threshold: 0.8 })
  t.equal(ruleOf(plans, 'T', 'quiet')?.semantic, undefined, 'turned off for one model')
  t.same(ruleOf(plans, 'T', 'own')?.semantic, { embeddingModel: 'f', threshold: 0.95 }, 'its own, defaults and all')
  const refused = tierCacheSchema.safeParse({ enabled: true, semantic: { threshold: 0.9 } })
  t.equal(refused.success, false)
  t.match(refused.error?.issues[0]?.path, ['semantic', 'embeddingModel'])
})

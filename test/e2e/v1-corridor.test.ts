// /v1 walks the /v2 corridor: no key or a bad key gets 401, a key outside its scopes 403,
// a malformed body 400 from the gateway itself, and a key over its rpm 429 with the usual
// headers. And ownership: a second owner gets 404 on every /v1 path that reaches the first
// owner's objects (the list of paths is the route table itself, so a route added later is
// covered), cannot attach the first owner's files to its own store, and sees none of them
// in its lists; a second key of the same owner sees everything.
import OpenAI from 'openai'
import t from 'tap'
import { V1_ENDPOINTS } from '../../src/inference/v1-endpoints.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { encodeMultipart } from '../helpers/multipart.ts'

let gw: RunningTollgate
const keys: Record<'alice' | 'alice2' | 'bob', string> = { alice: '', alice2: '', bob: '' }

t.before(async () => {
  gw = await startTollgate()
  keys.alice = (await gw.createKey({ owner: 'alice', tier: 'Standard4000' })).key
  keys.alice2 = (await gw.createKey({ owner: 'alice', tier: 'Standard4000' })).key
  keys.bob = (await gw.createKey({ owner: 'bob', tier: 'Standard4000' })).key
})
t.teardown(() => gw.stop())

interface Reply {
  status: number
  headers: Headers
  body: Record<string, unknown> & { error?: { code: string | null; param: string | null; type: string } }
}

async function call(key: string | null, method: string, path: string, body?: unknown): Promise<Reply> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  return {
    status: res.status,
    headers: res.headers,
    body: text.startsWith('{') ? (JSON.parse(text) as Reply['body']) : {},
  }
}

async function upload(key: string, name: string, text: string): Promise<string> {
  const { contentType, bytes } = encodeMultipart([
    { name: 'purpose', value: 'assistants' },
    { name: 'file', filename: name, data: Buffer.from(text) },
  ])
  const res = await fetch(`${gw.url}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': contentType },
    body: bytes,
  })
  return ((await res.json()) as { id: string }).id
}

async function settled(key: string, path: string): Promise<Reply> {
  for (let i = 0; i < 100; i++) {
    const reply = await call(key, 'GET', path)
    if (reply.body.status !== 'in_progress') return reply
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`${path} stayed in progress`)
}

t.test("another owner gets 404 on every /v1 path to the first owner's objects", async (t) => {
  const fileId = await upload(keys.alice, 'alice.txt', 'Alice keeps her secret recipe for plum jam here.')
  const store = await call(keys.alice, 'POST', '/v1/vector_stores', { name: 'alice' })
  const storeId = String(store.body.id)
  await call(keys.alice, 'POST', `/v1/vector_stores/${storeId}/files`, { file_id: fileId })
  await settled(keys.alice, `/v1/vector_stores/${storeId}/files/${fileId}`)
  const batch = await call(keys.alice, 'POST', `/v1/vector_stores/${storeId}/file_batches`, { file_ids: [fileId] })
  const batchId = String(batch.body.id)
  const bobFile = await upload(keys.bob, 'bob.txt', 'Bob writes about trains.')
  const ids: Record<string, string> = { id: fileId, vector_store_id: storeId, file_id: fileId, batch_id: batchId }

  // A body each endpoint would accept: only ownership can refuse it.
  const bodies: Record<string, unknown> = {
    'vector_stores.update': { name: 'taken' },
    'vector_stores.search': { query: 'plum jam' },
    'vector_stores.files.create': { file_id: bobFile },
    'vector_stores.files.update': { attributes: { owner: 'bob' } },
    'vector_stores.file_batches.create': { file_ids: [bobFile] },
  }
  let checked = 0
  for (const spec of V1_ENDPOINTS) {
    if (!spec.route.includes(':')) continue
    const path = `/v1${spec.route.replace(/:([a-z_]+)/g, (_, name: string) => ids[name] ?? 'missing')}`
    const reply = await call(keys.bob, spec.method, path, bodies[spec.endpoint])
    t.equal(reply.status, 404, `bob: ${spec.method} ${spec.route}`)
    t.equal(reply.body.error?.code, 'not_found')
    t.notMatch(JSON.stringify(reply.body), /plum/, 'nothing of the object leaks')
    // Reads (and search) by another key of alice's: the owner, not the key, owns.
    if (spec.method === 'GET' || spec.endpoint === 'vector_stores.search') {
      const same = await call(keys.alice2, spec.method, path, bodies[spec.endpoint])
      t.equal(same.status, 200, `another key of alice: ${spec.method} ${spec.route}`)
    }
    checked++
  }
  t.ok(checked >= 14, `${checked} paths with an id checked`)

  // Alice's objects are untouched by all of that.
  t.equal((await call(keys.alice, 'GET', `/v1/vector_stores/${storeId}`)).body.name, 'alice')
  t.equal((await call(keys.alice, 'GET', `/v1/files/${fileId}`)).status, 200)
  t.equal((await call(keys.alice, 'GET', `/v2/files/${fileId}`)).status, 200, 'and on /v2')

  // Bob's own store cannot take Alice's file, however it is named.
  const bobStore = String((await call(keys.bob, 'POST', '/v1/vector_stores', { name: 'bob' })).body.id)
  for (const [path, body, param] of [
    ['/v1/vector_stores', { file_ids: [bobFile, fileId] }, 'file_ids'],
    [`/v1/vector_stores/${bobStore}/files`, { file_id: fileId }, 'file_id'],
    [`/v1/vector_stores/${bobStore}/file_batches`, { file_ids: [fileId] }, 'file_ids'],
    [
      `/v1/vector_stores/${bobStore}/file_batches`,
      { files: [{ file_id: bobFile }, { file_id: fileId }] },
      'files[1].file_id',
    ],
    [
      '/v2/fine_tuning/jobs',
      { model: 'gpt-4o-mini', training_file: bobFile, validation_file: fileId },
      'validation_file',
    ],
  ] as const) {
    const reply = await call(keys.bob, 'POST', path, body)
    t.equal(reply.status, 404, `bob cannot use alice's file: POST ${path}`)
    t.equal(reply.body.error?.param, param)
  }
  t.match(
    (await call(keys.bob, 'GET', `/v1/vector_stores/${bobStore}`)).body,
    { name: 'bob', file_counts: { total: 0 } },
    'nothing was attached',
  )

  // Lists show each owner their own.
  const bobStores = await call(keys.bob, 'GET', '/v1/vector_stores')
  t.same(
    (bobStores.body.data as Array<{ id: string }>).map((s) => s.id),
    [bobStore],
  )
  t.equal(bobStores.body.first_id, bobStore, "the page bounds name only bob's objects")
  t.equal(bobStores.body.last_id, bobStore)
  const bobFiles = await call(keys.bob, 'GET', '/v1/files')
  t.same(
    (bobFiles.body.data as Array<{ id: string }>).map((f) => f.id),
    [bobFile],
  )
  const aliceStores = await call(keys.alice2, 'GET', '/v1/vector_stores')
  t.same(
    (aliceStores.body.data as Array<{ id: string }>).map((s) => s.id),
    [storeId],
  )
  const search = await call(keys.alice2, 'POST', `/v1/vector_stores/${storeId}/search`, { query: 'plum jam' })
  t.match(
    (search.body.data as Array<{ content: Array<{ text: string }> }>)[0]?.content[0]?.text,
    /plum jam/,
    "alice's other key searches her store",
  )
})

t.test('401 without a key, 403 outside the scopes, 400 from the gateway for a bad body', async (t) => {
  for (const [method, path] of [
    ['GET', '/v1/vector_stores'],
    ['POST', '/v1/vector_stores/vs_x/search'],
    ['GET', '/v1/files'],
  ] as const) {
    const none = await call(null, method, path, method === 'POST' ? { query: 'x' } : undefined)
    t.equal(none.status, 401, `${method} ${path} without a key`)
    t.equal(none.body.error?.code, 'invalid_api_key')
    t.equal((await call('tg1_not_a_real_key', method, path)).status, 401)
  }
  const reader = (await gw.createKey({ owner: 'carol', endpoints: ['vector_stores.list', 'files.list'] })).key
  t.equal((await call(reader, 'GET', '/v1/vector_stores')).status, 200)
  const refused = await call(reader, 'POST', '/v1/vector_stores', { name: 'no' })
  t.equal(refused.status, 403)
  t.equal(refused.body.error?.code, 'endpoint_not_allowed')
  t.equal((await call(reader, 'POST', '/v1/vector_stores/vs_x/search', { query: 'x' })).status, 403)

  const carol = (await gw.createKey({ owner: 'carol' })).key
  const store = String((await call(carol, 'POST', '/v1/vector_stores', {})).body.id)
  for (const [path, body, param] of [
    [`/v1/vector_stores/${store}/search`, { query: 'x', max_num_results: 0 }, 'max_num_results'],
    [`/v1/vector_stores/${store}/search`, {}, 'query'],
    [
      `/v1/vector_stores/${store}/search`,
      { query: 'x', ranking_options: { score_threshold: 2 } },
      'ranking_options.score_threshold',
    ],
    [`/v1/vector_stores/${store}/files`, { file_id: 42 }, 'file_id'],
    [`/v1/vector_stores/${store}/file_batches`, { file_ids: [] }, 'file_ids'],
    [
      '/v1/vector_stores',
      { chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 80 } } },
      'chunking_strategy.static.chunk_overlap_tokens',
    ],
    ['/v1/vector_stores', { metadata: { a: 1 } }, 'metadata.a'],
  ] as const) {
    const reply = await call(carol, 'POST', path, body)
    t.equal(reply.status, 400, `${path} ${JSON.stringify(body)}`)
    t.equal(reply.body.error?.param, param)
    t.ok(reply.headers.get('x-ratelimit-limit-requests'), 'a refusal after authentication carries the limit headers')
  }
  const badQuery = await call(carol, 'GET', `/v1/vector_stores/${store}/files?filter=sleeping`)
  t.equal(badQuery.status, 400)
  t.equal(badQuery.body.error?.param, 'filter')
})

t.test('rpm limits: headers on every /v1 reply, then 429 with retry-after', async (t) => {
  const limited = (await gw.createKey({ owner: 'dave', limits: { '*': { rpm: 3 } } })).key
  const seen: string[] = []
  for (let i = 0; i < 3; i++) {
    const reply = await call(limited, 'GET', '/v1/vector_stores')
    t.equal(reply.status, 200)
    t.equal(reply.headers.get('x-ratelimit-limit-requests'), '3')
    seen.push(reply.headers.get('x-ratelimit-remaining-requests') ?? '')
  }
  t.same(seen, ['2', '1', '0'])
  const over = await call(limited, 'POST', '/v1/vector_stores', { name: 'one too many' })
  t.equal(over.status, 429)
  t.match(over.body.error, { type: 'requests', code: 'rate_limit_exceeded' })
  t.match(over.headers.get('retry-after'), /^\d+$/)
  t.match(over.headers.get('retry-after-ms'), /^\d+$/)
  const stores = await call(limited, 'GET', '/v1/files')
  t.equal(stores.status, 429, 'files count under the same limits')
})

t.test(
  "a list page filtered by owner is filled from the upstream's further pages: the SDK pages through every object",
  async (t) => {
    // Dora's stores are older; Erin's five are newer, so newest-first pages of two start
    // with nothing of Dora's. An empty page would end the SDK's auto-pager.
    const dora = (await gw.createKey({ owner: 'dora', tier: 'Standard4000' })).key
    const erin = (await gw.createKey({ owner: 'erin', tier: 'Standard4000' })).key
    const doras: string[] = []
    for (let i = 0; i < 3; i++)
      doras.unshift(String((await call(dora, 'POST', '/v1/vector_stores', { name: `dora ${i}` })).body.id))
    for (let i = 0; i < 5; i++) await call(erin, 'POST', '/v1/vector_stores', { name: `erin ${i}` })

    const first = await call(dora, 'GET', '/v1/vector_stores?limit=2')
    t.same(
      (first.body.data as Array<{ id: string }>).map((s) => s.id),
      doras.slice(0, 2),
      "the first page holds two of dora's, newest first",
    )
    t.equal(first.body.has_more, true, 'and says there is more')
    t.equal(first.body.last_id, doras[1], "its bounds name dora's objects only")

    const client = new OpenAI({ apiKey: dora, baseURL: `${gw.url}/v1`, maxRetries: 0 })
    const seen: string[] = []
    for await (const store of client.vectorStores.list({ limit: 2 })) seen.push(store.id)
    t.same(seen, doras, "the SDK's auto-pager reaches all three, in order, no other owner's among them")

    const before = await call(dora, 'GET', `/v1/vector_stores?limit=2&before=${doras[2]}`)
    t.ok(
      (before.body.data as Array<{ id: string }>).every((s) => doras.includes(s.id)),
      "paging backwards still shows only dora's",
    )
  },
)

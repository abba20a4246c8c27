// What a key may do, enforced on every request: expired, revoked and rotated-past-grace
// keys get 401; a model or endpoint outside the key's scopes gets 403; the model lists
// show only what the key may use.
import t from 'tap'
import OpenAI from 'openai'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { adminCall, isError, within } from './helpers.ts'

let gw: RunningTollgate
let admin: ReturnType<typeof adminCall>

t.before(async () => {
  gw = await startTollgate()
  admin = adminCall(gw.url, gw.adminToken)
})
t.teardown(async () => {
  await gw.stop()
})

const post = (key: string, path: string, body: unknown): Promise<RawResponse> =>
  request(`${gw.url}/v2${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
const get = (key: string, path: string): Promise<RawResponse> =>
  request(`${gw.url}/v2${path}`, { headers: { authorization: `Bearer ${key}` } })
const chat = (key: string, model = 'gpt-4o'): Promise<RawResponse> =>
  post(key, '/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })
const ids = (res: RawResponse): string[] =>
  res
    .json<{ data: Array<{ id: string }> }>()
    .data.map((m) => m.id)
    .sort()

t.test('the model lists show only the models the key may use', async (t) => {
  const scoped = await gw.createKey({
    tier: 'Standard4000',
    models: ['gpt-4o', 'whisper-large-v3', 'text-embedding-ada-002'],
  })
  t.same(ids(await get(scoped.key, '/models')), ['gpt-4o', 'text-embedding-ada-002', 'whisper-large-v3'])
  t.same(ids(await get(scoped.key, '/audio/models')), ['whisper-large-v3'])
  t.equal((await get(scoped.key, '/models/gpt-4o')).status, 200)
  isError(
    t,
    await get(scoped.key, '/models/claude-sonnet-4'),
    404,
    'model_not_found',
    'a model outside the scope does not exist for the key',
  )

  const chatOnly = await gw.createKey({ tier: 'Standard4000', models: ['gpt-4o'] })
  t.same(ids(await get(chatOnly.key, '/audio/models')), [], 'no audio model in scope: an empty list')

  const all = await gw.createKey({ tier: 'Standard4000' })
  const every = ids(await get(all.key, '/models'))
  t.ok(every.length > 20 && every.includes('claude-sonnet-4'), 'a key without a model scope sees every model')

  // The official SDK sees the same thing.
  const client = new OpenAI({ apiKey: scoped.key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  const listed: string[] = []
  for await (const m of client.models.list()) listed.push(m.id)
  t.same(listed.sort(), ['gpt-4o', 'text-embedding-ada-002', 'whisper-large-v3'])
})

t.test('a model or endpoint outside the scopes is 403, and the reply names no secret', async (t) => {
  const k = await gw.createKey({
    tier: 'Standard4000',
    models: ['gpt-4o', 'text-embedding-ada-002'],
    endpoints: ['chat.completions'],
  })
  t.equal((await chat(k.key)).status, 200, 'inside the scopes')
  const model = await chat(k.key, 'claude-sonnet-4')
  isError(t, model, 403, 'model_not_allowed', 'model outside the scope')
  t.equal(model.json().error.type, 'permission_error')
  t.notMatch(model.text, k.key)
  isError(
    t,
    await post(k.key, '/embeddings', { model: 'text-embedding-ada-002', input: 'x' }),
    403,
    'endpoint_not_allowed',
    'endpoint outside the scope',
  )
  isError(
    t,
    await post(k.key, '/completions', { model: 'gpt-4o', prompt: 'x' }),
    403,
    'endpoint_not_allowed',
    'another endpoint outside the scope',
  )
  isError(t, await get(k.key, '/files'), 403, 'endpoint_not_allowed', 'files outside the scope')
  const stream = await post(k.key, '/chat/completions', {
    model: 'claude-sonnet-4',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  })
  isError(t, stream, 403, 'model_not_allowed', 'a stream outside the scope is refused before it starts')
})

t.test('an expired key is 401, on the request after its expiry', async (t) => {
  const k = await gw.createKey({ tier: 'Standard4000', expires_at: new Date(Date.now() + 1500).toISOString() })
  t.equal((await chat(k.key)).status, 200, 'works before its expiry')
  let last: RawResponse | undefined
  t.ok(await within(5000, async () => (last = await chat(k.key)).status === 401), 'refused once expired')
  if (last) {
    isError(t, last, 401, 'invalid_api_key', 'expired')
    t.match(last.json().error.message, /expired/)
  }
  const listed = await admin('GET', `/admin/keys/${k.id}`)
  t.equal(listed.json<{ status: string }>().status, 'expired', 'the admin view says expired')
  isError(t, await get(k.key, '/models'), 401, 'invalid_api_key', 'expired on /v2/models too')
})

t.test('after a rotation, the old secret works during the grace and is 401 after it', async (t) => {
  const k = await gw.createKey({ tier: 'Standard4000' })
  const rotated = (await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: 1 })).json<{ key: string }>()
  t.equal((await chat(k.key)).status, 200, 'old secret during the grace')
  t.equal((await chat(rotated.key)).status, 200, 'new secret')
  let last: RawResponse | undefined
  t.ok(await within(5000, async () => (last = await chat(k.key)).status === 401), 'old secret refused after the grace')
  if (last) {
    isError(t, last, 401, 'invalid_api_key', 'past the grace')
    t.match(last.json().error.message, /rotated/)
  }
  t.equal((await chat(rotated.key)).status, 200, 'the new secret still works')
})

t.test('a revoked key is 401 on every kind of request', async (t) => {
  const k = await gw.createKey({ tier: 'Standard4000' })
  t.equal((await chat(k.key)).status, 200)
  t.equal((await admin('DELETE', `/admin/keys/${k.id}`)).status, 200)
  isError(t, await chat(k.key), 401, 'invalid_api_key', 'chat')
  isError(t, await get(k.key, '/models'), 401, 'invalid_api_key', 'models')
  isError(t, await get(k.key, '/audio/models'), 401, 'invalid_api_key', 'audio models')
  isError(
    t,
    await post(k.key, '/embeddings', { model: 'text-embedding-ada-002', input: 'x' }),
    401,
    'invalid_api_key',
    'embeddings',
  )
  isError(t, await get(k.key, '/files'), 401, 'invalid_api_key', 'files')
})

// What the gateway refuses, and how: every refusal in OpenAI's error shape with the right
// status, nothing reflected unescaped, and the gateway still serving afterwards.
import t, { type Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { rawExchange, request, type RawResponse } from '../helpers/http.ts'

let gw: RunningTollgate
let key: string
const CHAT = 'Mistral-Small-24B-Instruct-2501'

t.before(async () => {
  gw = await startTollgate({
    config: (doc) => {
      ;(doc.server as Record<string, unknown>).jsonBodyLimitBytes = 64 * 1024
    },
  })
  key = (await gw.createKey({ tier: 'Standard4000' })).key
})
t.teardown(async () => {
  await gw.stop()
})

function isOpenAIError(t: Test, res: RawResponse, status: number, code: string | null, what: string): void {
  t.equal(res.status, status, `${what}: status ${status}`)
  const body = res.json()
  t.type(body.error?.message, 'string', `${what}: message`)
  t.type(body.error?.type, 'string', `${what}: type`)
  t.ok('param' in body.error, `${what}: param present`)
  t.equal(body.error?.code, code, `${what}: code`)
  t.match(res.headers.get('content-type'), /application\/json/)
}

const chat = (headers: Record<string, string>, body: string): Promise<RawResponse> =>
  request(`${gw.url}/v2/chat/completions`, { method: 'POST', headers, body })
const auth = (): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
const goodBody = JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })

t.test('no key, wrong key, mistyped key: 401 and the key never echoed', async (t) => {
  isOpenAIError(t, await chat({ 'content-type': 'application/json' }, goodBody), 401, 'invalid_api_key', 'no key')
  isOpenAIError(
    t,
    await chat({ authorization: 'Basic abc', 'content-type': 'application/json' }, goodBody),
    401,
    'invalid_api_key',
    'not bearer',
  )
  const wrong = 'tg1_' + 'A'.repeat(49)
  const res = await chat({ authorization: `Bearer ${wrong}`, 'content-type': 'application/json' }, goodBody)
  isOpenAIError(t, res, 401, 'invalid_api_key', 'wrong key')
  t.notMatch(res.text, wrong)
  const typo = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a')
  const typoRes = await chat({ authorization: `Bearer ${typo}`, 'content-type': 'application/json' }, goodBody)
  isOpenAIError(t, typoRes, 401, 'invalid_api_key', 'mistyped key')
  t.match(typoRes.json().error.message, /looks mistyped or truncated/, 'the message says the key looks mistyped')
  t.notMatch(typoRes.text, typo.slice(4, 20))
  const short = await chat(
    { authorization: `Bearer ${key.slice(0, -3)}`, 'content-type': 'application/json' },
    goodBody,
  )
  isOpenAIError(t, short, 401, 'invalid_api_key', 'truncated key')
  t.match(short.json().error.message, /truncated/, 'a key of the wrong length: may be truncated')
  const foreign = await chat(
    { authorization: 'Bearer sk-proj-abcdefghijklmnop', 'content-type': 'application/json' },
    goodBody,
  )
  t.match(foreign.json().error.message, /start with 'tg1_'/, 'a key of another service: says what ours look like')
  t.notMatch(foreign.text, 'abcdefghijklmnop')
  isOpenAIError(t, await request(`${gw.url}/v2/models`), 401, 'invalid_api_key', 'models without a key')
})

t.test('malformed JSON, wrong types, missing fields: 400', async (t) => {
  const truncated = await chat(auth(), '{"model": "x", ')
  isOpenAIError(t, truncated, 400, 'invalid_json', 'truncated JSON')
  // After authentication, a refusal still says where the key's limits stand (its tier's
  // defaults: the body named no model the gateway could read).
  t.equal(
    truncated.headers.get('x-ratelimit-limit-requests'),
    '60',
    'a malformed body carries the x-ratelimit-* headers',
  )
  t.ok(truncated.headers.get('x-ratelimit-remaining-requests') !== null)
  isOpenAIError(t, await chat(auth(), '[1,2]'), 400, 'invalid_body', 'JSON array')
  isOpenAIError(
    t,
    await chat(auth(), JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] })),
    400,
    'missing_required_parameter',
    'no model',
  )
  const noMessages = await chat(auth(), JSON.stringify({ model: CHAT }))
  isOpenAIError(t, noMessages, 400, 'missing_required_parameter', 'no messages')
  t.equal(noMessages.json().error.param, 'messages')
  isOpenAIError(
    t,
    await chat(auth(), JSON.stringify({ model: CHAT, messages: 'hi' })),
    400,
    'invalid_body',
    'messages not an array',
  )
  isOpenAIError(
    t,
    await chat(auth(), JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'hi' }], max_tokens: -5 })),
    400,
    'invalid_body',
    'negative max_tokens',
  )
  isOpenAIError(
    t,
    await chat(auth(), JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'hi' }], stream: 'yes' })),
    400,
    'invalid_body',
    'stream not boolean',
  )
})

t.test('wrong content type: 415', async (t) => {
  isOpenAIError(
    t,
    await chat({ authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, goodBody),
    415,
    'unsupported_media_type',
    'text/plain',
  )
  isOpenAIError(
    t,
    await chat({ authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' }, goodBody),
    415,
    'unsupported_media_type',
    'curl -d default',
  )
  const hostile = await chat(
    { authorization: `Bearer ${key}`, 'content-type': 'text/<script>alert(1)</script>' },
    goodBody,
  )
  isOpenAIError(t, hostile, 415, 'unsupported_media_type', 'hostile type')
  t.notMatch(hostile.text, '<script>', 'nothing reflected')
  const upload = await request(`${gw.url}/v2/audio/transcriptions`, {
    method: 'POST',
    headers: auth(),
    body: JSON.stringify({ model: 'whisper-large-v3' }),
  })
  isOpenAIError(t, upload, 415, 'unsupported_media_type', 'JSON to a multipart endpoint')
})

t.test('too-large body: 413, before reading when Content-Length says so', async (t) => {
  const big = JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'x'.repeat(70 * 1024) }] })
  isOpenAIError(t, await chat(auth(), big), 413, 'request_too_large', 'declared length')
  // Content-Length claims 10 MB but only the headers are sent: the answer must not wait for the body.
  const port = Number(new URL(gw.url).port)
  const reply = await rawExchange(
    port,
    `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n`,
  )
  t.match(reply, /^HTTP\/1\.1 413 /, '413 without the body')
  t.match(reply, /request_too_large/)
  // Chunked, no length: cut off while reading.
  const chunked = await rawExchange(
    port,
    `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${(70 * 1024).toString(16)}\r\n${'x'.repeat(70 * 1024)}\r\n`,
  )
  t.match(chunked, /^HTTP\/1\.1 413 /, '413 while streaming in')
})

t.test('unknown model: 404 model_not_found; unknown route 404; wrong method 405', async (t) => {
  const res = await chat(auth(), JSON.stringify({ model: 'gpt-99', messages: [{ role: 'user', content: 'hi' }] }))
  isOpenAIError(t, res, 404, 'model_not_found', 'unknown model')
  t.equal(res.json().error.param, 'model')
  const hostileModel = await chat(
    auth(),
    JSON.stringify({ model: '<img src=x onerror=alert(1)>', messages: [{ role: 'user', content: 'hi' }] }),
  )
  isOpenAIError(t, hostileModel, 404, 'model_not_found', 'hostile model name')
  t.notMatch(hostileModel.text, '<img', 'nothing reflected')
  isOpenAIError(t, await request(`${gw.url}/v2/nope`, { headers: auth() }), 404, 'unknown_url', 'unknown route')
  const port = Number(new URL(gw.url).port)
  const traversal = await rawExchange(
    port,
    `GET /v2/../../etc/passwd HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
  )
  t.match(traversal, /^HTTP\/1\.1 404 /, 'raw path traversal is just an unknown route')
  const encoded = await rawExchange(
    port,
    `GET /v2/%2e%2e/admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
  )
  t.match(encoded, /^HTTP\/1\.1 404 /, 'encoded dot segments too')
  const wrongMethod = await request(`${gw.url}/v2/chat/completions`, { method: 'GET', headers: auth() })
  isOpenAIError(t, wrongMethod, 405, 'method_not_allowed', 'GET on a POST route')
  t.match(wrongMethod.headers.get('allow'), /POST/)
})

t.test('an absolute-form request target is routed by its path, as a server must (RFC 9112 §3.2.2)', async (t) => {
  const port = Number(new URL(gw.url).port)
  const models = await rawExchange(
    port,
    `GET http://tollgate.example/v2/models?x=1 HTTP/1.1\r\nHost: tollgate.example\r\nAuthorization: Bearer ${key}\r\n\r\n`,
  )
  t.match(models, /^HTTP\/1\.1 200 /, 'GET http://host/v2/models is /v2/models')
  t.match(models, /"object":"list"/)
  const root = await rawExchange(port, 'GET http://tollgate.example HTTP/1.1\r\nHost: tollgate.example\r\n\r\n')
  t.match(root, /^HTTP\/1\.1 200 [^]*"object":"tollgate"/, 'no path is /, the front door')
  const sneaky = await rawExchange(
    port,
    `GET http://tollgate.example/v2/../admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`,
  )
  t.match(sneaky, /^HTTP\/1\.1 404 /, 'dot segments in the absolute form are still just an unknown route')
  const healthz = await rawExchange(port, 'GET HTTPS://tollgate.example/healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  t.match(healthz, /^HTTP\/1\.1 200 /, 'any case of the scheme')
})

t.test('a key limited to some models or endpoints gets 403 outside them', async (t) => {
  const narrow = (await gw.createKey({ models: ['text-embedding-bge-m3'], endpoints: ['embeddings', 'models.list'] }))
    .key
  const headers = { authorization: `Bearer ${narrow}`, 'content-type': 'application/json' }
  isOpenAIError(t, await chat(headers, goodBody), 403, 'endpoint_not_allowed', 'endpoint outside scope')
  const wrongModel = await request(`${gw.url}/v2/embeddings`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'jina-embeddings-v2-base-de', input: 'x' }),
  })
  isOpenAIError(t, wrongModel, 403, 'model_not_allowed', 'model outside scope')
  const ok = await request(`${gw.url}/v2/embeddings`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: 'text-embedding-bge-m3', input: 'x' }),
  })
  t.equal(ok.status, 200)
  const models = await request(`${gw.url}/v2/models`, { headers })
  t.same(
    models.json<{ data: Array<{ id: string }> }>().data.map((m) => m.id),
    ['text-embedding-bge-m3'],
    'lists only what it may use',
  )
  isOpenAIError(
    t,
    await request(`${gw.url}/v2/audio/models`, { headers }),
    403,
    'endpoint_not_allowed',
    'audio models outside scope',
  )
})

t.test('the admin API refuses anything but the admin token', async (t) => {
  const none = await request(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  })
  t.equal(none.status, 401)
  const apiKey = await request(`${gw.url}/admin/keys`, { method: 'POST', headers: auth(), body: '{}' })
  t.equal(apiKey.status, 401, 'an API key is not an admin token')
  const unknownField = await request(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ nmae: 'typo' }),
  })
  t.equal(unknownField.status, 400)
  const badTier = await request(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tier: 'Platinum' }),
  })
  t.equal(badTier.status, 400)
})

t.test('refusals after authentication still carry the rate-limit headers', async (t) => {
  const bad = await chat(auth(), '{"model": ')
  t.equal(bad.status, 400)
  t.match(bad.headers.get('x-ratelimit-limit-requests'), /^\d+$/, 'on a 400 before the model is known')
  const unknown = await chat(auth(), JSON.stringify({ model: 'gpt-99', messages: [{ role: 'user', content: 'hi' }] }))
  t.match(unknown.headers.get('x-ratelimit-remaining-requests'), /^\d+$/, 'on a 404 unknown model')
  const models = await request(`${gw.url}/v2/models`, { headers: auth() })
  t.match(models.headers.get('x-ratelimit-reset-requests'), /^\d+(\.\d+)?(ms|s)$|^\d+m\d+s$/, 'on the model list')
  const noKey = await request(`${gw.url}/v2/models`)
  t.equal(noKey.headers.get('x-ratelimit-limit-requests'), null, 'not before authentication')
})

t.test('a refused body that is still arriving: the client reads the 413, not a reset', async (t) => {
  const huge = JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'x'.repeat(3 * 1024 * 1024) }] })
  for (let i = 0; i < 5; i++) {
    const res = await chat(auth(), huge)
    t.equal(res.status, 413, `attempt ${i}`)
  }
})

t.test('health and readiness', async (t) => {
  t.equal((await request(`${gw.url}/healthz`)).status, 200)
  const ready = await request(`${gw.url}/readyz`)
  t.equal(ready.status, 200)
  t.match(ready.json<{ store: string }>(), { store: 'up', limiter: 'memory', limiter_healthy: true })
})

t.test('the gateway still serves after all of that, and no key was logged', async (t) => {
  const res = await chat(auth(), goodBody)
  t.equal(res.status, 200)
  t.notMatch(gw.output(), key, 'the key never appears in the output')
  t.notMatch(gw.output(), key.slice(4, 30))
})

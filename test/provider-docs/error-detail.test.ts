// Issue 27, item 5: error bodies both kinds of client can read. The provider's error-codes
// reference (telekom/aifoundation-docs, src/content/docs/v1/reference/error-codes.mdx,
// "Error Response Format") answers `{"detail": "Incorrect API key provided"}`, and only
// some models OpenAI's `{"error": {...}}`: a customer's code reads `.detail`, the openai SDK
// reads `error`. Every /v2, /v1 and /queue error carries both, `detail` being
// `error.message`: the gateway's own refusals, and an upstream's errors relayed in OpenAI's
// shape. The RAG gateway keeps FastAPI's `{"detail"}` alone.
import OpenAI from 'openai'
import t from 'tap'
import { ERRORS } from '../../src/errors.ts'
import { startKeyedGateway } from '../helpers/sdk-gateway.ts'

interface Reply {
  status: number
  body: Record<string, unknown>
}

/** The codes of the gateway's own errors: an error with another code came from upstream. */
const GATEWAY_CODES = new Set<string | null>(
  Object.values(ERRORS).flatMap((e) => (e.body === 'openai' ? [e.code] : [])),
)

const { gw, key } = await startKeyedGateway(t, { name: 'errors' })

async function send(
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: options.headers ?? {},
    ...(options.body === undefined ? {} : { body: options.body }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

const json = (k: string): Record<string, string> => ({
  authorization: `Bearer ${k}`,
  'content-type': 'application/json',
})

t.test("every /v2, /v1 and /queue error: OpenAI's error object, and detail = error.message", async (t) => {
  const narrow = (
    await gw.createKey({ tier: 'Standard4000', models: ['gpt-4o-mini'], endpoints: ['chat.completions'] })
  ).key
  const capped = (await gw.createKey({ tier: 'Standard4000', limits: { 'gpt-4o': { rpm: 1 } } })).key
  const chat = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })
  await send('POST', '/v2/chat/completions', { headers: json(capped), body: chat })
  const cases: Array<[string, string, string, { headers?: Record<string, string>; body?: string }, number, string]> = [
    // The error-codes reference's own example: "Incorrect API key provided".
    ['a wrong key', 'GET', '/v2/models', { headers: { authorization: 'Bearer tg1_wrong' } }, 401, 'invalid_api_key'],
    [
      'no key',
      'POST',
      '/v2/chat/completions',
      { headers: { 'content-type': 'application/json' }, body: chat },
      401,
      'invalid_api_key',
    ],
    [
      'a model the key may not use',
      'POST',
      '/v2/chat/completions',
      { headers: json(narrow), body: chat },
      403,
      'model_not_allowed',
    ],
    [
      'an endpoint the key may not use',
      'POST',
      '/v2/embeddings',
      { headers: json(narrow), body: JSON.stringify({ model: 'gpt-4o-mini', input: 'x' }) },
      403,
      'endpoint_not_allowed',
    ],
    ['an unknown URL', 'GET', '/v2/nothing-here', { headers: json(key) }, 404, 'unknown_url'],
    [
      'an unknown model',
      'POST',
      '/v2/chat/completions',
      { headers: json(key), body: JSON.stringify({ model: 'gpt-99', messages: [{ role: 'user', content: 'x' }] }) },
      404,
      'model_not_found',
    ],
    ['a wrong method', 'DELETE', '/v2/chat/completions', { headers: json(key) }, 405, 'method_not_allowed'],
    [
      'JSON that does not parse',
      'POST',
      '/v2/chat/completions',
      { headers: json(key), body: '{"model": ' },
      400,
      'invalid_json',
    ],
    [
      'a missing field',
      'POST',
      '/v2/chat/completions',
      { headers: json(key), body: JSON.stringify({ model: 'gpt-4o' }) },
      400,
      'missing_required_parameter',
    ],
    [
      'a wrong content type',
      'POST',
      '/v2/embeddings',
      { headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, body: 'x' },
      415,
      'unsupported_media_type',
    ],
    [
      'over the rate limit',
      'POST',
      '/v2/chat/completions',
      { headers: json(capped), body: chat },
      429,
      'rate_limit_exceeded',
    ],
    ["another owner's file (or none)", 'GET', '/v1/files/file-nobody', { headers: json(key) }, 404, 'not_found'],
    [
      'an invalid vector store body',
      'POST',
      '/v1/vector_stores',
      { headers: json(key), body: JSON.stringify({ chunking_strategy: { type: 'static' } }) },
      400,
      'missing_required_parameter',
    ],
    [
      '/queue without a key',
      'POST',
      '/queue/chat/completions',
      { headers: { 'content-type': 'application/json' }, body: chat },
      401,
      'invalid_api_key',
    ],
    ['/queue: an unknown request', 'GET', '/queue/requests/qr-nobody', { headers: json(key) }, 404, 'not_found'],
    [
      "an Azure path's unknown deployment",
      'POST',
      '/v2/openai/deployments/nope/chat/completions?api-version=2024-10-21',
      { headers: { 'api-key': key, 'content-type': 'application/json' }, body: chat },
      404,
      'model_not_found',
    ],
  ]
  for (const [what, method, path, options, status, code] of cases) {
    const { status: got, body } = await send(method, path, options)
    const error = body.error as { message?: unknown; type?: unknown; code?: unknown } | undefined
    t.equal(got, status, `${what}: ${status}`)
    t.equal(error?.code, code, `${what}: code ${code}`)
    t.equal(typeof error?.message, 'string', `${what}: error.message`)
    t.equal(body.detail, error?.message, `${what}: detail is error.message`)
    t.same(Object.keys(body).sort(), ['detail', 'error'], `${what}: nothing else`)
  }
})

t.test("an upstream's error in OpenAI's shape is relayed with detail added", async (t) => {
  // The mock backend answers these itself, as an upstream would (codes the gateway's table does not have).
  const cases: Array<[string, string, string]> = [
    [
      "an image count over the mock's maximum",
      '/v2/images/generations',
      JSON.stringify({ model: 'gpt-image-1', prompt: 'a square', n: 50 }),
    ],
    ['a vector store file that is not attached', '/v1/vector_stores/{vs}/files/file-none', ''],
  ]
  const store = (await send('POST', '/v1/vector_stores', { headers: json(key), body: '{}' })).body.id as string
  for (const [what, rawPath, body] of cases) {
    const path = rawPath.replace('{vs}', store)
    const reply = await send(body === '' ? 'GET' : 'POST', path, {
      headers: json(key),
      ...(body === '' ? {} : { body }),
    })
    const error = reply.body.error as { message: string; code: string | null }
    t.ok(reply.status >= 400 && reply.status < 500, `${what}: ${reply.status}`)
    t.notOk(GATEWAY_CODES.has(error.code), `${what}: the upstream's own code (${String(error.code)}), relayed`)
    t.equal(reply.body.detail, error.message, `${what}: detail is error.message`)
  }
})

t.test('the openai SDK reads these errors as before', async (t) => {
  const client = new OpenAI({ apiKey: 'tg1_wrong', baseURL: `${gw.url}/v2`, maxRetries: 0 })
  try {
    await client.models.list()
    t.fail('a wrong key should be refused')
  } catch (err) {
    t.ok(err instanceof OpenAI.AuthenticationError, 'an AuthenticationError')
    const apiError = err as InstanceType<typeof OpenAI.APIError>
    t.equal(apiError.status, 401)
    t.equal(apiError.code, 'invalid_api_key')
    t.equal(apiError.type, 'invalid_request_error')
    t.match(apiError.message, /^401 Incorrect API key provided/)
  }
})

t.test("the RAG gateway keeps FastAPI's shape alone", async (t) => {
  const login = await send('POST', '/api/v1/auth/user', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'nobody', password: 'wrong password here' }),
  })
  t.equal(login.status, 401)
  t.same(login.body, { detail: 'Incorrect username or password' })
  const noToken = await send('GET', '/config-manager/api/v1/user/configs')
  t.equal(noToken.status, 401)
  t.same(noToken.body, { detail: 'Not authenticated' })
  const badToken = await send('GET', '/config-manager/api/v1/user/configs', {
    headers: { authorization: 'Bearer not-a-token' },
  })
  t.same(badToken.body, { detail: 'Could not validate credentials' })
})

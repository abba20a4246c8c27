// The provider's reference pages (telekom/aifoundation-docs, src/content/docs/v1/reference/):
// api-endpoints.mdx (every endpoint of its tables, the versioned prefixes, the request and
// response formats) and error-codes.mdx (the statuses of its table and the OpenAI-style
// error object of its note), against the gateway `npm start` runs. The page's
// `{"detail": ...}` body and its 429 retry example are elsewhere (see INDEX.md: the detail
// field is another engineer's; the retry loop, the same as rate-limits.mdx's, is in
// rate-limits.test.ts).
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { AUDIO, curlForm, curlGet, curlJson, startDocsGateway } from './docs-gateway.ts'

const { gw, key, base } = await startDocsGateway()
const client = new OpenAI()

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string }
}

t.test('api-endpoints.mdx, Endpoints: each /v2 endpoint of the table answers', async (t) => {
  const file = await client.files.create({
    file: await toFile(
      Buffer.from('{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ho"}]}\n'),
      'train.jsonl',
    ),
    purpose: 'fine-tune',
  })
  const job = await client.fineTuning.jobs.create({ training_file: file.id, model: 'Llama-3.3-70B-Instruct' })
  const chat = { model: 'Llama-3.3-70B-Instruct', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5 }
  const calls: Array<[string, string, () => Promise<Response>]> = [
    ['GET', '/models', () => curlGet(`${base}/models`, key)],
    ['GET', '/models/{model_id}', () => curlGet(`${base}/models/Llama-3.3-70B-Instruct`, key)],
    ['POST', '/chat/completions', () => curlJson(`${base}/chat/completions`, key, chat)],
    [
      'POST',
      '/completions',
      () => curlJson(`${base}/completions`, key, { model: 'Llama-3.3-70B-Instruct', prompt: 'Hello', max_tokens: 5 }),
    ],
    [
      'POST',
      '/embeddings',
      () => curlJson(`${base}/embeddings`, key, { model: 'text-embedding-bge-m3', input: 'Hello' }),
    ],
    [
      'POST',
      '/audio/transcriptions',
      () =>
        curlForm(`${base}/audio/transcriptions`, key, { model: 'whisper-large-v3' }, { name: 'a.mp3', data: AUDIO }),
    ],
    [
      'POST',
      '/audio/translations',
      () => curlForm(`${base}/audio/translations`, key, { model: 'whisper-large-v3' }, { name: 'a.mp3', data: AUDIO }),
    ],
    ['GET', '/audio/models', () => curlGet(`${base}/audio/models`, key)],
    [
      'POST',
      '/images/generations',
      () => curlJson(`${base}/images/generations`, key, { model: 'gpt-image-1', prompt: 'A cat' }),
    ],
    [
      'POST',
      '/responses',
      () => curlJson(`${base}/responses`, key, { model: 'gpt-4.1', input: 'Hello', max_output_tokens: 16 }),
    ],
    [
      'POST',
      '/fine_tuning/jobs',
      () => curlJson(`${base}/fine_tuning/jobs`, key, { training_file: file.id, model: 'Llama-3.3-70B-Instruct' }),
    ],
    ['GET', '/fine_tuning/jobs', () => curlGet(`${base}/fine_tuning/jobs`, key)],
    ['POST', '/fine_tuning/jobs/{id}/cancel', () => curlJson(`${base}/fine_tuning/jobs/${job.id}/cancel`, key, {})],
    ['GET', '/fine_tuning/jobs/{id}/events', () => curlGet(`${base}/fine_tuning/jobs/${job.id}/events`, key)],
    [
      'POST',
      '/files',
      () => curlForm(`${base}/files`, key, { purpose: 'fine-tune' }, { name: 'b.jsonl', data: Buffer.from('{}\n') }),
    ],
    ['GET', '/files', () => curlGet(`${base}/files`, key)],
    [
      'DELETE',
      '/files/{id}',
      () => fetch(`${base}/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } }),
    ],
  ]
  t.equal(calls.length, 17, 'the 17 rows of the table')
  for (const [method, path, call] of calls) {
    const res = await call()
    t.equal(res.status, 200, `${method} ${path}`)
    await res.arrayBuffer()
  }
})

t.test('api-endpoints.mdx, Queue Endpoints and API Versioning: /queue, /v1 vector stores and files', async (t) => {
  // The queue rows are run one by one in asynchronous-requests.test.ts; here, the prefixes.
  t.equal((await curlGet(`${gw.url}/queue/models`, key)).status, 200, 'GET /queue/models')
  const v1 = new OpenAI({ baseURL: `${gw.url}/v1` })
  const store = await v1.vectorStores.create({ name: 'handbook' })
  t.match(store.id, /^vs_/, '/v1/vector_stores')
  t.ok((await v1.vectorStores.list()).data.some((s) => s.id === store.id))
  const file = await v1.files.create({
    file: await toFile(Buffer.from('Holidays: 30 days a year.'), 'hr.txt'),
    purpose: 'assistants',
  })
  t.ok(
    (await v1.files.list()).data.some((f) => f.id === file.id),
    '/v1/files',
  )
  t.ok(
    (await client.files.list()).data.some((f) => f.id === file.id),
    'the same files as /v2/files',
  )
})

t.test('api-endpoints.mdx, Request Format (curl) and Response Format (the chat.completion object)', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Hello' }],
  })
  t.equal(res.status, 200)
  const body = (await res.json()) as OpenAI.ChatCompletion
  t.match(body.id, /^chatcmpl-/)
  t.equal(body.object, 'chat.completion')
  t.ok(Number.isInteger(body.created) && Math.abs(body.created - Date.now() / 1000) < 600, 'created: Unix seconds')
  t.equal(body.model, 'Llama-3.3-70B-Instruct')
  t.match(body.choices[0], { index: 0, message: { role: 'assistant', content: String }, finish_reason: 'stop' })
  const usage = body.usage
  t.ok(
    usage !== undefined &&
      usage.total_tokens === usage.prompt_tokens + usage.completion_tokens &&
      usage.prompt_tokens > 0,
  )
})

t.test('api-endpoints.mdx, Authentication: Authorization: Bearer YOUR_API_KEY on every prefix', async (t) => {
  for (const path of ['/v2/models', '/queue/models', '/v1/vector_stores', '/v1/files']) {
    t.equal((await fetch(`${gw.url}${path}`)).status, 401, `${path} without a key`)
    t.equal((await curlGet(`${gw.url}${path}`, key)).status, 200, `${path} with it`)
  }
})

t.test(
  'error-codes.mdx, HTTP Status Codes: 400, 401, 403, 404 and 429, each an OpenAI-style error object',
  async (t) => {
    const refusal = async (res: Response, status: number, what: string): Promise<ErrorBody['error']> => {
      t.equal(res.status, status, what)
      const body = (await res.json()) as ErrorBody
      t.ok(
        typeof body.error.message === 'string' &&
          typeof body.error.type === 'string' &&
          typeof body.error.code === 'string',
        `${what}: {"error": {message, type, code}}`,
      )
      return body.error
    }
    // 400 Bad Request: invalid request format or parameters.
    await refusal(
      await fetch(`${base}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: '{"model": ',
      }),
      400,
      '400 malformed JSON',
    )
    await refusal(
      await curlJson(`${base}/chat/completions`, key, { model: 'Llama-3.3-70B-Instruct' }),
      400,
      '400 no messages',
    )
    // 401 Unauthorized: missing or invalid API key ("Invalid API key" under Common Issues).
    const missing = await refusal(await fetch(`${base}/models`), 401, '401 missing key')
    t.equal(missing.code, 'invalid_api_key')
    const invalid = await refusal(await curlGet(`${base}/models`, `${key.slice(0, -1)}x`), 401, '401 invalid key')
    t.equal(invalid.code, 'invalid_api_key')
    // 403 Forbidden: the key lacks permission for this resource (a key scoped to one model).
    const { key: scoped } = await gw.createKey({ tier: 'Standard1000', models: ['Llama-3.3-70B-Instruct'] })
    await refusal(
      await curlJson(`${base}/chat/completions`, scoped, {
        model: 'gpt-4.1',
        messages: [{ role: 'user', content: 'Hi' }],
      }),
      403,
      '403 model outside the key',
    )
    // 404 Not Found: invalid endpoint, or model not found ("Model not found": names are case-sensitive).
    await refusal(await curlGet(`${base}/no/such/endpoint`, key), 404, '404 unknown endpoint')
    await refusal(
      await curlJson(`${base}/chat/completions`, key, {
        model: 'llama-3.3-70b-instruct',
        messages: [{ role: 'user', content: 'Hi' }],
      }),
      404,
      '404 model name in the wrong case',
    )
    await refusal(await curlGet(`${base}/models/no-such-model`, key), 404, '404 GET /models/{unknown}')
    // 429 Too Many Requests: a key whose limit is one request a minute, asked twice.
    const { key: slow } = await gw.createKey({ tier: 'Standard1000', limits: { '*': { rpm: 1 } } })
    const chat = { model: 'Llama-3.3-70B-Instruct', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }
    t.equal((await curlJson(`${base}/chat/completions`, slow, chat)).status, 200)
    const limited = await curlJson(`${base}/chat/completions`, slow, chat)
    const error = await refusal(limited, 429, '429 rate limit exceeded')
    t.equal(error.code, 'rate_limit_exceeded')
    t.ok(Number(limited.headers.get('retry-after')) > 0, 'with retry-after, to wait and retry')
  },
)

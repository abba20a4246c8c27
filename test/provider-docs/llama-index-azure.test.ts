// Issue 27, item 4: the provider's LlamaIndex page runs against Tollgate as `npm start`
// starts it. The page is telekom/aifoundation-docs,
// src/content/docs/v1/integrations/llama-index.mdx: its LLM is LlamaIndex's AzureOpenAI
// with deployment_name="gpt-4o", azure_endpoint=OPENAI_BASE_URL (…/v2) and an api_version;
// that client is the openai SDK's AzureOpenAI underneath, which calls
// {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=… with the key in
// an `api-key` header. Here the JS SDK's AzureOpenAI, unchanged, does the same for chat
// (plain, and streamed as stream_complete streams), completions and embeddings; the page's
// embeddings use a plain OpenAI client on …/v2 ("Initialize Embeddings"). Then what a
// careful gateway owes such a client: the deployment is the model (for limits, scopes and
// the upstream), api-version goes no further, and the api-key header is a key like any.
import OpenAI, { AzureOpenAI, toFile } from 'openai'
import t from 'tap'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { startKeyedGateway } from '../helpers/sdk-gateway.ts'
import { rejectsWith } from '../helpers/assert.ts'
import { pollUntil } from '../helpers/poll.ts'

/** The page's api_version. */
const API_VERSION = '2023-07-01-preview'

const { gw, key } = await startKeyedGateway(t, { name: 'llama-index' })

/** "Initialize LLM": AzureOpenAI(deployment_name="gpt-4o", api_key, azure_endpoint=OPENAI_BASE_URL, api_version). */
function azure(deployment: string, apiKey = key, on: RunningTollgate = gw): AzureOpenAI {
  return new AzureOpenAI({ endpoint: `${on.url}/v2`, apiKey, apiVersion: API_VERSION, deployment, maxRetries: 0 })
}

function requestLogs(route: string): Array<Record<string, unknown>> {
  return gw.logs().filter((l) => l.msg === 'request' && l.route === route)
}

t.test('"Initialize LLM": chat through the Azure path, plain and streamed (stream_complete)', async (t) => {
  const llm = azure('gpt-4o')
  // LlamaIndex sends the deployment as the body's model; Azure's own samples send "".
  for (const model of ['gpt-4o', '']) {
    const reply = await llm.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Tell me a joke.' }],
      max_tokens: 32,
    })
    t.equal(reply.model, 'gpt-4o', `model ${JSON.stringify(model)}: answered by the deployment`)
    t.ok((reply.choices[0]?.message.content ?? '').length > 0, 'with an answer')
    t.ok((reply.usage?.prompt_tokens ?? 0) > 0, 'and usage')
  }
  // "# Test": for response in llm.stream_complete("Tell me a joke."): print(response.delta).
  const stream = await llm.chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'Tell me a joke.' }],
    stream: true,
    max_tokens: 32,
  })
  let text = ''
  let chunks = 0
  for await (const chunk of stream) {
    chunks++
    t.equal(chunk.model, 'gpt-4o')
    text += chunk.choices[0]?.delta.content ?? ''
  }
  t.ok(chunks > 2 && text.length > 0, `streamed in ${chunks} chunks`)
  // The stream's line is written once its accounting is done, a moment after its last byte.
  const onAzurePath = (): Array<Record<string, unknown>> =>
    requestLogs('chat.completions').filter((l) => String(l.path).startsWith('/v2/openai/deployments/gpt-4o/'))
  const logged = (
    await pollUntil(
      async () => onAzurePath(),
      (lines) => lines.length >= 3,
      500,
      10,
    )
  ).value
  t.equal(logged.length, 3, 'three calls on the Azure path')
  t.ok(
    logged.every((l) => l.model === 'gpt-4o' && l.status === 200 && Number(l.inputTokens) > 0),
    'each charged to gpt-4o, with its tokens',
  )
  t.notOk(gw.output().includes(key), 'the key in the api-key header is never logged')
})

t.test("completions and embeddings through the Azure path; the page's OpenAIEmbedding on /v2", async (t) => {
  const completion = await azure('gpt-4o').completions.create({ model: '', prompt: 'Once upon a time', max_tokens: 16 })
  t.equal(completion.model, 'gpt-4o')
  t.ok((completion.choices[0]?.text ?? '').length > 0)

  const azureEmbedding = await azure('jina-embeddings-v2-base-de').embeddings.create({
    model: '',
    input: 'Hello world',
  })
  t.equal(azureEmbedding.model, 'jina-embeddings-v2-base-de')
  t.ok((azureEmbedding.data[0]?.embedding.length ?? 0) > 0)

  // "Initialize Embeddings": OpenAIEmbedding(model_name=…, api_key, api_base=OPENAI_BASE_URL), a plain OpenAI client.
  const embedModel = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  const queryEmbedding = await embedModel.embeddings.create({
    model: 'jina-embeddings-v2-base-de',
    input: 'Hello world',
  })
  t.same(queryEmbedding.data[0]?.embedding, azureEmbedding.data[0]?.embedding, 'the same vector either way')
})

t.test("responses.create on AzureOpenAI: Azure's /openai/responses, the body's model the deployment", async (t) => {
  const client = azure('gpt-4o')
  const reply = await client.responses.create({ model: 'gpt-4o-mini', input: 'Tell me a joke.', max_output_tokens: 16 })
  t.equal(reply.model, 'gpt-4o-mini', "answered by the body's model, as on Azure")
  t.ok(reply.output_text.length > 0, 'with an answer')
  let text = ''
  for await (const event of await client.responses.create({ model: 'gpt-4o', input: 'Hi', stream: true }))
    if (event.type === 'response.output_text.delta') text += event.delta
  t.ok(text.length > 0, 'and streamed')
  const logged = (
    await pollUntil(
      async () => requestLogs('responses').filter((l) => l.path === '/v2/openai/responses'),
      (lines) => lines.length >= 2,
      500,
      10,
    )
  ).value
  t.same(
    logged.map((l) => [l.model, l.status]),
    [
      ['gpt-4o-mini', 200],
      ['gpt-4o', 200],
    ],
    'both on the Azure path, each charged to its model',
  )
})

t.test('the client configured by baseURL (…/v2/openai), or with the deployment in the base URL', async (t) => {
  const byBase = new AzureOpenAI({
    baseURL: `${gw.url}/v2/openai`,
    apiKey: key,
    apiVersion: API_VERSION,
    deployment: 'gpt-4o-mini',
    maxRetries: 0,
  })
  t.equal(
    (await byBase.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 }))
      .model,
    'gpt-4o-mini',
  )
  const inBase = new AzureOpenAI({
    baseURL: `${gw.url}/v2/openai/deployments/gpt-4.1`,
    apiKey: key,
    apiVersion: API_VERSION,
    maxRetries: 0,
  })
  t.equal(
    (
      await inBase.chat.completions.create({
        model: 'gpt-4.1',
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 8,
      })
    ).model,
    'gpt-4.1',
  )
})

t.test('the deployment is the model: for scopes, for kinds, for forms', async (t) => {
  // A key limited to one model cannot reach another by naming it in the path, or in the body.
  const narrow = (await gw.createKey({ tier: 'Standard4000', models: ['gpt-4o-mini'] })).key
  await rejectsWith(
    t,
    azure('gpt-4o', narrow).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'x' }],
    }),
    403,
    'another deployment, whatever the body says',
  )
  const allowed = await azure('gpt-4o-mini', narrow).chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'x' }],
    max_tokens: 4,
  })
  t.equal(allowed.model, 'gpt-4o-mini', 'its own deployment, whatever the body says')

  await rejectsWith(
    t,
    azure('no-such-deployment').chat.completions.create({ model: '', messages: [{ role: 'user', content: 'x' }] }),
    404,
    'an unknown deployment',
  )
  await rejectsWith(
    t,
    azure('jina-embeddings-v2-base-de').chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'x' }],
    }),
    404,
    'an embedding model as a chat deployment',
  )

  // A form goes upstream as sent: its model must be the deployment.
  const audio = await toFile(Buffer.from('RIFF$\u0000\u0000\u0000WAVEfmt ', 'latin1'), 'a.wav')
  const transcript = await azure('whisper-large-v3').audio.transcriptions.create({
    model: 'whisper-large-v3',
    file: audio,
  })
  t.ok(transcript.text.length > 0, 'a transcription whose form names the deployment')
  try {
    await azure('whisper-large-v3').audio.transcriptions.create({
      model: 'other',
      file: await toFile(Buffer.from('RIFF$\u0000\u0000\u0000WAVEfmt ', 'latin1'), 'a.wav'),
    })
    t.fail('a form naming another model should be refused')
  } catch (err) {
    t.equal((err as { status?: number }).status, 400)
    t.equal((err as { param?: string }).param, 'model')
  }
})

t.test('the api-key header: wherever a Bearer key is taken; two different keys are refused', async (t) => {
  const models = await fetch(`${gw.url}/v2/models`, { headers: { 'api-key': key } })
  t.equal(models.status, 200, 'GET /v2/models with api-key')
  t.equal((await fetch(`${gw.url}/v1/vector_stores`, { headers: { 'api-key': key } })).status, 200, '/v1 with api-key')
  t.equal((await fetch(`${gw.url}/queue/models`, { headers: { 'api-key': key } })).status, 200, '/queue with api-key')
  t.equal(
    (await fetch(`${gw.url}/v2/models`, { headers: { 'api-key': key, authorization: `Bearer ${key}` } })).status,
    200,
    'both, the same key',
  )
  const other = (await gw.createKey({ tier: 'Standard4000' })).key
  const two = await fetch(`${gw.url}/v2/models`, { headers: { 'api-key': other, authorization: `Bearer ${key}` } })
  t.equal(two.status, 401, 'two different keys')
  const body = (await two.json()) as { error: { code: string; message: string }; detail: string }
  t.equal(body.error.code, 'invalid_api_key')
  t.match(body.detail, /Two different API keys/)
  t.notMatch(JSON.stringify(body), new RegExp(`${key}|${other}`), 'neither key echoed')
  const wrong = await fetch(`${gw.url}/v2/models`, { headers: { 'api-key': 'tg1_wrong' } })
  t.equal(wrong.status, 401, 'a wrong key in api-key')
  const blank = await fetch(`${gw.url}/v2/models`, { headers: { 'api-key': '  ' } })
  t.equal(blank.status, 401, 'a blank api-key is no key')
  t.match(((await blank.json()) as { error: { message: string } }).error.message, /api-key header/)
})

t.test('failed api-key attempts count towards the auth throttle like Bearer ones', async (t) => {
  const strict = await startTollgate({
    config: (doc) => {
      doc.auth = { maxFailures: 3, windowSeconds: 60, blockSeconds: 60 }
    },
  })
  t.teardown(() => strict.stop())
  const good = (await strict.createKey({ tier: 'Standard4000' })).key
  const statuses: number[] = []
  for (let i = 0; i < 3; i++)
    statuses.push(
      (
        await fetch(`${strict.url}/v2/openai/deployments/gpt-4o/chat/completions?api-version=${API_VERSION}`, {
          method: 'POST',
          headers: { 'api-key': `tg1_guess_${i}`, 'content-type': 'application/json' },
          body: '{}',
        })
      ).status,
    )
  statuses.push(
    (await fetch(`${strict.url}/v2/models`, { headers: { 'api-key': good, authorization: `Bearer ${good}x` } })).status,
  )
  t.same(statuses, [401, 401, 401, 401], 'three guesses, then a conflicting pair')
  const blocked = await fetch(`${strict.url}/v2/models`, { headers: { 'api-key': good } })
  t.equal(blocked.status, 429, 'the address is blocked, even with a good key')
  t.equal(((await blocked.json()) as { error: { code: string } }).error.code, 'too_many_auth_failures')
})

t.test(
  "through the openai adapter: the twin's path, the upstream's model name, no api-version, no client key",
  async (t) => {
    const upstream: UpstreamProcess = await startUpstream()
    const front = await startTollgate({
      config: (doc) => {
        doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: `${upstream.url}/v1` } }
        doc.models = [
          { name: 'gpt-4o', kind: 'chat', deployments: [{ backend: 'up', model: 'upstream-gpt-4o' }] },
          { name: 'jina-embeddings-v2-base-de', kind: 'embedding', deployments: [{ backend: 'up' }] },
        ]
      },
    })
    t.teardown(async () => {
      await front.stop()
      await upstream.stop()
    })
    const frontKey = (await front.createKey({ tier: 'Standard4000' })).key
    const client = azure('gpt-4o', frontKey, front)
    const reply = await client.chat.completions.create({
      model: 'ignored-by-azure',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 8,
    })
    t.equal(reply.model, 'gpt-4o', 'the client sees the public name')
    let streamed = 0
    for await (const chunk of await client.chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 8,
      stream: true,
    }))
      streamed += chunk.choices.length
    t.ok(streamed > 0, 'a stream through the upstream')
    const embedder = azure('jina-embeddings-v2-base-de', frontKey, front)
    t.equal((await embedder.embeddings.create({ model: '', input: 'x' })).model, 'jina-embeddings-v2-base-de')

    const seen = await upstream.requests()
    t.same(
      seen.map((r) => `${r.method} ${r.path}`),
      ['POST /v1/chat/completions', 'POST /v1/chat/completions', 'POST /v1/embeddings'],
      "the twins' paths, without api-version",
    )
    t.same(
      seen.map((r) => r.model),
      ['upstream-gpt-4o', 'upstream-gpt-4o', 'jina-embeddings-v2-base-de'],
      "the deployment's model, as the upstream names it",
    )
    t.ok(
      seen.every((r) => r.headers['api-key'] === undefined && r.headers.authorization === undefined),
      "the client's key goes no further",
    )
  },
)

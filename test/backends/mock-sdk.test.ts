// The official openai SDK parses every reply of the mock. A bare loopback server stands in
// for the gateway: it reads bodies with the gateway's own readers, calls adapter.send, and
// pipes the reply back, so what the SDK sees is exactly what the adapter produced.
import t from 'tap'
import OpenAI, { toFile } from 'openai'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pipeline } from 'node:stream/promises'
import type { Endpoint } from '../../src/config/schema.ts'
import type { RequestBody } from '../../src/http/body.ts'
import { readJsonBody, readMultipartBody } from '../../src/http/body.ts'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'

const ROUTES: ReadonlyArray<readonly [string, RegExp, Endpoint, 'json' | 'multipart' | 'none']> = [
  ['POST', /^\/chat\/completions$/, 'chat.completions', 'json'],
  ['POST', /^\/completions$/, 'completions', 'json'],
  ['POST', /^\/responses$/, 'responses', 'json'],
  ['POST', /^\/embeddings$/, 'embeddings', 'json'],
  ['POST', /^\/images\/generations$/, 'images.generations', 'json'],
  ['POST', /^\/images\/edits$/, 'images.edits', 'multipart'],
  ['POST', /^\/audio\/transcriptions$/, 'audio.transcriptions', 'multipart'],
  ['POST', /^\/audio\/translations$/, 'audio.translations', 'multipart'],
  ['POST', /^\/files$/, 'files.create', 'multipart'],
  ['GET', /^\/files(\/[^/]+)?$/, 'files.list', 'none'],
  ['DELETE', /^\/files\/[^/]+$/, 'files.delete', 'none'],
  ['POST', /^\/fine_tuning\/jobs$/, 'fine_tuning.jobs.create', 'json'],
  ['GET', /^\/fine_tuning\/jobs(\/[^/]+)?$/, 'fine_tuning.jobs.list', 'none'],
  ['POST', /^\/fine_tuning\/jobs\/[^/]+\/cancel$/, 'fine_tuning.jobs.cancel', 'none'],
  ['GET', /^\/fine_tuning\/jobs\/[^/]+\/events$/, 'fine_tuning.jobs.events', 'none'],
]

// Fine-tuning jobs move only when the test moves this clock.
let now = Date.now()
const STEP_MS = 1_000
const backend = createMockBackend(
  'mock',
  { type: 'mock', tokensPerSecond: 2000, defaultCompletionTokens: 24, fineTuneStepMs: STEP_MS },
  { now: () => now },
)
const spool = t.testdir()
const server: Server = createServer((req, res) => {
  const path = (req.url ?? '').replace(/^\/v1/, '')
  const route = ROUTES.find(([method, pattern]) => method === req.method && pattern.test(path.split('?')[0] ?? ''))
  if (!route) {
    res.writeHead(404).end()
    return
  }
  const [method, , endpoint, kind] = route
  const controller = new AbortController()
  res.on('close', () => controller.abort())
  void (async () => {
    const body: RequestBody =
      kind === 'json'
        ? await readJsonBody(req, 1 << 24)
        : kind === 'multipart'
          ? await readMultipartBody(req, 1 << 26, spool)
          : { kind: 'none' }
    const upstream = await backend.send({
      endpoint,
      method: method as 'GET' | 'POST' | 'DELETE',
      path,
      model: null,
      body,
      requestId: 'sdk',
      signal: controller.signal,
      client: { req, res },
    })
    res.writeHead(upstream.status, upstream.headers)
    await pipeline(upstream.body, res)
  })().catch(() => res.destroy())
})

let client: OpenAI
t.before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  client = new OpenAI({ apiKey: 'sk-test', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 })
})
t.teardown(async () => {
  await backend.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Hello, SDK.' }]

t.test('chat: create, stream, and the stream helper', async (t) => {
  const res = await client.chat.completions.create({ model: 'gpt-x', messages, max_tokens: 15 })
  t.equal(res.choices[0]?.finish_reason, 'length')
  t.equal(res.usage?.completion_tokens, 15)
  const content = res.choices[0]?.message.content ?? ''

  let streamed = ''
  let usage: OpenAI.CompletionUsage | null | undefined
  for await (const chunk of await client.chat.completions.create({
    model: 'gpt-x',
    messages,
    max_tokens: 15,
    stream: true,
    stream_options: { include_usage: true },
  })) {
    streamed += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage) usage = chunk.usage
  }
  t.equal(streamed, content)
  t.equal(usage?.completion_tokens, 15)

  const runner = client.chat.completions.stream({ model: 'gpt-x', messages, max_tokens: 15 })
  const final = await runner.finalChatCompletion()
  t.equal(final.choices[0]?.message.content, content, 'the SDK accumulator rebuilds the same message')
  t.equal(final.choices[0]?.finish_reason, 'length')
})

t.test('legacy completions', async (t) => {
  const res = await client.completions.create({ model: 'gpt-x', prompt: 'Once', max_tokens: 5 })
  t.equal(await countTextTokens(res.choices[0]?.text ?? ''), 5)
  let text = ''
  for await (const chunk of await client.completions.create({
    model: 'gpt-x',
    prompt: 'Once',
    max_tokens: 5,
    stream: true,
  }))
    text += chunk.choices[0]?.text ?? ''
  t.equal(text, res.choices[0]?.text)
})

t.test('responses: create, raw stream, and the ResponseStream helper', async (t) => {
  const res = await client.responses.create({ model: 'gpt-x', input: 'Write one line.' })
  t.equal(res.status, 'completed')
  t.ok(res.output_text.startsWith("This is Tollgate's mock backend"), 'the SDK derives output_text')
  t.equal(res.usage?.output_tokens, 24)

  let text = ''
  for await (const event of await client.responses.create({ model: 'gpt-x', input: 'Write one line.', stream: true })) {
    if (event.type === 'response.output_text.delta') text += event.delta
  }
  t.equal(text, res.output_text)

  const stream = client.responses.stream({ model: 'gpt-x', input: 'Write one line.' })
  let helperText = ''
  stream.on('response.output_text.delta', (event) => {
    helperText += event.delta
  })
  const final = await stream.finalResponse()
  t.equal(final.output_text, res.output_text, 'the strict stream helper accepts the event sequence')
  t.equal(helperText, res.output_text)
  t.equal(final.usage?.total_tokens, res.usage?.total_tokens)
})

t.test('embeddings: the SDK default (base64) decodes to the float vector', async (t) => {
  const viaBase64 = await client.embeddings.create({ model: 'emb', input: ['alpha', 'beta'] })
  const viaFloat = await client.embeddings.create({ model: 'emb', input: ['alpha', 'beta'], encoding_format: 'float' })
  t.equal(viaBase64.data[0]?.embedding.length, 256)
  t.same(
    viaBase64.data.map((d) => d.embedding),
    viaFloat.data.map((d) => d.embedding),
  )
  const small = await client.embeddings.create({ model: 'emb', input: 'x', dimensions: 32 })
  t.equal(small.data[0]?.embedding.length, 32)
})

t.test('images: generate and edit', async (t) => {
  const gen = await client.images.generate({ model: 'gpt-image-1', prompt: 'a red square', n: 2 })
  t.equal(gen.data?.length, 2)
  t.ok(
    Buffer.from(gen.data?.[0]?.b64_json ?? '', 'base64')
      .subarray(1, 4)
      .equals(Buffer.from('PNG')),
  )
  const edit = await client.images.edit({
    model: 'gpt-image-1',
    prompt: 'bluer',
    image: [
      await toFile(Buffer.from(gen.data?.[0]?.b64_json ?? '', 'base64'), 'a.png', { type: 'image/png' }),
      await toFile(Buffer.alloc(20), 'b.png', { type: 'image/png' }),
    ],
  })
  t.equal(edit.data?.length, 1)
  t.equal(edit.usage?.input_tokens_details.image_tokens, 170, 'both images arrived')
})

t.test('audio: transcriptions in json and text, translations, and a transcription stream', async (t) => {
  const file = await toFile(Buffer.alloc(32_000, 1), 'speech.wav', { type: 'audio/wav' })
  const json = await client.audio.transcriptions.create({ model: 'whisper-large-v3', file })
  t.match(json.text, /mock transcription of an audio file of 32000 bytes/)
  const text = await client.audio.transcriptions.create({
    model: 'whisper-large-v3',
    file: await toFile(Buffer.alloc(32_000, 1), 'speech.wav'),
    response_format: 'text',
  })
  t.equal(text, `${json.text}\n`)
  const verbose = await client.audio.transcriptions.create({
    model: 'whisper-large-v3',
    file: await toFile(Buffer.alloc(32_000, 1), 's.wav'),
    response_format: 'verbose_json',
  })
  t.equal(verbose.duration, 2)
  const translation = await client.audio.translations.create({
    model: 'whisper-large-v3',
    file: await toFile(Buffer.alloc(100), 's.wav'),
  })
  t.match(translation.text, /mock translation/)
  let deltas = ''
  let done = ''
  for await (const event of await client.audio.transcriptions.create({
    model: 'gpt-4o-transcribe',
    file: await toFile(Buffer.alloc(32_000, 1), 's.wav'),
    stream: true,
  })) {
    if (event.type === 'transcript.text.delta') deltas += event.delta
    if (event.type === 'transcript.text.done') done = event.text
  }
  t.equal(deltas, json.text)
  t.equal(done, json.text)
})

t.test('files and fine-tuning through the SDK, with auto-pagination', async (t) => {
  const file = await client.files.create({
    file: await toFile(Buffer.from('{"messages":[]}\n'), 'train.jsonl'),
    purpose: 'fine-tune',
  })
  t.equal(file.bytes, 16)
  t.equal(file.filename, 'train.jsonl')
  const ids: string[] = []
  for await (const f of client.files.list()) ids.push(f.id)
  t.ok(ids.includes(file.id))
  t.equal((await client.files.retrieve(file.id)).id, file.id)

  const jobs = []
  for (let i = 0; i < 3; i++)
    jobs.push(await client.fineTuning.jobs.create({ model: 'gpt-4o-mini', training_file: file.id }))
  const listed: string[] = []
  for await (const job of client.fineTuning.jobs.list({ limit: 1 })) listed.push(job.id)
  t.same(listed, jobs.map((j) => j.id).reverse(), 'the SDK follows has_more page by page, newest first')

  now += STEP_MS
  const cancelled = await client.fineTuning.jobs.cancel(jobs[0]?.id ?? '')
  t.equal(cancelled.status, 'cancelled')
  t.equal((await client.fineTuning.jobs.retrieve(jobs[1]?.id ?? '')).status, 'running')
  now += STEP_MS
  const succeeded = await client.fineTuning.jobs.retrieve(jobs[1]?.id ?? '')
  t.equal(succeeded.status, 'succeeded')
  t.match(succeeded.fine_tuned_model, /^ft:gpt-4o-mini:tollgate-mock::/)
  const events: string[] = []
  for await (const event of client.fineTuning.jobs.listEvents(succeeded.id, { limit: 2 })) events.push(event.message)
  t.equal(events.length, 5, 'all events across pages')
  t.equal(events[0], 'The job has successfully completed')

  t.same(await client.files.delete(file.id), { id: file.id, object: 'file', deleted: true })
  t.type(await client.files.retrieve(file.id).catch((e: unknown) => e), OpenAI.NotFoundError)
})

t.test('refusals surface as the SDK error classes, with param and code', async (t) => {
  const error = await client.chat.completions.create({ model: 'gpt-x', messages: [] }).catch((e: unknown) => e)
  t.type(error, OpenAI.BadRequestError)
  const bad = error as InstanceType<typeof OpenAI.BadRequestError>
  t.equal(bad.status, 400)
  t.equal(bad.param, 'messages')
  t.equal(bad.code, 'empty_array')
  t.type(await client.fineTuning.jobs.retrieve('ftjob-missing').catch((e: unknown) => e), OpenAI.NotFoundError)
  t.type(
    await client.fineTuning.jobs.create({ model: 'm', training_file: 'file-missing' }).catch((e: unknown) => e),
    OpenAI.BadRequestError,
  )
})

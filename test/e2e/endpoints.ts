// Every /v2 endpoint through the official openai SDK, against whichever backend the
// running Tollgate is configured with. Registered by sdk-mock.test.ts and
// sdk-upstream.test.ts.
import OpenAI, { toFile } from 'openai'
import type { Test } from 'tap'
import { inflateSync } from 'node:zlib'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { rejectsWith } from '../helpers/assert.ts'
import { pollUntil } from '../helpers/poll.ts'

export interface Subject {
  readonly gw: RunningTollgate
  readonly client: OpenAI
  readonly key: string
  /**
   * The upstream is an OpenAI-compatible server, so a call that names no output cap is sent
   * the gateway's (defaultMaxTokens, docs/limits.md); the mock's logic behind it writes a cap
   * to the token, so such a Responses call ends there, incomplete, as OpenAI's does.
   */
  readonly capsSent?: boolean
}

export function endpointTests(t: Test, subject: () => Subject): void {
  const CHAT = 'Mistral-Small-24B-Instruct-2501'

  t.test('models: list and retrieve', async (t) => {
    const ids: string[] = []
    for await (const model of subject().client.models.list()) ids.push(model.id)
    t.ok(ids.includes(CHAT))
    t.ok(ids.includes('text-embedding-bge-m3'))
    t.ok(ids.includes('whisper-large-v3'))
    const model = await subject().client.models.retrieve(CHAT)
    t.equal(model.id, CHAT)
    t.equal(model.object, 'model')
    await rejectsWith(t, subject().client.models.retrieve('no-such-model'), 404)
    const audio = await fetch(`${subject().gw.url}/v2/audio/models`, {
      headers: { authorization: `Bearer ${subject().key}` },
    })
    const list = (await audio.json()) as { data: Array<{ id: string }> }
    t.same(
      list.data.map((m) => m.id),
      ['whisper-large-v3', 'whisper-large-v3-turbo'],
    )
  })

  t.test('chat completion', async (t) => {
    const res = await subject().client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'Say hello' }],
      max_tokens: 12,
    })
    t.equal(res.object, 'chat.completion')
    t.equal(res.model, CHAT)
    t.match(res.id, /^chatcmpl-/)
    t.type(res.created, 'number')
    const choice = res.choices[0]
    t.equal(choice?.message.role, 'assistant')
    t.match(choice?.message.content, /mock/i)
    t.ok(['stop', 'length'].includes(choice?.finish_reason ?? ''))
    t.ok(res.usage && res.usage.prompt_tokens > 0)
    t.ok(res.usage && res.usage.completion_tokens > 0 && res.usage.completion_tokens <= 12)
    t.equal(res.usage?.total_tokens, (res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0))
    const again = await subject().client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'Say hello' }],
      max_tokens: 12,
    })
    t.equal(again.choices[0]?.message.content, choice?.message.content, 'deterministic')
  })

  t.test('chat completion streams; the usage chunk only when asked for', async (t) => {
    const plain = await subject().client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'stream please' }],
      max_tokens: 10,
      stream: true,
    })
    let text = ''
    let usageChunks = 0
    for await (const chunk of plain) {
      if (chunk.usage) usageChunks++
      text += chunk.choices[0]?.delta.content ?? ''
    }
    t.ok(text.length > 0)
    t.equal(usageChunks, 0, 'no usage chunk when the client did not ask')

    const withUsage = await subject().client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'stream please' }],
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    })
    let text2 = ''
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of withUsage) {
      if (chunk.usage) usage = chunk.usage
      text2 += chunk.choices[0]?.delta.content ?? ''
    }
    t.equal(text2, text, 'same text either way')
    t.ok(usage && usage.completion_tokens > 0 && usage.prompt_tokens > 0)

    const whole = await subject().client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'stream please' }],
      max_tokens: 10,
    })
    t.equal(whole.choices[0]?.message.content, text, 'stream and non-stream agree')
  })

  t.test('legacy completions, streamed and not', async (t) => {
    const res = await subject().client.completions.create({ model: CHAT, prompt: 'Once upon a time', max_tokens: 8 })
    t.equal(res.object, 'text_completion')
    t.ok((res.choices[0]?.text ?? '').length > 0)
    t.ok((res.usage?.prompt_tokens ?? 0) > 0)
    let text = ''
    for await (const chunk of await subject().client.completions.create({
      model: CHAT,
      prompt: 'Once upon a time',
      max_tokens: 8,
      stream: true,
    })) {
      text += chunk.choices[0]?.text ?? ''
    }
    t.equal(text, res.choices[0]?.text)
  })

  t.test('responses API, streamed and not', async (t) => {
    const res = await subject().client.responses.create({ model: CHAT, input: 'Write one line.' })
    t.equal(res.object, 'response')
    t.ok(res.output_text.length > 0)
    t.ok((res.usage?.input_tokens ?? 0) > 0)
    const capped = subject().capsSent === true
    if (capped) t.match(res, { status: 'incomplete', usage: { output_tokens: 1024 } }, "ended at the gateway's cap")
    let text = ''
    let completed = false
    for await (const event of await subject().client.responses.create({
      model: CHAT,
      input: 'Write one line.',
      stream: true,
    })) {
      if (event.type === 'response.output_text.delta') text += event.delta
      if (event.type === (capped ? 'response.incomplete' : 'response.completed')) completed = true
    }
    t.ok(completed)
    t.equal(text, res.output_text)
  })

  t.test('embeddings, base64 (the SDK default) and float', async (t) => {
    const res = await subject().client.embeddings.create({ model: 'text-embedding-bge-m3', input: ['alpha', 'beta'] })
    t.equal(res.data.length, 2)
    t.ok(Array.isArray(res.data[0]?.embedding) && (res.data[0]?.embedding.length ?? 0) > 0)
    t.ok(res.usage.prompt_tokens > 0)
    const float = await subject().client.embeddings.create({
      model: 'text-embedding-bge-m3',
      input: ['alpha', 'beta'],
      encoding_format: 'float',
    })
    const a = res.data[0]?.embedding ?? []
    const b = float.data[0]?.embedding ?? []
    t.equal(a.length, b.length)
    t.ok(
      a.every((v, i) => Math.abs(v - (b[i] ?? NaN)) < 1e-6),
      'base64 and float agree',
    )
    await rejectsWith(
      t,
      subject().client.embeddings.create({ model: CHAT, input: 'x' }),
      404,
      'a chat model is not an embedding model',
    )
  })

  function checkPng(t: Test, b64: string | undefined): void {
    const png = Buffer.from(b64 ?? '', 'base64')
    t.same([...png.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10], 'PNG signature')
    const idat = png.indexOf('IDAT')
    t.ok(idat > 0, 'has image data')
    const length = png.readUInt32BE(idat - 4)
    t.doesNotThrow(() => inflateSync(png.subarray(idat + 4, idat + 4 + length)), 'image data inflates')
  }

  t.test('images: generate and edit', async (t) => {
    const gen = await subject().client.images.generate({ model: 'gpt-image-1', prompt: 'a red square' })
    t.equal(gen.data?.length, 1)
    checkPng(t, gen.data?.[0]?.b64_json)
    const source = Buffer.from(gen.data?.[0]?.b64_json ?? '', 'base64')
    const edit = await subject().client.images.edit({
      model: 'gpt-image-1',
      image: await toFile(source, 'in.png', { type: 'image/png' }),
      prompt: 'make it blue',
    })
    checkPng(t, edit.data?.[0]?.b64_json)
  })

  t.test('audio: transcription and translation', async (t) => {
    const audio = Buffer.alloc(48_000, 7)
    const tr = await subject().client.audio.transcriptions.create({
      model: 'whisper-large-v3',
      file: await toFile(audio, 'speech.wav', { type: 'audio/wav' }),
    })
    t.match(tr.text, /mock/i)
    const tl = await subject().client.audio.translations.create({
      model: 'whisper-large-v3',
      file: await toFile(audio, 'speech.wav', { type: 'audio/wav' }),
    })
    t.ok(tl.text.length > 0)
    const text = await subject().client.audio.transcriptions.create({
      model: 'whisper-large-v3',
      file: await toFile(audio, 'speech.wav'),
      response_format: 'text',
    })
    t.type(text, 'string')
  })

  t.test('files and fine-tuning jobs, owned by the key that made them', async (t) => {
    const file = await subject().client.files.create({
      file: await toFile(Buffer.from('{"messages":[]}\n'), 'train.jsonl'),
      purpose: 'fine-tune',
    })
    t.match(file.id, /^file-/)
    t.equal(file.bytes, 16)
    const mine: string[] = []
    for await (const f of subject().client.files.list()) mine.push(f.id)
    t.ok(mine.includes(file.id))
    const content = await subject().client.files.content(file.id)
    t.equal(await content.text(), '{"messages":[]}\n', 'files.content gives the bytes back')
    // Several megabytes of every byte value come back exactly, streamed through.
    const big = Buffer.alloc(6 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 256
    const bigFile = await subject().client.files.create({ file: await toFile(big, 'big.bin'), purpose: 'user_data' })
    const bigContent = Buffer.from(await (await subject().client.files.content(bigFile.id)).arrayBuffer())
    t.equal(bigContent.length, big.length, 'a 6 MiB file: every byte')
    t.ok(bigContent.equals(big), 'and the same bytes')
    await subject().client.files.delete(bigFile.id)

    const job = await subject().client.fineTuning.jobs.create({ model: CHAT, training_file: file.id })
    t.equal(job.object, 'fine_tuning.job')
    const jobs: string[] = []
    for await (const j of subject().client.fineTuning.jobs.list()) jobs.push(j.id)
    t.ok(jobs.includes(job.id))
    const { value: status } = await pollUntil(
      async () => (await subject().client.fineTuning.jobs.retrieve(job.id)).status,
      (s) => s === 'succeeded',
      500,
      20,
    )
    t.equal(status, 'succeeded', 'queued → running → succeeded')
    const events: string[] = []
    for await (const e of subject().client.fineTuning.jobs.listEvents(job.id)) events.push(e.message)
    t.ok(events.length >= 3)

    // A job runs two fine-tune steps (250 ms each in the tests' mock): room enough for a cancel on a loaded machine.
    const second = await subject().client.fineTuning.jobs.create({ model: CHAT, training_file: file.id })
    const cancelled = await subject().client.fineTuning.jobs.cancel(second.id)
    t.equal(cancelled.status, 'cancelled')

    // Another key, even of another owner, sees none of it.
    const other = new OpenAI({
      apiKey: (await subject().gw.createKey({ owner: 'someone-else' })).key,
      baseURL: `${subject().gw.url}/v2`,
      maxRetries: 0,
    })
    const theirs: string[] = []
    for await (const f of other.files.list()) theirs.push(f.id)
    t.notOk(theirs.includes(file.id), 'not in their file list')
    await rejectsWith(t, other.files.delete(file.id), 404, 'cannot delete it')
    await rejectsWith(t, other.files.retrieve(file.id), 404, 'cannot read it')
    await rejectsWith(t, other.files.content(file.id), 404, 'cannot read its content')
    await rejectsWith(t, other.fineTuning.jobs.retrieve(job.id), 404)
    await rejectsWith(t, other.fineTuning.jobs.cancel(job.id), 404)
    await rejectsWith(t, other.fineTuning.jobs.listEvents(job.id), 404)
    const theirJobs: string[] = []
    for await (const j of other.fineTuning.jobs.list()) theirJobs.push(j.id)
    t.notOk(theirJobs.includes(job.id))

    const deleted = await subject().client.files.delete(file.id)
    t.equal(deleted.deleted, true)
    const after: string[] = []
    for await (const f of subject().client.files.list()) after.push(f.id)
    t.notOk(after.includes(file.id))
  })

  t.test('every reply carries the request id, and a client id is echoed', async (t) => {
    const res = await fetch(`${subject().gw.url}/v2/models`, {
      headers: { authorization: `Bearer ${subject().key}`, 'x-request-id': 'my-trace-42' },
    })
    t.equal(res.headers.get('x-request-id'), 'my-trace-42')
    const hostile = await fetch(`${subject().gw.url}/v2/models`, {
      headers: { authorization: `Bearer ${subject().key}`, 'x-request-id': 'a b<script>' },
    })
    t.match(hostile.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/, 'an unsafe id is replaced')
  })
}

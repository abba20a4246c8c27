// The mock's embeddings, images and audio: vectors that are unit length and agree across
// encodings, PNGs that a strict reader accepts, and transcriptions in every format.
import t from 'tap'
import type OpenAI from 'openai'
import { text as readText } from 'node:stream/consumers'
import { crc32, inflateSync } from 'node:zlib'
import type { Endpoint } from '../../src/config/schema.ts'
import type { UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import type { RequestBody } from '../../src/http/body.ts'
import { countInputTokens, countTextTokens } from '../../src/tokenizer/tokens.ts'
import { multipartBody, type Part } from '../helpers/multipart.ts'
import { client, json, mockBackend, type OpenAIErrorBody } from './mock-helpers.ts'

const backend = mockBackend(t)

function request(endpoint: Endpoint, path: string, body: RequestBody): UpstreamRequest {
  return {
    endpoint,
    method: 'POST',
    path,
    model: 'mock-model',
    requestId: 'req-media',
    body,
    signal: new AbortController().signal,
    client,
  }
}

const post = (endpoint: Endpoint, path: string, value: Record<string, unknown>): UpstreamRequest =>
  request(endpoint, path, { kind: 'json', value })

const norm = (v: readonly number[]): number => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0))

function decodeFloats(b64: string): number[] {
  const bytes = Buffer.from(b64, 'base64')
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
}

t.test('embeddings: 256 unit-length dimensions by default, deterministic, distinct per input', async (t) => {
  const res = await json<OpenAI.CreateEmbeddingResponse>(
    await backend.send(
      post('embeddings', '/embeddings', {
        model: 'emb',
        input: ['alpha', 'beta', 'alpha'],
        encoding_format: 'float',
      }),
    ),
  )
  t.equal(res.object, 'list')
  t.equal(res.model, 'emb')
  t.same(
    res.data.map((d) => [d.object, d.index]),
    [
      ['embedding', 0],
      ['embedding', 1],
      ['embedding', 2],
    ],
  )
  const [a, b, a2] = res.data.map((d) => d.embedding)
  t.equal(a?.length, 256)
  t.ok(Math.abs(norm(a ?? []) - 1) < 1e-5, 'L2-normalised')
  t.same(a, a2, 'same text, same vector')
  t.not(JSON.stringify(a), JSON.stringify(b), 'other text, other vector')
  t.same(res.usage, {
    prompt_tokens: await countInputTokens(['alpha', 'beta', 'alpha']),
    total_tokens: await countInputTokens(['alpha', 'beta', 'alpha']),
  })
})

t.test('embeddings: base64 is little-endian float32 of the same vector, at the asked dimensions', async (t) => {
  for (const dimensions of [undefined, 8, 1536]) {
    const params = { model: 'emb', input: 'the quick brown fox', ...(dimensions ? { dimensions } : {}) }
    const float = await json<OpenAI.CreateEmbeddingResponse>(
      await backend.send(post('embeddings', '/embeddings', { ...params, encoding_format: 'float' })),
    )
    const base64 = await json<{ data: Array<{ embedding: string }> }>(
      await backend.send(post('embeddings', '/embeddings', { ...params, encoding_format: 'base64' })),
    )
    const encoded = base64.data[0]?.embedding ?? ''
    t.type(encoded, 'string')
    const decoded = decodeFloats(encoded)
    t.equal(decoded.length, dimensions ?? 256, `${dimensions ?? 'default'} dimensions`)
    t.same(decoded, float.data[0]?.embedding, 'float and base64 agree exactly')
    t.ok(Math.abs(norm(decoded) - 1) < 1e-5)
  }
  const unspecified = await json<OpenAI.CreateEmbeddingResponse>(
    await backend.send(post('embeddings', '/embeddings', { model: 'emb', input: 'x' })),
  )
  t.type(unspecified.data[0]?.embedding, Array, 'float when no encoding is named')
})

t.test('embeddings: token-id input, and refusals', async (t) => {
  const ids = await json<OpenAI.CreateEmbeddingResponse>(
    await backend.send(
      post('embeddings', '/embeddings', {
        model: 'emb',
        input: [
          [1, 2, 3],
          [4, 5],
        ],
        encoding_format: 'float',
      }),
    ),
  )
  t.equal(ids.data.length, 2)
  t.equal(ids.usage.prompt_tokens, 5)
  for (const [value, param, code] of [
    [{ model: 'emb' }, 'input', 'missing_required_parameter'],
    [{ model: 'emb', input: '' }, 'input', 'invalid_value'],
    [{ model: 'emb', input: [] }, 'input', 'invalid_value'],
    [{ model: 'emb', input: [{}] }, 'input', 'invalid_value'],
    [{ model: 'emb', input: 'x', dimensions: 0 }, 'dimensions', 'integer_below_min_value'],
    [{ model: 'emb', input: 'x', encoding_format: 'hex' }, 'encoding_format', 'invalid_value'],
  ] as const) {
    const body = await json<OpenAIErrorBody>(await backend.send(post('embeddings', '/embeddings', value)), 400)
    t.same([body.error.param, body.error.code, body.error.type], [param, code, 'invalid_request_error'])
  }
})

interface PngFacts {
  width: number
  height: number
  chunks: string[]
  crcsOk: boolean
  pixels: Buffer
}

/** Reads a PNG strictly: signature, every chunk's CRC, IHDR fields, and the inflated IDAT. */
function readPng(png: Buffer): PngFacts {
  if (!png.subarray(0, 8).equals(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]))) throw new Error('bad signature')
  const chunks: string[] = []
  const idat: Buffer[] = []
  let crcsOk = true
  let width = 0
  let height = 0
  let at = 8
  for (let guard = 0; at < png.length && guard < 100; guard++) {
    const length = png.readUInt32BE(at)
    const type = png.subarray(at + 4, at + 8).toString('latin1')
    const data = png.subarray(at + 8, at + 8 + length)
    if (crc32(png.subarray(at + 4, at + 8 + length)) !== png.readUInt32BE(at + 8 + length)) crcsOk = false
    chunks.push(type)
    if (type === 'IHDR') {
      width = data.readUInt32BE(0)
      height = data.readUInt32BE(4)
      if (data[8] !== 8 || data[9] !== 2 || data[10] !== 0 || data[11] !== 0 || data[12] !== 0)
        throw new Error('unexpected IHDR')
    }
    if (type === 'IDAT') idat.push(data)
    at += 12 + length
  }
  return { width, height, chunks, crcsOk, pixels: inflateSync(Buffer.concat(idat)) }
}

t.test('image generation: n valid 16x16 PNGs, coloured by the prompt', async (t) => {
  const res = await json<OpenAI.ImagesResponse>(
    await backend.send(
      post('images.generations', '/images/generations', { model: 'img', prompt: 'a red square', n: 2 }),
    ),
  )
  t.ok(Number.isInteger(res.created))
  t.equal(res.data?.length, 2)
  const pngs = (res.data ?? []).map((d) => Buffer.from(d.b64_json ?? '', 'base64'))
  for (const png of pngs) {
    const facts = readPng(png)
    t.same(facts.chunks, ['IHDR', 'IDAT', 'IEND'])
    t.ok(facts.crcsOk, 'every CRC checks')
    t.same([facts.width, facts.height], [16, 16])
    t.equal(facts.pixels.length, 16 * (1 + 16 * 3), 'one filter byte and 16 RGB pixels per row')
    t.ok(
      [...Array(16).keys()].every((row) => facts.pixels[row * 49] === 0),
      'filter type 0 on every row',
    )
  }
  t.not(pngs[0]?.toString('base64'), pngs[1]?.toString('base64'), 'the n images differ')
  const again = await json<OpenAI.ImagesResponse>(
    await backend.send(
      post('images.generations', '/images/generations', { model: 'img', prompt: 'a red square', n: 2 }),
    ),
  )
  t.same(again.data, res.data, 'same prompt, same pictures')
  const other = await json<OpenAI.ImagesResponse>(
    await backend.send(post('images.generations', '/images/generations', { model: 'img', prompt: 'a blue circle' })),
  )
  t.not(other.data?.[0]?.b64_json, res.data?.[0]?.b64_json, 'another prompt, another picture')
  t.same(res.usage && [res.usage.input_tokens, res.usage.output_tokens, res.usage.total_tokens], [
    await countTextTokens('a red square'),
    2 * 272,
    (await countTextTokens('a red square')) + 2 * 272,
  ])

  const url = await json<OpenAI.ImagesResponse>(
    await backend.send(
      post('images.generations', '/images/generations', { prompt: 'a red square', response_format: 'url' }),
    ),
  )
  t.match(url.data?.[0]?.url, /^data:image\/png;base64,/)
  t.equal(
    url.data?.[0]?.url?.slice('data:image/png;base64,'.length),
    res.data?.[0]?.b64_json,
    'the same PNG as a data URL',
  )

  for (const [value, param] of [
    [{ model: 'img' }, 'prompt'],
    [{ prompt: 'x', n: 11 }, 'n'],
    [{ prompt: 'x', response_format: 'gif' }, 'response_format'],
  ] as const) {
    const body = await json<OpenAIErrorBody>(
      await backend.send(post('images.generations', '/images/generations', value)),
      400,
    )
    t.equal(body.error.param, param)
  }
})

t.test('image edits: multipart with one or more images', async (t) => {
  const image = Buffer.alloc(300, 1)
  const parts: Part[] = [
    { name: 'model', value: 'img' },
    { name: 'prompt', value: 'make it blue' },
    { name: 'n', value: '2' },
    { name: 'image[]', filename: 'a.png', data: image, contentType: 'image/png' },
    { name: 'image[]', filename: 'b.png', data: Buffer.alloc(10, 2), contentType: 'image/png' },
  ]
  const res = await json<OpenAI.ImagesResponse>(
    await backend.send(request('images.edits', '/images/edits', await multipartBody(parts, t.testdir()))),
  )
  t.equal(res.data?.length, 2)
  for (const d of res.data ?? []) t.ok(readPng(Buffer.from(d.b64_json ?? '', 'base64')).crcsOk)
  t.equal(
    res.usage?.input_tokens,
    (await countTextTokens('make it blue')) + 2 * 85,
    'text tokens plus a flat price per image',
  )

  const noImage = await backend.send(
    request('images.edits', '/images/edits', await multipartBody([{ name: 'prompt', value: 'x' }], t.testdir())),
  )
  t.equal((await json<OpenAIErrorBody>(noImage, 400)).error.param, 'image')
  const json400 = await backend.send(post('images.edits', '/images/edits', { prompt: 'x' }))
  t.equal(json400.status, 400, 'edits want multipart')
  await json(json400, 400)
})

t.test('audio transcription: json, text, verbose_json, srt and vtt', async (t) => {
  const audio = Buffer.alloc(48_000, 7)
  const form = async (extra: Part[] = []): Promise<RequestBody> =>
    multipartBody(
      [
        { name: 'model', value: 'whisper-large-v3' },
        { name: 'file', filename: 'speech.wav', data: audio, contentType: 'audio/wav' },
        ...extra,
      ],
      t.testdir(),
    )
  /** A transcription of the audio, in `format` (the default JSON when none). */
  const transcribe = async (format?: string): Promise<UpstreamResponse> =>
    backend.send(
      request(
        'audio.transcriptions',
        '/audio/transcriptions',
        await form(format === undefined ? [] : [{ name: 'response_format', value: format }]),
      ),
    )

  const res = await transcribe()
  t.equal(res.headers['content-type'], 'application/json')
  const body = await json<OpenAI.Audio.Transcription>(res)
  t.equal(body.text, "This is Tollgate's mock transcription of an audio file of 48000 bytes.")
  const usage = body.usage as OpenAI.Audio.Transcription.Tokens
  t.equal(usage.type, 'tokens')
  t.equal(usage.input_tokens, 30, '3 seconds at 16 kB/s, 10 audio tokens a second')
  t.equal(usage.output_tokens, await countTextTokens(body.text))
  t.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens)

  const again = await json<OpenAI.Audio.Transcription>(await transcribe())
  t.same(again, body, 'deterministic')

  const text = await transcribe('text')
  t.match(text.headers['content-type'], /^text\/plain/)
  t.equal(await readText(text.body), `${body.text}\n`)

  const verbose = await json<OpenAI.Audio.TranscriptionVerbose>(await transcribe('verbose_json'))
  t.equal(verbose.duration, 3)
  t.equal(verbose.language, 'english')
  t.equal(verbose.text, body.text)
  t.equal(verbose.segments?.[0]?.end, 3)

  const srt = await readText((await transcribe('srt')).body)
  t.equal(srt, `1\n00:00:00,000 --> 00:00:03,000\n${body.text}\n\n`)
  const vtt = await readText((await transcribe('vtt')).body)
  t.equal(vtt, `WEBVTT\n\n00:00:00.000 --> 00:00:03.000\n${body.text}\n\n`)

  const bad = await transcribe('mp3')
  t.equal((await json<OpenAIErrorBody>(bad, 400)).error.param, 'response_format')
})

t.test('audio transcription stream: deltas, then done with usage', async (t) => {
  const body = await multipartBody(
    [
      { name: 'model', value: 'gpt-4o-transcribe' },
      { name: 'stream', value: 'true' },
      { name: 'file', filename: 'a.wav', data: Buffer.alloc(16_000, 3) },
    ],
    t.testdir(),
  )
  const res = await backend.send(request('audio.transcriptions', '/audio/transcriptions', body))
  t.match(res.headers['content-type'], /^text\/event-stream/)
  const frames = (await readText(res.body))
    .split('\n\n')
    .filter((f) => f !== '')
    .map((f) => f.slice('data: '.length))
  t.equal(frames.at(-1), '[DONE]')
  const events = frames.slice(0, -1).map((f) => JSON.parse(f) as OpenAI.Audio.TranscriptionStreamEvent)
  const done = events.at(-1) as OpenAI.Audio.TranscriptionTextDoneEvent
  t.equal(done.type, 'transcript.text.done')
  const deltas = events.slice(0, -1) as OpenAI.Audio.TranscriptionTextDeltaEvent[]
  t.ok(deltas.length > 3 && deltas.every((d) => d.type === 'transcript.text.delta'))
  t.equal(deltas.map((d) => d.delta).join(''), done.text)
  t.equal(done.usage?.input_tokens, 10)
})

t.test('audio translation, and refusals without file or model', async (t) => {
  const ok = await backend.send(
    request(
      'audio.translations',
      '/audio/translations',
      await multipartBody(
        [
          { name: 'model', value: 'whisper-large-v3' },
          { name: 'file', filename: 'x.mp3', data: Buffer.alloc(1000, 1) },
        ],
        t.testdir(),
      ),
    ),
  )
  const body = await json<OpenAI.Audio.Translation>(ok)
  t.match(body.text, /mock translation into English of an audio file of 1000 bytes/)

  const noFile = await backend.send(
    request(
      'audio.transcriptions',
      '/audio/transcriptions',
      await multipartBody([{ name: 'model', value: 'whisper-large-v3' }], t.testdir()),
    ),
  )
  t.equal((await json<OpenAIErrorBody>(noFile, 400)).error.param, 'file')
  const noModel = await backend.send({
    ...request(
      'audio.transcriptions',
      '/audio/transcriptions',
      await multipartBody([{ name: 'file', filename: 'x', data: Buffer.alloc(5) }], t.testdir()),
    ),
    model: null,
  })
  t.equal((await json<OpenAIErrorBody>(noModel, 400)).error.param, 'model')
})

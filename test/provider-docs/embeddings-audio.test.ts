// The provider's Embeddings and Audio guides (telekom/aifoundation-docs, src/content/docs/
// v1/guides/embeddings.mdx and guides/audio.mdx), against the gateway `npm start` runs.
// models.test.ts already runs "Available Embedding Models" (each model's dimension), "List
// Audio Models" (curl and Python) and the Python transcription; here are the other tabs.
// Each example is a call written here after the heading named beside it.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { AUDIO, curlForm, curlJson, startDocsGateway } from './docs-gateway.ts'

const { key, base } = await startDocsGateway()
const client = new OpenAI()

t.test('embeddings.mdx, Basic Usage (curl)', async (t) => {
  const res = await curlJson(`${base}/embeddings`, key, {
    model: 'jina-embeddings-v2-base-de',
    input: ['The quick brown fox jumps over the lazy dog', 'Data science is fun!'],
  })
  t.equal(res.status, 200)
  const body = (await res.json()) as {
    object: string
    data: Array<{ object: string; index: number; embedding: number[] }>
    usage: { prompt_tokens: number; total_tokens: number }
  }
  t.equal(body.object, 'list')
  t.same(
    body.data.map((d) => [d.object, d.index]),
    [
      ['embedding', 0],
      ['embedding', 1],
    ],
  )
  t.equal(body.data[0]?.embedding.length, 768, 'floats, 768 of them (curl asks for no base64)')
  t.ok(body.usage.prompt_tokens > 0)
})

t.test(
  'embeddings.mdx, Basic Usage (Python): five texts, "Embedding dimension: 768", "Number of vectors: 5"',
  async (t) => {
    const texts = [
      "I am Batman and I'm rich",
      'I am Spiderman',
      "I am Ironman and I'm a billionaire",
      'I am Flash',
      'I am the president of USA',
    ]
    const embeddings = await client.embeddings.create({ input: texts, model: 'jina-embeddings-v2-base-de' })
    t.equal(embeddings.data[0]?.embedding.length, 768)
    t.equal(embeddings.data.length, 5)
    // "Token usage: Usage(prompt_tokens=41, total_tokens=41)": the count is the tokenizer's; its shape is checked.
    t.ok(embeddings.usage.prompt_tokens > 0)
    t.equal(embeddings.usage.total_tokens, embeddings.usage.prompt_tokens)
  },
)

t.test('embeddings.mdx, Basic Usage (Node.js)', async (t) => {
  const result = await client.embeddings.create({
    model: 'jina-embeddings-v2-base-de',
    input: ['The quick brown fox jumps over the lazy dog', 'Data science is fun!'],
  })
  t.equal(result.data[0]?.embedding.length, 768)
  t.ok(result.usage.total_tokens > 0)
})

t.test('audio.mdx, Audio Transcription (curl): -F model, language, temperature, file', async (t) => {
  const res = await curlForm(
    `${base}/audio/transcriptions`,
    key,
    { model: 'whisper-large-v3', language: 'en', temperature: '0.0' },
    { name: 'audio_file.mp3', data: AUDIO },
  )
  t.equal(res.status, 200)
  const body = (await res.json()) as { text: string }
  t.ok(body.text.length > 0, 'a transcription')
})

t.test('audio.mdx, Audio Transcription (Python): with and without the optional language', async (t) => {
  for (const language of [undefined, 'en']) {
    const transcription = await client.audio.transcriptions.create({
      model: 'whisper-large-v3',
      file: await toFile(AUDIO, 'audio_file.mp3'),
      ...(language === undefined ? {} : { language }),
    })
    t.ok(transcription.text.length > 0, `Transcription: … (language ${language ?? 'auto-detected'})`)
  }
})

t.test('audio.mdx, Audio Translation (Python): temperature 1.0', async (t) => {
  const translation = await client.audio.translations.create({
    model: 'whisper-large-v3',
    file: await toFile(AUDIO, 'audio_file.mp3'),
    temperature: 1.0,
  })
  t.ok(translation.text.length > 0, 'Translation: …')
})

t.test('audio.mdx, Audio Translation (curl)', async (t) => {
  const res = await curlForm(
    `${base}/audio/translations`,
    key,
    { model: 'whisper-large-v3', temperature: '1.0' },
    { name: 'audio_file.mp3', data: AUDIO },
  )
  t.equal(res.status, 200)
  t.ok(((await res.json()) as { text: string }).text.length > 0)
})

t.test('audio.mdx, Parameters: the turbo model too; a file is required', async (t) => {
  const turbo = await client.audio.transcriptions.create({
    model: 'whisper-large-v3-turbo',
    file: await toFile(AUDIO, 'audio_file.wav'),
    temperature: 0,
  })
  t.ok(turbo.text.length > 0)
  const form = new FormData()
  form.append('model', 'whisper-large-v3')
  const res = await fetch(`${base}/audio/transcriptions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  })
  t.equal(res.status, 400)
  t.equal(((await res.json()) as { error: { param: string } }).error.param, 'file')
})

// The provider's Asynchronous Requests guide (telekom/aifoundation-docs, src/content/docs/
// v1/guides/asynchronous-requests.mdx), against the gateway `npm start` runs: the /queue
// twins of the /v2 endpoints, with the SDK's base URL changed from /v2 to /queue and
// nothing else. Each example is a call written here after the heading named beside it.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { AUDIO, curlForm, curlGet, curlJson, PIXEL_PNG, startDocsGateway } from './docs-gateway.ts'

const { gw, key } = await startDocsGateway()
// OpenAI(base_url="https://llm-server.llmhub.t-systems.net/queue"): the key from the environment.
const client = new OpenAI({ baseURL: `${gw.url}/queue` })
const queue = `${gw.url}/queue`
const v2 = `${gw.url}/v2`

t.test('asynchronous-requests.mdx, Basic Usage (curl)', async (t) => {
  const res = await curlJson(`${queue}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Write a detailed analysis of renewable energy trends in Europe.' },
    ],
    max_tokens: 2000,
  })
  t.equal(res.status, 200, 'the answer itself, as /v2 gives it')
  const body = (await res.json()) as OpenAI.ChatCompletion
  t.equal(body.object, 'chat.completion')
  t.ok(body.choices[0]?.message.content?.length)
})

t.test('asynchronous-requests.mdx, Basic Usage (Python and Node.js)', async (t) => {
  const response = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Write a detailed analysis of renewable energy trends in Europe.' },
    ],
    max_tokens: 2000,
  })
  t.ok(response.choices[0]?.message.content?.length)
})

t.test(
  'asynchronous-requests.mdx, Batch Processing Example (Python asyncio.gather and Node.js Promise.all)',
  async (t) => {
    const prompts = [
      'Summarize the benefits of solar energy.',
      'Explain how wind turbines generate electricity.',
      'Describe the future of hydrogen fuel cells.',
    ]
    const results = await Promise.all(
      prompts.map((prompt) =>
        client.chat.completions.create({
          model: 'Llama-3.3-70B-Instruct',
          messages: [{ role: 'user', content: prompt }],
          max_tokens: 500,
        }),
      ),
    )
    t.equal(results.length, 3)
    for (const [i, result] of results.entries())
      t.ok(result.choices[0]?.message.content?.length, `Prompt: ${prompts[i]}`)
  },
)

t.test('asynchronous-requests.mdx, Queue Endpoints for Other APIs: Embeddings', async (t) => {
  const response = await client.embeddings.create({
    model: 'text-embedding-bge-m3',
    input: 'The benefits of renewable energy in Europe',
  })
  t.equal(response.data[0]?.embedding.length, 1024, 'Embedding dimension: 1024')
})

t.test('asynchronous-requests.mdx, Queue Endpoints for Other APIs: Audio Transcription', async (t) => {
  const transcript = await client.audio.transcriptions.create({
    model: 'whisper-large-v3',
    file: await toFile(AUDIO, 'meeting_recording.mp3'),
  })
  t.ok(transcript.text.length > 0)
})

t.test('asynchronous-requests.mdx, Queue Endpoints for Other APIs: Image Generation', async (t) => {
  const result = await client.images.generate({
    model: 'gpt-image-1',
    prompt: 'A futuristic data center powered by renewable energy',
  })
  t.ok((result.data?.[0]?.b64_json ?? '').length > 50, 'print(result.data[0].b64_json[:50] + "...")')
})

t.test(
  'asynchronous-requests.mdx, Endpoint Mapping: every /queue twin takes its /v2 body and answers the same shape',
  async (t) => {
    const chat = { model: 'Llama-3.3-70B-Instruct', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 }
    const json: Array<[string, Record<string, unknown>, string]> = [
      ['/chat/completions', chat, 'chat.completion'],
      ['/completions', { model: 'Llama-3.3-70B-Instruct', prompt: 'Hi', max_tokens: 8 }, 'text_completion'],
      ['/embeddings', { model: 'text-embedding-bge-m3', input: 'Hi' }, 'list'],
    ]
    for (const [path, body, object] of json) {
      for (const prefix of [v2, queue]) {
        const res = await curlJson(`${prefix}${path}`, key, body)
        t.equal(res.status, 200, `POST ${prefix.slice(gw.url.length)}${path}`)
        t.equal(((await res.json()) as { object: string }).object, object)
      }
    }
    const images = { model: 'gpt-image-1', prompt: 'A lighthouse' }
    for (const prefix of [v2, queue]) {
      const res = await curlJson(`${prefix}/images/generations`, key, images)
      t.equal(res.status, 200, `POST ${prefix.slice(gw.url.length)}/images/generations`)
      t.ok(((await res.json()) as { data: Array<{ b64_json: string }> }).data[0]?.b64_json.length)
      for (const path of ['/audio/transcriptions', '/audio/translations']) {
        const audio = await curlForm(
          `${prefix}${path}`,
          key,
          { model: 'whisper-large-v3' },
          { name: 'meeting_recording.mp3', data: AUDIO },
        )
        t.equal(audio.status, 200, `POST ${prefix.slice(gw.url.length)}${path}`)
        t.type(((await audio.json()) as { text: string }).text, 'string')
      }
      const edit = await new OpenAI({ baseURL: prefix }).images.edit({
        model: 'gpt-image-1',
        prompt: 'Add a moon',
        image: await toFile(PIXEL_PNG, 'pixel.png', { type: 'image/png' }),
      })
      t.ok(edit.data?.[0]?.b64_json?.length, `POST ${prefix.slice(gw.url.length)}/images/edits`)
      const models = await curlGet(`${prefix}/models`, key)
      t.equal(models.status, 200, `GET ${prefix.slice(gw.url.length)}/models`)
      t.equal(((await models.json()) as { data: unknown[] }).data.length, 40)
    }
  },
)

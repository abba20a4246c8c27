// The provider's Streaming guide (telekom/aifoundation-docs, src/content/docs/v1/guides/
// streaming.mdx), against the gateway `npm start` runs. "Streaming with Function Calling"
// is in function-calling.test.ts. Each example is a call written here after the heading
// named beside it; Python goes to the JS SDK call for call.
import OpenAI, { APIConnectionError, APIError } from 'openai'
import t from 'tap'
import { curlJson, startDocsGateway } from './docs-gateway.ts'

const { gw, key, base } = await startDocsGateway()
const client = new OpenAI()

t.test(
  'streaming.mdx, Basic Streaming (curl): data: lines, a role delta first, content deltas, data: [DONE]',
  async (t) => {
    const res = await curlJson(`${base}/chat/completions`, key, {
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'Explain quantum computing' }],
      stream: true,
    })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/event-stream/)
    const events = (await res.text()).split('\n\n').filter((e) => e.length > 0)
    t.ok(
      events.every((e) => e.startsWith('data: ')),
      'every event a data: line',
    )
    t.equal(events.at(-1), 'data: [DONE]')
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)) as OpenAI.ChatCompletionChunk)
    t.ok(
      chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]?.id),
      'one id, chunk objects',
    )
    t.equal(chunks[0]?.choices[0]?.delta.role, 'assistant', 'the first delta names the role')
    t.ok(
      chunks.some((c) => (c.choices[0]?.delta.content ?? '').length > 0),
      'content deltas',
    )
    t.equal(chunks[0]?.choices[0]?.index, 0)
  },
)

t.test('streaming.mdx, Basic Streaming (Python and Node.js): print each content delta', async (t) => {
  const stream = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Explain quantum computing' }],
    stream: true,
  })
  let written = ''
  let deltas = 0
  for await (const chunk of stream) {
    const content = chunk.choices[0]?.delta?.content
    if (content) {
      written += content
      deltas++
    }
  }
  t.ok(deltas > 1 && written.length > 0, `${deltas} content deltas`)
})

t.test('streaming.mdx, Collecting the Full Response (Python and Node.js)', async (t) => {
  const stream = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'List 5 EU countries' }],
    stream: true,
  })
  const chunks: string[] = []
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) continue
    const content = chunk.choices[0]?.delta.content
    if (content) chunks.push(content)
  }
  const completeText = chunks.join('')
  // The streamed text is the answer the same call gives without streaming.
  const whole = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'List 5 EU countries' }],
  })
  t.equal(completeText, whole.choices[0]?.message.content, `Total length: ${completeText.length} characters`)
})

/** The page's stream_with_retry, with its two except clauses; `create` may be swapped for a failing one. */
async function streamWithRetry(
  messages: OpenAI.ChatCompletionMessageParam[],
  api: OpenAI,
  log: string[],
  maxRetries = 3,
): Promise<string> {
  for (let attempt = 0; attempt < maxRetries; attempt++) {
    try {
      const stream = await api.chat.completions.create({ model: 'Llama-3.3-70B-Instruct', messages, stream: true })
      const fullResponse: string[] = []
      for await (const chunk of stream) {
        if (chunk.choices.length === 0) continue
        const content = chunk.choices[0]?.delta.content
        if (content) fullResponse.push(content)
      }
      return fullResponse.join('')
    } catch (e) {
      if (e instanceof APIConnectionError) log.push(`Connection lost. Retry ${attempt + 1}/${maxRetries}...`)
      else if (e instanceof APIError) log.push(`API error: ${e.message}. Retry ${attempt + 1}/${maxRetries}...`)
      else throw e
    }
  }
  throw new Error('Max retries exceeded')
}

t.test(
  'streaming.mdx, Error Handling: stream_with_retry returns the text, and retries on APIError and APIConnectionError',
  async (t) => {
    const log: string[] = []
    const text = await streamWithRetry([{ role: 'user', content: 'Hello' }], client, log)
    t.ok(text.length > 0)
    t.same(log, [], 'no retry needed')
    // A revoked-looking key: every attempt is an APIError (401), three retries, then the page's exception.
    const refused: string[] = []
    const wrongKey = new OpenAI({ apiKey: 'tg1_not-a-key', baseURL: base, maxRetries: 0 })
    await t.rejects(streamWithRetry([{ role: 'user', content: 'Hello' }], wrongKey, refused), /Max retries exceeded/)
    t.equal(refused.length, 3)
    t.match(refused[0], /^API error: 401 /)
    // A gateway that is not there: APIConnectionError.
    const gone: string[] = []
    const nowhere = new OpenAI({ apiKey: key, baseURL: 'http://127.0.0.1:9/v2', maxRetries: 0 })
    await t.rejects(streamWithRetry([{ role: 'user', content: 'Hello' }], nowhere, gone), /Max retries exceeded/)
    t.match(gone, ['Connection lost. Retry 1/3...', 'Connection lost. Retry 2/3...', 'Connection lost. Retry 3/3...'])
    t.ok(gw.child.exitCode === null, 'the gateway is still up')
  },
)

t.test('streaming.mdx, Stream Options: include_usage gives a last chunk with usage and no choices', async (t) => {
  const stream = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Hello!' }],
    stream: true,
    stream_options: { include_usage: true },
  })
  let usage: OpenAI.CompletionUsage | undefined
  let text = ''
  let afterUsage = 0
  for await (const chunk of stream) {
    if (usage !== undefined) afterUsage++
    if (chunk.usage) usage = chunk.usage
    else if (chunk.choices.length > 0 && chunk.choices[0]?.delta.content) text += chunk.choices[0].delta.content
  }
  t.equal(afterUsage, 0, 'usage comes last')
  t.ok(usage !== undefined && usage.prompt_tokens > 0 && usage.completion_tokens > 0)
  t.equal(usage?.total_tokens, (usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0))
  t.ok(text.length > 0)
})

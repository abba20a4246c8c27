// The official @anthropic-ai/sdk, with only its baseURL and key changed, against a running
// Tollgate on its default configuration (the built-in mock, an OpenAI-compatible backend):
// Anthropic's Messages API in, the chat corridor inside, Anthropic's replies, events and
// errors out, and the key's limits and metering as for any other call.
import Anthropic from '@anthropic-ai/sdk'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'claude-sonnet-4.5'

const gw = await startTollgate()
t.teardown(() => gw.stop())

const client = (key: string, how: 'x-api-key' | 'bearer' = 'x-api-key'): Anthropic =>
  new Anthropic({
    baseURL: gw.url,
    maxRetries: 0,
    ...(how === 'x-api-key' ? { apiKey: key, authToken: null } : { apiKey: null, authToken: key }),
  })

const { key } = await gw.createKey({ tier: 'Standard4000', name: 'anthropic' })
const sdk = client(key)

const WEATHER: Anthropic.Tool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}

t.test('a plain message: Anthropic reply, request-id, the key limits as anthropic-ratelimit-*', async (t) => {
  const { data, response } = await sdk.messages
    .create({
      model: MODEL,
      max_tokens: 1024,
      system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi.' },
        { role: 'user', content: [{ type: 'text', text: 'Say something.' }] },
      ],
      stop_sequences: ['\n\n\n'],
      metadata: { user_id: 'u-1' },
      // Sampling parameters left the SDK's types (newer models fix them); older clients still send them.
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
    } as Anthropic.MessageCreateParamsNonStreaming)
    .withResponse()
  t.equal(data.type, 'message')
  t.equal(data.role, 'assistant')
  t.equal(data.model, MODEL, 'the public model name')
  // The mock writes up to the limit it is given (finish_reason "length"), and a message always has one.
  t.equal(data.stop_reason, 'max_tokens')
  t.equal(data.content[0]?.type, 'text')
  t.ok(data.content[0]?.type === 'text' && data.content[0].text.length > 0, 'some text')
  t.ok(data.usage.input_tokens > 0 && data.usage.output_tokens > 0, 'usage from the upstream')
  t.equal(response.headers.get('request-id'), response.headers.get('x-request-id'))
  t.ok(response.headers.get('anthropic-ratelimit-requests-limit'), 'requests limit')
  t.equal(
    response.headers.get('anthropic-ratelimit-requests-remaining'),
    response.headers.get('x-ratelimit-remaining-requests'),
  )
  t.match(response.headers.get('anthropic-ratelimit-requests-reset') ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
})

t.test('authentication by Authorization: Bearer too (Claude Code with ANTHROPIC_AUTH_TOKEN)', async (t) => {
  const reply = await client(key, 'bearer').messages.create({
    model: MODEL,
    max_tokens: 2,
    messages: [{ role: 'user', content: 'hi' }],
  })
  t.equal(reply.type, 'message')
  t.equal(reply.stop_reason, 'max_tokens', 'cut at max_tokens: finish_reason length')
  t.equal(reply.usage.output_tokens, 2)
})

t.test('a stream: the event sequence, and the final message it adds up to', async (t) => {
  const stream = sdk.messages.stream({
    model: MODEL,
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
  })
  const types: string[] = []
  let text = ''
  for await (const event of stream) {
    types.push(event.type)
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text
  }
  const final = await stream.finalMessage()
  t.equal(types[0], 'message_start')
  t.equal(types[1], 'content_block_start')
  t.equal(types.at(-1), 'message_stop')
  t.equal(types.at(-2), 'message_delta')
  t.equal(types.at(-3), 'content_block_stop')
  t.ok(
    types.slice(2, -3).every((type) => type === 'content_block_delta'),
    'deltas between the block start and stop',
  )
  t.ok(types.filter((type) => type === 'content_block_delta').length > 1, 'more than one delta: streamed')
  t.equal(final.content[0]?.type === 'text' ? final.content[0].text : null, text)
  t.equal(final.stop_reason, 'max_tokens')
  t.ok(final.usage.input_tokens > 0, 'input tokens arrive with message_delta')
  t.ok(final.usage.output_tokens > 0)
})

t.test('a raw stream: Anthropic frames with event names, a ping after message_start', async (t) => {
  const res = await fetch(`${gw.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type') ?? '', /^text\/event-stream/)
  const body = await res.text()
  const events = [...body.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].map((m) => ({
    event: m[1],
    data: JSON.parse(m[2] ?? '{}') as { type: string },
  }))
  t.same(
    events.slice(0, 2).map((e) => e.event),
    ['message_start', 'ping'],
  )
  t.ok(
    events.every((e) => e.event === e.data.type),
    'each frame names its type twice, as Anthropic sends it',
  )
  t.notMatch(body, /chat\.completion|\[DONE\]/, 'nothing of the chat stream leaks')
})

t.test('tools: a tool_use, its tool_result, and the answer; streamed arguments as input_json_delta', async (t) => {
  const question: Anthropic.MessageParam = { role: 'user', content: 'What is the weather in Paris? Use get_weather.' }
  const first = await sdk.messages.create({
    model: MODEL,
    max_tokens: 128,
    tools: [WEATHER],
    tool_choice: { type: 'any' },
    messages: [question],
  })
  t.equal(first.stop_reason, 'tool_use')
  const use = first.content.find((b) => b.type === 'tool_use')
  if (use?.type !== 'tool_use') throw new Error('no tool_use block')
  t.equal(use.name, 'get_weather')
  t.type(use.input, 'object')
  t.ok(use.id.length > 0)

  const second = await sdk.messages.create({
    model: MODEL,
    max_tokens: 1024,
    tools: [WEATHER],
    messages: [
      question,
      { role: 'assistant', content: first.content as Anthropic.ContentBlockParam[] },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: '21 °C, sunny' }] }],
      },
    ],
  })
  t.not(second.stop_reason, 'tool_use', 'after the tool result the model answers')
  t.equal(second.content[0]?.type, 'text')

  const stream = sdk.messages.stream({
    model: MODEL,
    max_tokens: 128,
    tools: [WEATHER],
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [question],
  })
  let partial = ''
  for await (const event of stream) {
    if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta')
      partial += event.delta.partial_json
  }
  const final = await stream.finalMessage()
  const streamed = final.content.find((b) => b.type === 'tool_use')
  t.equal(final.stop_reason, 'tool_use')
  t.equal(streamed?.type === 'tool_use' ? streamed.name : null, 'get_weather')
  t.same(streamed?.type === 'tool_use' ? streamed.input : null, JSON.parse(partial), 'the input is the streamed JSON')
})

t.test('extended thinking: a signed thinking block first, plain and streamed, its tokens output tokens', async (t) => {
  const ask: Anthropic.MessageCreateParamsNonStreaming = {
    model: MODEL,
    max_tokens: 1100,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: 'Think, then answer.' }],
  }
  const plain = await sdk.messages.create(ask)
  const [thought, answer] = plain.content
  if (thought?.type !== 'thinking') throw new Error(`no thinking block first: ${JSON.stringify(plain.content)}`)
  t.ok(thought.thinking.length > 0 && thought.signature.length > 0, 'a thought and its signature')
  t.equal(answer?.type, 'text', 'then the answer')
  t.equal(plain.usage.output_tokens, 1100, 'thought and answer together fill max_tokens, as Anthropic counts them')
  t.equal(plain.stop_reason, 'max_tokens')

  const stream = sdk.messages.stream({ ...ask, max_tokens: 1030 })
  const deltas: string[] = []
  let thinking = ''
  let signature = ''
  for await (const event of stream) {
    if (event.type !== 'content_block_delta') continue
    deltas.push(event.delta.type)
    if (event.delta.type === 'thinking_delta') thinking += event.delta.thinking
    if (event.delta.type === 'signature_delta') signature += event.delta.signature
  }
  const final = await stream.finalMessage()
  t.ok(deltas.indexOf('thinking_delta') === 0, 'the thought streams first')
  t.ok(deltas.lastIndexOf('thinking_delta') < deltas.indexOf('signature_delta'), 'then its signature')
  t.ok(deltas.indexOf('signature_delta') < deltas.indexOf('text_delta'), 'then the answer')
  t.same(final.content[0], { type: 'thinking', thinking, signature }, 'the streamed block is whole')
  t.same(final.content[0], thought, 'and the same as the plain reply to the same prompt')
  t.equal(final.usage.output_tokens, 1030)
})

t.test(
  'thinking across a tool round trip: blocks sent back are checked, a forged or dropped one refused',
  async (t) => {
    const question: Anthropic.MessageParam = { role: 'user', content: 'Weather in Oslo? Use get_weather.' }
    const base = {
      model: MODEL,
      max_tokens: 2048,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      tools: [WEATHER],
    }
    const first = await sdk.messages.create({
      ...base,
      messages: [question],
    } as Anthropic.MessageCreateParamsNonStreaming)
    t.same(
      first.content.map((b) => b.type),
      ['thinking', 'tool_use'],
    )
    t.equal(first.stop_reason, 'tool_use')
    const use = first.content[1]
    if (use?.type !== 'tool_use') throw new Error('no tool_use block')
    const turn = (content: unknown[]): Anthropic.MessageParam[] => [
      question,
      { role: 'assistant', content: content as Anthropic.ContentBlockParam[] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '3 °C, snow' }] },
    ]
    const second = await sdk.messages.create({
      ...base,
      messages: turn(first.content),
    } as Anthropic.MessageCreateParamsNonStreaming)
    t.equal(second.content[0]?.type, 'thinking', 'thinks again')
    t.equal(second.content[1]?.type, 'text', 'and answers')

    const refusal = async (content: unknown[]): Promise<string> => {
      const error = await sdk.messages
        .create({ ...base, messages: turn(content) } as Anthropic.MessageCreateParamsNonStreaming)
        .catch((err: unknown) => err)
      t.ok(error instanceof Anthropic.BadRequestError, 'BadRequestError')
      return error instanceof Anthropic.APIError ? error.message : ''
    }
    const thought = first.content[0] as Anthropic.ThinkingBlock
    t.match(await refusal([{ ...thought, thinking: `${thought.thinking} (edited)` }, use]), /Invalid `signature`/)
    t.match(await refusal([{ ...thought, signature: 'forged' }, use]), /Invalid `signature`/)
    t.match(await refusal([use]), /must start with a thinking block/, 'the thought dropped from a tool-using turn')
  },
)

t.test('thinking is metered exactly: the key is charged what the message reported', async (t) => {
  const created = await gw.createKey({ tier: 'Standard4000', name: 'thinking-metered' })
  const metered = client(created.key, 'bearer')
  const body = {
    model: MODEL,
    max_tokens: 1500,
    thinking: { type: 'enabled' as const, budget_tokens: 1024 },
    messages: [{ role: 'user' as const, content: 'Metered thought.' }],
  }
  const plain = await metered.messages.create(body)
  const streamed = await metered.messages.stream(body).finalMessage()
  const totals = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${created.id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      return ((await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } })
        .totals
    },
    (totals) => totals.requests >= 2,
  )
  t.same(
    { requests: totals.value.requests, input: totals.value.input_tokens, output: totals.value.output_tokens },
    {
      requests: 2,
      input: plain.usage.input_tokens + streamed.usage.input_tokens,
      output: plain.usage.output_tokens + streamed.usage.output_tokens,
    },
  )
  t.equal(plain.usage.output_tokens, 1500)
})

t.test('an image, base64 and by URL', async (t) => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
  const reply = await sdk.messages.create({
    model: MODEL,
    max_tokens: 16,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
          { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
          { type: 'text', text: 'What is in these?' },
        ],
      },
    ],
  })
  t.equal(reply.type, 'message')
})

t.test('a bad key: 401, AuthenticationError, authentication_error', async (t) => {
  const error = await client('tg-not-a-real-key')
    .messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
    .catch((err: unknown) => err)
  t.ok(error instanceof Anthropic.AuthenticationError, 'AuthenticationError')
  if (!(error instanceof Anthropic.APIError)) return
  t.equal(error.status, 401)
  t.equal(error.type, 'authentication_error')
  t.ok(error.requestID, 'the request id, read from request-id')
  t.same(Object.keys(error.error as object).sort(), ['error', 'request_id', 'type'], "Anthropic's shape, no more")
})

t.test("a key's scopes hold: without chat.completions, or for another model, 403 PermissionDeniedError", async (t) => {
  const embeddingsOnly = client((await gw.createKey({ endpoints: ['embeddings'] })).key)
  const otherModel = client((await gw.createKey({ models: ['gpt-oss-120b'] })).key)
  for (const [who, c] of [
    ['no chat.completions scope', embeddingsOnly],
    ['another model only', otherModel],
  ] as const) {
    const error = await c.messages
      .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .catch((err: unknown) => err)
    t.ok(error instanceof Anthropic.PermissionDeniedError, `${who}: PermissionDeniedError`)
    t.equal(error instanceof Anthropic.APIError ? error.type : null, 'permission_error')
  }
  const counted = await otherModel.messages
    .countTokens({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
    .catch((err: unknown) => err)
  t.ok(counted instanceof Anthropic.PermissionDeniedError, 'count_tokens too')
})

t.test('missing max_tokens: 400, BadRequestError, invalid_request_error naming it', async (t) => {
  const error = await sdk.messages
    .create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    } as unknown as Anthropic.MessageCreateParamsNonStreaming)
    .catch((err: unknown) => err)
  t.ok(error instanceof Anthropic.BadRequestError, 'BadRequestError')
  if (!(error instanceof Anthropic.APIError)) return
  t.equal(error.type, 'invalid_request_error')
  t.match(error.message, /max_tokens/)
})

t.test('what the mock cannot be asked for is refused by name, not dropped', async (t) => {
  const refused = async (body: Record<string, unknown>): Promise<string> => {
    const error = await sdk.messages
      .create({
        model: MODEL,
        max_tokens: 2048,
        messages: [{ role: 'user', content: 'hi' }],
        ...body,
      } as Anthropic.MessageCreateParamsNonStreaming)
      .catch((err: unknown) => err)
    t.ok(error instanceof Anthropic.BadRequestError, 'BadRequestError')
    return error instanceof Anthropic.APIError ? error.message : ''
  }
  t.match(
    await refused({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
            { type: 'text', text: 'Summarise' },
          ],
        },
      ],
    }),
    /messages\.0\.content\.0 \(a 'document' block\)/,
  )
  t.match(await refused({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }), /web_search_20250305/)
})

t.test('count_tokens: the prompt tokens, more for a longer prompt', async (t) => {
  const short = await sdk.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
  const long = await sdk.messages.countTokens({
    model: MODEL,
    system: 'You are a careful assistant.',
    tools: [WEATHER],
    messages: [{ role: 'user', content: 'hi '.repeat(200) }],
  })
  t.ok(short.input_tokens > 0)
  t.ok(long.input_tokens > short.input_tokens + 150, `${long.input_tokens} > ${short.input_tokens} + 150`)
})

t.test("the key's rpm: 429, RateLimitError with retry-after and anthropic-ratelimit-*", async (t) => {
  const tight = client((await gw.createKey({ tier: 'Standard4000', limits: { '*': { rpm: 1 } } })).key)
  await tight.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'one' }] })
  const error = await tight.messages
    .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'two' }] })
    .catch((err: unknown) => err)
  t.ok(error instanceof Anthropic.RateLimitError, 'RateLimitError')
  if (!(error instanceof Anthropic.APIError)) return
  t.equal(error.type, 'rate_limit_error')
  t.ok(Number(error.headers?.get('retry-after')) > 0, 'retry-after')
  t.equal(error.headers?.get('anthropic-ratelimit-requests-limit'), '1')
  t.equal(error.headers?.get('anthropic-ratelimit-requests-remaining'), '0')
})

t.test('usage is metered to the key exactly as the upstream reported it', async (t) => {
  const created = await gw.createKey({ tier: 'Standard4000', name: 'metered' })
  const metered = client(created.key)
  const plain = await metered.messages.create({
    model: MODEL,
    max_tokens: 32,
    messages: [{ role: 'user', content: 'Count this.' }],
  })
  const stream = metered.messages.stream({
    model: MODEL,
    max_tokens: 32,
    messages: [{ role: 'user', content: 'And this, streamed.' }],
  })
  const streamed = await stream.finalMessage()
  const input = plain.usage.input_tokens + streamed.usage.input_tokens
  const output = plain.usage.output_tokens + streamed.usage.output_tokens
  const totals = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${created.id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      const body = (await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } }
      return body.totals
    },
    (totals) => totals.requests >= 2,
  )
  t.same(
    { requests: totals.value.requests, input: totals.value.input_tokens, output: totals.value.output_tokens },
    { requests: 2, input, output },
  )
})

t.test('the access log names the route and the error entry', async (t) => {
  const lines = gw.logs().filter((l) => l.msg === 'request' && l.route === 'anthropic.messages')
  t.ok(lines.length > 0, 'anthropic.messages lines')
  t.ok(
    lines.some((l) => l.error === 'untranslatable_feature'),
    'a refusal is logged under its entry',
  )
})

t.test(
  "models: the SDK's list and retrieve in Anthropic's shape; without anthropic-version, the 404 naming /v2",
  async (t) => {
    const seen: string[] = []
    for await (const model of sdk.models.list({ limit: 5 })) seen.push(model.id)
    t.ok(seen.includes(MODEL), `the catalogue's Claude is listed (${seen.length} models, paged by 5)`)
    t.equal(new Set(seen).size, seen.length, 'each once across the pages')
    const info = await sdk.models.retrieve(MODEL)
    t.match(info, { type: 'model', id: MODEL, display_name: String })
    t.ok(!Number.isNaN(Date.parse(info.created_at)), 'created_at is a date')
    const page = await sdk.models.list({ limit: 2 })
    t.equal(page.data.length, 2)
    t.equal(page.has_more, true)
    t.equal(page.first_id, page.data[0]?.id)
    const missing = await sdk.models.retrieve('no-such-model').catch((e: unknown) => e)
    t.ok(missing instanceof Anthropic.NotFoundError, "an unknown model is Anthropic's 404")
    const bad = await fetch(`${gw.url}/v1/models?limit=0`, {
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    })
    t.equal(bad.status, 400)
    t.match(await bad.json(), { type: 'error', error: { type: 'invalid_request_error' } })
    const openai = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
    t.equal(openai.status, 404, 'without the header, an OpenAI SDK on /v1 is pointed at /v2')
    t.match(await openai.json(), { error: { code: 'unknown_url', message: /GET \/v2\/models/ } })
    const unauthorized = await fetch(`${gw.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } })
    t.equal(unauthorized.status, 401)
    t.match(await unauthorized.json(), { type: 'error', error: { type: 'authentication_error' } })
  },
)

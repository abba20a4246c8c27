// A running gateway whose Claude models are deployed on an `anthropic` backend, pointed at
// the fake of Anthropic's Messages API (test/helpers/fake-anthropic.ts): the openai SDK
// (chat, stream, a tool round trip, an image) and the @anthropic-ai/sdk through /v1/messages
// both reach it, what it is sent is a Messages request, the usage is metered exactly as
// it reported (its cache tokens included), its errors become the gateway's answers, and
// capacity learns its anthropic-ratelimit-* headers.
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { FAKE_THINKING, startFakeAnthropic } from '../helpers/fake-anthropic.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'claude-sonnet-4.5'
const UPSTREAM = 'claude-sonnet-4-5-20250929'
/** Models whose deployments are refused (429, 529) in their own tests: each cools down alone. */
const LIMITED = { model: 'claude-sonnet-4', upstream: 'claude-sonnet-4-20250514' }
const OVERLOADED = { model: 'claude-3-7-sonnet', upstream: 'claude-3-7-sonnet-20250219' }

const fake = await startFakeAnthropic()
t.teardown(() => fake.close())
const usage = fake.options.usage
const PROMPT = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens

const gw = await startTollgate({
  env: { CLAUDE_UPSTREAM_KEY: fake.options.apiKey },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      claude: { type: 'anthropic', baseUrl: fake.url, apiKeyEnv: 'CLAUDE_UPSTREAM_KEY' },
    }
    const upstreams: Record<string, string> = {
      [MODEL]: UPSTREAM,
      [LIMITED.model]: LIMITED.upstream,
      [OVERLOADED.model]: OVERLOADED.upstream,
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>) {
      const upstream = upstreams[model.name]
      if (upstream !== undefined) model.deployments = [{ backend: 'claude', model: upstream }]
    }
  },
})
t.teardown(() => gw.stop())

const admin = { authorization: `Bearer ${gw.adminToken}` }
async function newKey(): Promise<{ key: string; id: string; openai: OpenAI; anthropic: Anthropic }> {
  const created = await gw.createKey({ tier: 'Standard4000' })
  return {
    ...created,
    openai: new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: created.key, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: gw.url, apiKey: created.key, maxRetries: 0 }),
  }
}
/** The key's metered totals, once `requests` calls are in. */
async function metered(id: string, requests: number): Promise<{ input_tokens: number; output_tokens: number }> {
  const polled = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: admin })
      return ((await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } })
        .totals
    },
    (totals) => totals.requests >= requests,
  )
  return polled.value
}
const WEATHER_PARAMETERS = { type: 'object', properties: { city: { type: 'string' } } }
const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city', parameters: WEATHER_PARAMETERS },
  },
]

t.test('openai SDK, chat: a Messages request upstream, the reply and exact usage back', async (t) => {
  const { id, openai } = await newKey()
  const before = fake.requests.length
  const reply = await openai.chat.completions.create({
    model: MODEL,
    max_tokens: 100,
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ],
    stop: ['END'],
    temperature: 0.2,
  })
  t.equal(reply.choices[0]?.message.content, fake.options.replyText)
  t.equal(reply.choices[0]?.finish_reason, 'stop', 'end_turn → stop')
  t.match(reply.usage, {
    prompt_tokens: PROMPT,
    completion_tokens: usage.output_tokens,
    total_tokens: PROMPT + usage.output_tokens,
    prompt_tokens_details: { cached_tokens: usage.cache_read_input_tokens },
  })
  const sent = fake.requests.slice(before)
  t.equal(sent.length, 1)
  t.same(sent[0]?.json, {
    model: UPSTREAM,
    max_tokens: 100,
    temperature: 0.2,
    stop_sequences: ['END'],
    system: 'Be brief.',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
  })
  t.equal(sent[0]?.headers['x-api-key'], fake.options.apiKey, "the backend's own key")
  t.equal(sent[0]?.headers['anthropic-version'], '2023-06-01', 'the configured version')
  t.notOk(sent[0]?.headers.authorization, "the caller's key is not sent")
  t.match(await metered(id, 1), { requests: 1, input_tokens: PROMPT, output_tokens: usage.output_tokens })
})

t.test('openai SDK, stream: chunks as they come, the usage from message_start and message_delta', async (t) => {
  const { id, openai } = await newKey()
  const stream = await openai.chat.completions.create({
    model: MODEL,
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Hi' }],
    stream: true,
    stream_options: { include_usage: true },
  })
  let text = ''
  let finish: string | null | undefined
  let last: OpenAI.CompletionUsage | null | undefined
  let chunks = 0
  for await (const chunk of stream) {
    chunks += 1
    text += chunk.choices[0]?.delta.content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
    if (chunk.usage) last = chunk.usage
  }
  t.equal(text, fake.options.replyText)
  t.ok(chunks > 3, 'one chunk per text_delta')
  t.equal(finish, 'stop')
  t.match(last, { prompt_tokens: PROMPT, completion_tokens: usage.output_tokens })
  t.match(await metered(id, 1), { input_tokens: PROMPT, output_tokens: usage.output_tokens })
})

t.test('openai SDK, tools: streamed tool arguments, then the round trip as tool_use / tool_result', async (t) => {
  const { openai } = await newKey()
  const stream = openai.chat.completions.stream({
    model: MODEL,
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools,
    tool_choice: 'required',
    parallel_tool_calls: false,
  })
  const first = await stream.finalChatCompletion()
  const choice = first.choices[0]
  t.equal(choice?.finish_reason, 'tool_calls', 'tool_use → tool_calls')
  const call = choice?.message.tool_calls?.[0]
  t.ok(call?.id.startsWith('toolu_'))
  t.same(call?.type === 'function' ? JSON.parse(call.function.arguments) : null, fake.options.toolInput)
  const asked = fake.requests.at(-1)?.json
  t.match(asked, {
    tools: [{ name: 'get_weather', description: 'The weather in a city', input_schema: WEATHER_PARAMETERS }],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    stream: true,
  })
  if (call === undefined || choice === undefined) return
  const before = fake.requests.length
  const second = await openai.chat.completions.create({
    model: MODEL,
    max_tokens: 100,
    tools,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      choice.message,
      { role: 'tool', tool_call_id: call.id, content: 'sunny' },
    ],
  })
  t.equal(second.choices[0]?.message.content, fake.options.replyText)
  t.same(fake.requests[before]?.json.messages, [
    { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: call.id, name: 'get_weather', input: fake.options.toolInput }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
  ])
})

t.test('openai SDK, an image: a data URL goes as a base64 image block, a URL as a url block', async (t) => {
  const { openai } = await newKey()
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
  const before = fake.requests.length
  await openai.chat.completions.create({
    model: MODEL,
    max_tokens: 20,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
        ],
      },
    ],
  })
  t.same(fake.requests[before]?.json.messages, [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is this?' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ],
    },
  ])
})

t.test('openai SDK, structured output: a json_schema response_format goes as output_config.format', async (t) => {
  const { openai } = await newKey()
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }
  const before = fake.requests.length
  await openai.chat.completions.create({
    model: MODEL,
    max_tokens: 20,
    messages: [{ role: 'user', content: 'JSON please' }],
    response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
  })
  t.same(fake.requests[before]?.json.output_config, { format: { type: 'json_schema', schema } })
})

t.test('openai SDK: what the Messages API cannot do is refused with a 400 naming it', async (t) => {
  const { openai } = await newKey()
  const before = fake.requests.length
  const err = await openai.chat.completions
    .create({ model: MODEL, max_tokens: 20, n: 2, messages: [{ role: 'user', content: 'Hi' }] })
    .catch((e: unknown) => e)
  t.ok(err instanceof OpenAI.BadRequestError)
  t.match(err instanceof OpenAI.APIError ? err.message : '', /\bn\b.*not supported/)
  t.equal(fake.requests.length, before, 'nothing was sent upstream')
})

t.test(
  '@anthropic-ai/sdk through /v1/messages onto the anthropic upstream: its headers passed on, usage in four parts',
  async (t) => {
    const { id, anthropic } = await newKey()
    const before = fake.requests.length
    const reply = await anthropic.messages.create(
      { model: MODEL, max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] },
      { headers: { 'anthropic-beta': 'prompt-caching-2024-07-31' } },
    )
    t.match(reply.content, [{ type: 'text', text: fake.options.replyText }])
    t.equal(reply.stop_reason, 'end_turn')
    t.match(reply.usage, usage, 'input, cache creation, cache read and output as the upstream reported them')
    const sent = fake.requests[before]
    t.equal(sent?.headers['anthropic-beta'], 'prompt-caching-2024-07-31', 'anthropic-beta passed on')
    t.not(sent?.headers['anthropic-version'], '2023-06-01', "the caller's own anthropic-version passed on")
    t.equal(sent?.headers['x-api-key'], fake.options.apiKey)

    const stream = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 64,
      tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      messages: [{ role: 'user', content: 'Weather?' }],
    })
    const final = await stream.finalMessage()
    t.equal(final.stop_reason, 'tool_use')
    t.match(final.content, [{ type: 'tool_use', name: 'get_weather', input: fake.options.toolInput }])
    t.match(final.usage, usage, 'the stream ends with the same four parts')
    t.match(await metered(id, 2), {
      requests: 2,
      input_tokens: 2 * PROMPT,
      output_tokens: 2 * usage.output_tokens,
    })
  },
)

t.test(
  '@anthropic-ai/sdk: extended thinking onto the anthropic upstream, its signed blocks kept through a tool round trip',
  async (t) => {
    const { anthropic } = await newKey()
    const thinking = { type: 'enabled' as const, budget_tokens: 1024 }
    const weather: Anthropic.Tool[] = [
      { name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    ]
    const ask = [{ role: 'user' as const, content: 'Weather?' }]
    const before = fake.requests.length
    const final = await anthropic.messages
      .stream({ model: MODEL, max_tokens: 2048, thinking, tools: weather, messages: ask })
      .finalMessage()
    t.match(fake.requests[before]?.json.thinking, thinking, 'thinking sent upstream as asked')
    const [first, call] = final.content
    t.match(first, { type: 'thinking', thinking: FAKE_THINKING, signature: /^[\w+/=]{20,}$/ }, 'streamed, signed')
    t.equal(call?.type, 'tool_use')
    if (call?.type !== 'tool_use') return
    const reply = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 2048,
      thinking,
      tools: weather,
      messages: [
        ...ask,
        { role: 'assistant', content: final.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
      ],
    })
    t.match(
      reply.content,
      [
        { type: 'thinking', thinking: FAKE_THINKING },
        { type: 'text', text: fake.options.replyText },
      ],
      'the fake took the blocks back (it refuses a changed signature or a turn without its thinking)',
    )
    const refused = await anthropic.messages
      .create({ model: 'claude-sonnet-4', max_tokens: 2048, thinking, messages: ask })
      .catch((e: unknown) => e)
    t.notOk(refused instanceof Anthropic.APIError, 'every deployment on anthropic: carried on that model too')
  },
)

t.test(
  "Claude Code's effort, adaptive thinking and context_management reach the anthropic upstream as it sent them",
  async (t) => {
    const { anthropic, openai } = await newKey()
    const context = { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] }
    const before = fake.requests.length
    await anthropic.messages.create({
      model: MODEL,
      max_tokens: 2048,
      thinking: { type: 'adaptive' },
      output_config: { effort: 'low' },
      context_management: context,
      messages: [{ role: 'user', content: 'Hi' }],
    } as Anthropic.MessageCreateParamsNonStreaming)
    const sent = fake.requests[before]?.json
    t.same(sent?.output_config, { effort: 'low' }, 'output_config.effort, not a thinking budget')
    t.same(sent?.thinking, { type: 'adaptive' })
    t.same(sent?.context_management, context, 'context_management untouched')
    t.notOk(sent !== undefined && 'tollgate_anthropic' in sent, "the gateway's private member is not sent")

    await anthropic.messages.create({
      model: MODEL,
      max_tokens: 64,
      output_config: { effort: 'medium' },
      messages: [{ role: 'user', content: 'Hi' }],
    } as Anthropic.MessageCreateParamsNonStreaming)
    const medium = fake.requests[before + 1]?.json
    t.same(medium?.output_config, { effort: 'medium' })
    t.notOk(medium !== undefined && 'thinking' in medium, 'no thinking asked for')

    await openai.chat.completions.create({
      model: MODEL,
      max_tokens: 8000,
      reasoning_effort: 'medium',
      messages: [{ role: 'user', content: 'Hi' }],
    })
    const fromOpenAI = fake.requests[before + 2]?.json
    t.same(
      fromOpenAI?.thinking,
      { type: 'enabled', budget_tokens: 4096 },
      "an OpenAI caller's reasoning_effort is a thinking budget",
    )
    t.notOk(fromOpenAI !== undefined && 'output_config' in fromOpenAI)

    const smuggled = await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${(await newKey()).key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hi' }],
        tollgate_anthropic: { context_management: context },
      }),
    })
    t.equal(smuggled.status, 400, "a caller cannot send the gateway's private member")
    t.equal(fake.requests.length, before + 3, 'and nothing reached the upstream')
  },
)

t.test('capacity learns the anthropic-ratelimit-* headers', async (t) => {
  const { openai } = await newKey()
  const reset = new Date(Date.now() + 60_000).toISOString().replace(/\.\d+Z$/, 'Z')
  fake.options.headers = {
    'anthropic-ratelimit-requests-limit': '50',
    'anthropic-ratelimit-requests-remaining': '42',
    'anthropic-ratelimit-requests-reset': reset,
    'anthropic-ratelimit-tokens-limit': '90000',
    'anthropic-ratelimit-tokens-remaining': '81000',
    'anthropic-ratelimit-tokens-reset': reset,
    'anthropic-ratelimit-input-tokens-limit': '80000',
    'anthropic-ratelimit-input-tokens-remaining': '72000',
    'anthropic-ratelimit-input-tokens-reset': reset,
    'anthropic-ratelimit-output-tokens-limit': '16000',
    'anthropic-ratelimit-output-tokens-remaining': '9000',
    'anthropic-ratelimit-output-tokens-reset': reset,
  }
  t.teardown(() => {
    fake.options.headers = {}
  })
  await openai.chat.completions.create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] })
  const res = await fetch(`${gw.url}/admin/backends`, { headers: admin })
  const list = (await res.json()) as {
    data: Array<{ name: string; deployments: Array<{ id: string; state: Record<string, unknown> }> }>
  }
  const deployment = list.data.find((m) => m.name === MODEL)?.deployments[0]
  t.equal(deployment?.id, `claude/${UPSTREAM}`)
  t.match(deployment?.state, { remaining_requests: 42, remaining_tokens: 81000 })
})

t.test('upstream errors become the gateway answers', async (t) => {
  t.teardown(() => {
    delete fake.options.failWith
  })
  const { openai, anthropic } = await newKey()
  const ask = (model = MODEL) =>
    openai.chat.completions
      .create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e)

  fake.options.failWith = { status: 400, type: 'invalid_request_error' }
  const bad = await ask()
  t.ok(bad instanceof OpenAI.BadRequestError, '400 → 400')
  t.match(bad instanceof OpenAI.APIError ? bad.message : '', /fake anthropic failure 400/)
  const badAnthropic = await anthropic.messages
    .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
    .catch((e: unknown) => e)
  t.ok(badAnthropic instanceof Anthropic.BadRequestError, "400 → 400 in Anthropic's shape")
  t.equal(badAnthropic instanceof Anthropic.APIError ? badAnthropic.type : null, 'invalid_request_error')

  fake.options.failWith = { status: 401, type: 'authentication_error' }
  const auth = await ask()
  t.ok(auth instanceof OpenAI.APIError && auth.status === 502 && auth.code === 'upstream_auth_failed', '401 → 502')

  fake.options.failWith = { status: 500, type: 'api_error' }
  const failed = await ask()
  t.ok(failed instanceof OpenAI.APIError && failed.status === 500, '500 → 500')

  fake.options.failWith = { status: 429, type: 'rate_limit_error', retryAfter: '7' }
  const limited = await ask(LIMITED.model)
  t.ok(limited instanceof OpenAI.RateLimitError && limited.code === 'upstream_capacity_exceeded', '429 → capacity')
  t.equal(limited instanceof OpenAI.APIError ? limited.headers?.get('retry-after') : null, '7')

  fake.options.failWith = { status: 529, type: 'overloaded_error', retryAfter: '9' }
  const overloaded = await ask(OVERLOADED.model)
  t.ok(
    overloaded instanceof OpenAI.RateLimitError && overloaded.code === 'upstream_capacity_exceeded',
    '529 → capacity',
  )
  t.equal(overloaded instanceof OpenAI.APIError ? overloaded.headers?.get('retry-after') : null, '9')
})

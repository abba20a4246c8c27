// The Anthropic SDK through a running gateway whose upstream is an OpenAI-compatible server
// (the fake in test/helpers/fake-upstream.ts): what the upstream is sent (a chat
// completion, none of the caller's Anthropic headers or key), the reply and its usage as
// the upstream reported them, metered exactly, and the upstream's errors in Anthropic's
// shape and classes.
import Anthropic from '@anthropic-ai/sdk'
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'claude-sonnet-4.5'
const PROMPT_TOKENS = 4321

const upstream = await startFakeUpstream({ promptTokens: PROMPT_TOKENS, replyText: 'Bonjour from upstream.' })
t.teardown(() => upstream.close())
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), fake: { type: 'openai', baseUrl: upstream.url } }
    const models = doc.models as Array<{ name: string; deployments: unknown[] }>
    for (const model of models) if (model.name === MODEL) model.deployments = [{ backend: 'fake', model: 'gpt-4.1' }]
  },
})
t.teardown(() => gw.stop())
const created = await gw.createKey({ tier: 'Standard4000', name: 'anthropic-upstream' })
const sdk = new Anthropic({ baseURL: gw.url, apiKey: created.key, maxRetries: 0 })

t.test('the upstream is sent a chat completion, and the caller gets its reply as a Message', async (t) => {
  const before = upstream.requests.length
  const reply = await sdk.messages.create(
    {
      model: MODEL,
      max_tokens: 100,
      system: 'Be brief.',
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } }],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: 'sunny' },
            { type: 'text', text: 'Thanks!' },
          ],
        },
      ],
      tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
      stop_sequences: ['END'],
      metadata: { user_id: 'user-7' },
      top_k: 5,
    } as Anthropic.MessageCreateParamsNonStreaming,
    { headers: { 'anthropic-beta': 'prompt-caching-2024-07-31' } },
  )
  t.equal(reply.stop_reason, 'end_turn', 'finish_reason stop')
  t.same(reply.content, [{ type: 'text', text: 'Bonjour from upstream.', citations: null }])
  t.equal(reply.model, MODEL)
  t.equal(reply.usage.input_tokens, PROMPT_TOKENS, 'the upstream reported prompt tokens')

  const sent = upstream.requests.slice(before)
  t.equal(sent.length, 1)
  const request = sent[0]
  if (request === undefined) return
  t.match(request.path, /\/chat\/completions$/)
  t.same(request.json, {
    model: 'gpt-4.1',
    max_tokens: 100,
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'user', content: 'Thanks!' },
    ],
    top_k: 5,
    stop: ['END'],
    user: 'user-7',
    tools: [
      {
        type: 'function',
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ],
    tool_choice: 'auto',
    parallel_tool_calls: false,
  })
  for (const header of ['x-api-key', 'anthropic-version', 'anthropic-beta', 'authorization'])
    t.notOk(request.headers[header], `${header} is not sent upstream`)
})

t.test('structured output: output_config.format is sent as response_format', async (t) => {
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] }
  const before = upstream.requests.length
  await sdk.messages.create({
    model: MODEL,
    max_tokens: 50,
    messages: [{ role: 'user', content: 'JSON please' }],
    output_config: { format: { type: 'json_schema', schema } },
  })
  const sent = upstream.requests[before]?.json as Record<string, unknown> | undefined
  t.same(sent?.response_format, { type: 'json_schema', json_schema: { name: 'output', schema, strict: true } })
})

t.test("Claude Code's effort and context_management: reasoning_effort upstream, nothing private", async (t) => {
  // A key of its own: the stream's test below counts the shared key's requests.
  const own = await gw.createKey({ tier: 'Standard4000', name: 'anthropic-upstream-effort' })
  const client = new Anthropic({ baseURL: gw.url, apiKey: own.key, maxRetries: 0 })
  const before = upstream.requests.length
  await client.messages.create({
    model: MODEL,
    max_tokens: 50,
    thinking: { type: 'adaptive' },
    output_config: { effort: 'low' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    messages: [{ role: 'user', content: 'hi' }],
  } as Anthropic.MessageCreateParamsNonStreaming)
  const sent = upstream.requests[before]?.json as Record<string, unknown> | undefined
  t.equal(sent?.reasoning_effort, 'low')
  for (const member of ['tollgate_anthropic', 'context_management', 'output_config', 'thinking'])
    t.notOk(sent !== undefined && member in sent, `${member} is not sent to an OpenAI-compatible upstream`)
})

t.test('extended thinking is refused by name on an OpenAI-compatible upstream, which cannot think', async (t) => {
  const before = upstream.requests.length
  const error = await sdk.messages
    .create({
      model: MODEL,
      max_tokens: 2048,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'Think first.' }],
    })
    .catch((err: unknown) => err)
  t.ok(error instanceof Anthropic.BadRequestError, 'BadRequestError')
  t.match(error instanceof Anthropic.APIError ? error.message : '', /^400 thinking is not supported/)
  t.equal(upstream.requests.length, before, 'nothing was sent upstream')
})

t.test('a stream ends with the usage the upstream reported, metered exactly to the key', async (t) => {
  const stream = sdk.messages.stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
  const final = await stream.finalMessage()
  t.equal(final.stop_reason, 'end_turn')
  t.same(final.content, [{ type: 'text', text: 'Bonjour from upstream.', citations: null }])
  t.equal(final.usage.input_tokens, PROMPT_TOKENS)
  t.ok(final.usage.output_tokens > 0)

  const usage = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${created.id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      return ((await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } })
        .totals
    },
    (totals) => totals.requests >= 3,
  )
  t.equal(usage.value.requests, 3)
  t.equal(usage.value.input_tokens, 3 * PROMPT_TOKENS, 'every call metered at the reported prompt tokens')
})

t.test("the upstream's errors, in Anthropic's shape and the SDK's classes", async (t) => {
  t.teardown(() => {
    delete upstream.options.failWith
  })
  const failing = async (status: number): Promise<unknown> => {
    upstream.options.failWith = status
    return sdk.messages
      .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .catch((err: unknown) => err)
  }
  const bad = await failing(400)
  t.ok(bad instanceof Anthropic.BadRequestError, '400: BadRequestError')
  t.equal(bad instanceof Anthropic.APIError ? bad.type : null, 'invalid_request_error')
  t.match(bad instanceof Anthropic.APIError ? bad.message : '', /fake upstream failure 400/)

  const overloaded = await failing(503)
  t.ok(overloaded instanceof Anthropic.APIError, 'an API error')
  if (overloaded instanceof Anthropic.APIError) {
    t.equal(overloaded.status, 529, 'a service that cannot take the call now: 529')
    t.equal(overloaded.type, 'overloaded_error')
    t.ok(overloaded instanceof Anthropic.OverloadedError, 'OverloadedError')
  }
})

// The fake of Anthropic's Messages API (test/helpers/fake-anthropic.ts) held to the official
// @anthropic-ai/sdk used as a client: what the SDK sends, the fake accepts; what the fake
// answers (messages, streams with tool use, errors, rate-limit headers), the SDK reads as it
// reads the real service's. The gateway's anthropic backend is tested against this fake.
import Anthropic from '@anthropic-ai/sdk'
import t from 'tap'
import { FAKE_THINKING, startFakeAnthropic } from '../helpers/fake-anthropic.ts'

const fake = await startFakeAnthropic({ headers: { 'anthropic-ratelimit-requests-limit': '50' } })
t.teardown(() => fake.close())
const sdk = new Anthropic({ baseURL: fake.origin, apiKey: fake.options.apiKey, maxRetries: 0 })
const MODEL = 'claude-sonnet-4-5-20250929'
const tools = [
  { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } },
]

t.test('a message: its text, stop reason and four-part usage', async (t) => {
  const { data, response } = await sdk.messages
    .create({ model: MODEL, max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] })
    .withResponse()
  t.same(data.content, [{ type: 'text', text: 'Bonjour from Claude.' }])
  t.equal(data.stop_reason, 'end_turn')
  t.match(data.usage, fake.options.usage)
  t.match(response.headers.get('request-id'), /^req_/)
  t.equal(response.headers.get('anthropic-ratelimit-requests-limit'), '50')
  const sent = fake.requests.at(-1)
  t.type(sent?.headers['anthropic-version'], 'string', 'the SDK sends the version the fake requires')
})

t.test('a stream: the documented event sequence, usage split across message_start and message_delta', async (t) => {
  const stream = sdk.messages.stream({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] })
  const types: string[] = []
  stream.on('streamEvent', (event) => types.push(event.type))
  const final = await stream.finalMessage()
  t.same(types.slice(0, 3), ['message_start', 'content_block_start', 'content_block_delta'])
  t.same(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop'])
  t.match(final.content, [{ type: 'text', text: 'Bonjour from Claude.' }])
  t.match(final.usage, fake.options.usage, 'the SDK joins the two parts into the whole usage')
})

t.test('tool use, streamed: input_json_delta pieces add up to the input; the round trip answers in text', async (t) => {
  const stream = sdk.messages.stream({
    model: MODEL,
    max_tokens: 64,
    tools,
    messages: [{ role: 'user', content: 'Weather?' }],
  })
  const final = await stream.finalMessage()
  t.equal(final.stop_reason, 'tool_use')
  const call = final.content[0]
  t.equal(call?.type, 'tool_use')
  if (call?.type !== 'tool_use') return
  t.same(call.input, fake.options.toolInput)
  const reply = await sdk.messages.create({
    model: MODEL,
    max_tokens: 64,
    tools,
    messages: [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: final.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
    ],
  })
  t.equal(reply.stop_reason, 'end_turn')
})

t.test("errors in Anthropic's shape, as the SDK's classes", async (t) => {
  t.teardown(() => {
    delete fake.options.failWith
  })
  const failing = async (status: number, type: string): Promise<unknown> => {
    fake.options.failWith = { status, type, retryAfter: '7' }
    return sdk.messages
      .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e)
  }
  t.ok((await failing(400, 'invalid_request_error')) instanceof Anthropic.BadRequestError)
  t.ok((await failing(500, 'api_error')) instanceof Anthropic.InternalServerError)
  const limited = await failing(429, 'rate_limit_error')
  t.ok(limited instanceof Anthropic.RateLimitError)
  if (limited instanceof Anthropic.APIError) {
    t.equal(limited.type, 'rate_limit_error')
    t.equal(limited.headers?.get('retry-after'), '7')
  }
  const overloaded = await failing(529, 'overloaded_error')
  t.ok(overloaded instanceof Anthropic.APIError && overloaded.status === 529 && overloaded.type === 'overloaded_error')
  delete fake.options.failWith
  const wrongKey = new Anthropic({ baseURL: fake.origin, apiKey: 'sk-ant-wrong', maxRetries: 0 })
  const refused = await wrongKey.messages
    .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
    .catch((e: unknown) => e)
  t.ok(refused instanceof Anthropic.AuthenticationError)
})

t.test('extended thinking: a signed block first; sent back unchanged it passes, tampered it is refused', async (t) => {
  const thinking = { type: 'enabled' as const, budget_tokens: 1024 }
  const stream = sdk.messages.stream({
    model: MODEL,
    max_tokens: 2048,
    thinking,
    tools,
    messages: [{ role: 'user', content: 'Weather?' }],
  })
  const final = await stream.finalMessage()
  const [first, call] = final.content
  t.match(first, { type: 'thinking', thinking: FAKE_THINKING, signature: /^[\w+/=]{20,}$/ })
  if (call?.type !== 'tool_use' || first?.type !== 'thinking') return t.fail('thinking, then a tool call')
  const next = (content: Anthropic.ContentBlockParam[]) =>
    sdk.messages
      .create({
        model: MODEL,
        max_tokens: 2048,
        thinking,
        tools,
        messages: [
          { role: 'user', content: 'Weather?' },
          { role: 'assistant', content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
        ],
      })
      .catch((e: unknown) => e)
  t.match(await next(final.content), { stop_reason: 'end_turn' })
  t.ok((await next([{ ...first, signature: 'forged' }, call])) instanceof Anthropic.BadRequestError, 'forged')
  t.ok((await next([call])) instanceof Anthropic.BadRequestError, 'the thinking left out')
})

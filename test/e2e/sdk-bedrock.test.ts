// A running gateway whose Claude models are deployed on a `bedrock` backend, the fake Bedrock
// Runtime (test/helpers/fake-bedrock.ts) behind it, which checks every request's SigV4
// signature: the openai SDK (chat, stream, a tool round trip, an image, structured output)
// and the @anthropic-ai/sdk through /v1/messages (plain, stream, extended thinking) reach it
// as Converse calls; the usage is metered exactly as Bedrock reported it (its cache read and
// write tokens included); each of Bedrock's error classes gets the answer the corridor gives
// any upstream's; capacity learns a ThrottlingException; and a model deployed on Anthropic
// direct and on Bedrock fails over from one to the other.
import t from 'tap'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI, { type APIError } from 'openai'
import { startFakeAnthropic } from '../helpers/fake-anthropic.ts'
import {
  DEFAULT_USAGE,
  FAKE_AWS_CREDENTIALS,
  FAKE_REASONING,
  FAKE_REASONING_SIGNATURE,
  startFakeBedrock,
} from '../helpers/fake-bedrock.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'claude-sonnet-4.5'
const BEDROCK_MODEL = 'anthropic.claude-sonnet-4-5-20250929-v1:0'
/** Models refused in their own tests (each cools down alone); any model name can map to a Bedrock model id. */
const THROTTLED = { model: 'claude-sonnet-4', upstream: 'anthropic.claude-sonnet-4-20250514-v1:0' }
const UNAVAILABLE = { model: 'gemini-2.5-pro', upstream: 'anthropic.claude-3-5-haiku-20241022-v1:0' }
const STREAM_THROTTLED = { model: 'gemini-3-pro', upstream: 'anthropic.claude-3-haiku-20240307-v1:0' }
/** The same the other way round, a model of its own (the first failover test leaves Anthropic's deployment cooling). */
const BACK = { model: 'gpt-4.1', anthropic: 'claude-sonnet-4-5-20250929', bedrock: BEDROCK_MODEL }
/** Deployed on Anthropic direct and on Bedrock both. */
const TWICE = {
  model: 'claude-3-7-sonnet',
  anthropic: 'claude-3-7-sonnet-20250219',
  bedrock: 'us.anthropic.claude-3-7-sonnet-20250219-v1:0',
}

const fake = await startFakeBedrock()
t.teardown(() => fake.close())
const direct = await startFakeAnthropic()
t.teardown(() => direct.close())
const PROMPT =
  DEFAULT_USAGE.inputTokens + (DEFAULT_USAGE.cacheReadInputTokens ?? 0) + (DEFAULT_USAGE.cacheWriteInputTokens ?? 0)
const OUTPUT = DEFAULT_USAGE.outputTokens

const gw = await startTollgate({
  env: {
    AWS_ACCESS_KEY_ID: FAKE_AWS_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: FAKE_AWS_CREDENTIALS.secretAccessKey,
    AWS_SESSION_TOKEN: FAKE_AWS_CREDENTIALS.sessionToken ?? '',
    CLAUDE_UPSTREAM_KEY: direct.options.apiKey,
  },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      aws: { type: 'bedrock', region: 'us-east-1', endpoint: fake.origin },
      claude: { type: 'anthropic', baseUrl: direct.url, apiKeyEnv: 'CLAUDE_UPSTREAM_KEY' },
    }
    const on: Record<string, unknown[]> = {
      [MODEL]: [{ backend: 'aws', model: BEDROCK_MODEL }],
      [THROTTLED.model]: [{ backend: 'aws', model: THROTTLED.upstream }],
      [UNAVAILABLE.model]: [{ backend: 'aws', model: UNAVAILABLE.upstream }],
      [STREAM_THROTTLED.model]: [{ backend: 'aws', model: STREAM_THROTTLED.upstream }],
      [TWICE.model]: [
        { backend: 'claude', model: TWICE.anthropic },
        { backend: 'aws', model: TWICE.bedrock },
      ],
      [BACK.model]: [
        { backend: 'aws', model: BACK.bedrock },
        { backend: 'claude', model: BACK.anthropic },
      ],
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>) {
      const deployments = on[model.name]
      if (deployments !== undefined) model.deployments = deployments
    }
  },
})
t.teardown(() => gw.stop())

const admin = { authorization: `Bearer ${gw.adminToken}` }
async function newKey(): Promise<{ id: string; openai: OpenAI; anthropic: Anthropic }> {
  const created = await gw.createKey({ tier: 'Standard4000' })
  return {
    id: created.id,
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
const WEATHER: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}

t.test('openai SDK, chat: a signed Converse call, the reply and exact usage back', async (t) => {
  const { id, openai } = await newKey()
  const reply = await openai.chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello.' },
    ],
    max_tokens: 60,
    temperature: 0.2,
    stop: ['END'],
  })
  t.equal(reply.choices[0]?.message.content, 'Hello from the fake Bedrock.')
  t.equal(reply.choices[0]?.finish_reason, 'stop')
  t.equal(reply.usage?.prompt_tokens, PROMPT, 'input + cache read + cache write')
  t.equal(reply.usage?.completion_tokens, OUTPUT)
  t.equal(reply.usage?.prompt_tokens_details?.cached_tokens, DEFAULT_USAGE.cacheReadInputTokens)
  t.equal(
    (reply.usage?.prompt_tokens_details as Record<string, unknown> | undefined)?.cache_write_tokens,
    DEFAULT_USAGE.cacheWriteInputTokens,
  )
  const sent = fake.requests.at(-1)
  t.equal(sent?.operation, 'converse')
  t.equal(sent?.modelId, BEDROCK_MODEL, "the deployment's model is the Bedrock model id")
  t.match(sent?.headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIAFAKEBEDROCK00001\/\d{8}\/us-east-1\/bedrock\//)
  t.equal(sent?.headers['x-amz-security-token'], FAKE_AWS_CREDENTIALS.sessionToken)
  t.same(sent?.json, {
    messages: [{ role: 'user', content: [{ text: 'Say hello.' }] }],
    system: [{ text: 'Be brief.' }],
    inferenceConfig: { maxTokens: 60, temperature: 0.2, stopSequences: ['END'] },
  })
  const row = await metered(id, 1)
  t.equal(row.input_tokens, PROMPT, "metered as Bedrock's three prompt counts")
  t.equal(row.output_tokens, OUTPUT)
})

t.test('openai SDK, stream: chunks as they come, usage last, metered exactly', async (t) => {
  const { id, openai } = await newKey()
  let release = (): void => undefined
  fake.options.holdAfterFirstEvent = new Promise<void>((resolve) => {
    release = resolve
  })
  t.teardown(() => {
    release()
    delete fake.options.holdAfterFirstEvent
  })
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
    stream_options: { include_usage: true },
  })
  const chunks = stream[Symbol.asyncIterator]()
  // Bedrock holds the rest back after its first word: that word arrives all the same.
  let text = ''
  while (text === '') {
    const next = await chunks.next()
    if (next.done === true) break
    text += next.value.choices[0]?.delta.content ?? ''
  }
  t.equal(text, 'Hello ', 'the first word, before Bedrock sent the rest')
  release()
  let finish: string | null | undefined
  let usage: OpenAI.CompletionUsage | null | undefined
  for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) {
    text += next.value.choices[0]?.delta.content ?? ''
    finish = next.value.choices[0]?.finish_reason ?? finish
    usage = next.value.usage ?? usage
  }
  t.equal(text, 'Hello from the fake Bedrock.')
  t.equal(finish, 'stop')
  t.equal(usage?.prompt_tokens, PROMPT)
  t.equal(usage?.completion_tokens, OUTPUT)
  t.equal(fake.requests.at(-1)?.operation, 'converse-stream')
  const row = await metered(id, 1)
  t.equal(row.input_tokens, PROMPT)
  t.equal(row.output_tokens, OUTPUT)
})

t.test('openai SDK, tools: a call and its result, round trip, streamed and not', async (t) => {
  const { id, openai } = await newKey()
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
  const first = await openai.chat.completions.create({
    model: MODEL,
    messages,
    tools: [WEATHER],
    tool_choice: 'required',
  })
  const choice = first.choices[0]
  t.equal(choice?.finish_reason, 'tool_calls')
  const call = choice?.message.tool_calls?.[0]
  t.equal(call?.type === 'function' ? call.function.name : undefined, 'get_weather')
  t.same(JSON.parse(call?.type === 'function' ? call.function.arguments : '{}'), { city: 'Paris' })
  t.same(fake.requests.at(-1)?.json.toolConfig, {
    tools: [
      {
        toolSpec: {
          name: 'get_weather',
          description: 'The weather in a city',
          inputSchema: { json: WEATHER.type === 'function' ? WEATHER.function.parameters : {} },
        },
      },
    ],
    toolChoice: { any: {} },
  })
  messages.push(choice?.message as OpenAI.ChatCompletionMessageParam, {
    role: 'tool',
    tool_call_id: call?.id ?? '',
    content: '{"celsius":21}',
  })
  const second = await openai.chat.completions.create({ model: MODEL, messages, tools: [WEATHER] })
  t.equal(second.choices[0]?.message.content, 'get_weather said {"celsius":21}')
  t.match(fake.requests.at(-1)?.json.messages, [
    { role: 'user' },
    {
      role: 'assistant',
      content: [{ toolUse: { toolUseId: call?.id, name: 'get_weather', input: { city: 'Paris' } } }],
    },
    { role: 'user', content: [{ toolResult: { toolUseId: call?.id, content: [{ text: '{"celsius":21}' }] } }] },
  ])

  const streamed = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [WEATHER],
    stream: true,
  })
  const calls: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = []
  let finish: string | null | undefined
  for await (const chunk of streamed) {
    calls.push(...(chunk.choices[0]?.delta.tool_calls ?? []))
    finish = chunk.choices[0]?.finish_reason ?? finish
  }
  t.equal(finish, 'tool_calls')
  t.equal(calls[0]?.function?.name, 'get_weather')
  t.ok(calls.length >= 3, `the arguments streamed in pieces (${calls.length} deltas)`)
  t.same(JSON.parse(calls.map((c) => c.function?.arguments ?? '').join('')), { city: 'Paris' })
  const row = await metered(id, 3)
  t.equal(row.input_tokens, 3 * PROMPT)
  t.equal(row.output_tokens, 3 * OUTPUT)
})

t.test('openai SDK: an image as bytes, structured output as outputConfig', async (t) => {
  const { openai } = await newKey()
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')
  const seen = await openai.chat.completions.create({
    model: MODEL,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${png.toString('base64')}` } },
        ],
      },
    ],
  })
  t.equal(seen.choices[0]?.message.content, `I see png of ${png.length} bytes.`)
  t.match(fake.requests.at(-1)?.json.messages, [
    { content: [{ text: 'What is this?' }, { image: { format: 'png', source: { bytes: png.toString('base64') } } }] },
  ])
  const schema = {
    type: 'object',
    properties: { name: { type: 'string' }, age: { type: 'integer' } },
    required: ['name', 'age'],
    additionalProperties: false,
  }
  const person = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'A person, please.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
  })
  t.same(JSON.parse(person.choices[0]?.message.content ?? ''), { name: 'text', age: 42 })
  t.same(fake.requests.at(-1)?.json.outputConfig, {
    textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'person' } } },
  })
})

t.test('what Converse cannot be asked for is refused with a 400 naming it, and never sent', async (t) => {
  const { openai } = await newKey()
  const before = fake.requests.length
  for (const [extra, named] of [
    [{ logprobs: true }, /logprobs/],
    [{ response_format: { type: 'json_object' } }, /response_format/],
    [{ parallel_tool_calls: false, tools: [WEATHER] }, /parallel_tool_calls/],
    [
      {
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
      },
      /a web address/,
    ],
  ] as Array<[Record<string, unknown>, RegExp]>) {
    const body = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], ...extra }
    const error = await openai.chat.completions
      .create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e)
    t.ok(error instanceof OpenAI.BadRequestError, `refused: ${String(named)}`)
    t.equal((error as APIError).code, 'unsupported_parameter')
    t.match((error as APIError).message, named)
  }
  t.equal(fake.requests.length, before, 'Bedrock was sent none of them')
})

t.test('Anthropic SDK on /v1/messages: plain and streamed, the three prompt counts, metered exactly', async (t) => {
  const { id, anthropic } = await newKey()
  const message = await anthropic.messages.create({
    model: MODEL,
    max_tokens: 100,
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Say hello.' }],
  })
  t.match(message.content, [{ type: 'text', text: 'Hello from the fake Bedrock.' }])
  t.equal(message.stop_reason, 'end_turn')
  t.equal(message.usage.input_tokens, DEFAULT_USAGE.inputTokens)
  t.equal(message.usage.cache_read_input_tokens, DEFAULT_USAGE.cacheReadInputTokens)
  t.equal(message.usage.cache_creation_input_tokens, DEFAULT_USAGE.cacheWriteInputTokens)
  t.equal(message.usage.output_tokens, OUTPUT)
  t.match(fake.requests.at(-1)?.json, { system: [{ text: 'Be brief.' }], inferenceConfig: { maxTokens: 100 } })
  const streamed = await anthropic.messages
    .stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'Say hello.' }] })
    .finalMessage()
  t.match(streamed.content, [{ type: 'text', text: 'Hello from the fake Bedrock.' }])
  t.equal(streamed.usage.output_tokens, OUTPUT)
  t.equal(streamed.usage.cache_read_input_tokens, DEFAULT_USAGE.cacheReadInputTokens)
  const row = await metered(id, 2)
  t.equal(row.input_tokens, 2 * PROMPT)
  t.equal(row.output_tokens, 2 * OUTPUT)
})

t.test('Anthropic SDK: extended thinking reaches Claude on Bedrock, its signature kept both ways', async (t) => {
  const { anthropic } = await newKey()
  const thinking = { type: 'enabled' as const, budget_tokens: 1024 }
  const ask = [{ role: 'user' as const, content: 'Think, then answer.' }]
  const final = await anthropic.messages
    .stream({ model: MODEL, max_tokens: 2048, thinking, messages: ask })
    .finalMessage()
  t.match(fake.requests.at(-1)?.json.additionalModelRequestFields, { thinking })
  t.match(final.content, [
    { type: 'thinking', thinking: FAKE_REASONING, signature: FAKE_REASONING_SIGNATURE },
    { type: 'text', text: 'Hello from the fake Bedrock.' },
  ])
  await anthropic.messages.create({
    model: MODEL,
    max_tokens: 2048,
    thinking,
    messages: [...ask, { role: 'assistant', content: final.content }, { role: 'user', content: 'And?' }],
  })
  t.match(fake.requests.at(-1)?.json.messages, [
    { role: 'user' },
    {
      role: 'assistant',
      content: [
        { reasoningContent: { reasoningText: { text: FAKE_REASONING, signature: FAKE_REASONING_SIGNATURE } } },
        { text: 'Hello from the fake Bedrock.' },
      ],
    },
    { role: 'user' },
  ])
})

t.test("Bedrock's errors, each as the corridor answers its class", async (t) => {
  const { openai, anthropic } = await newKey()
  t.teardown(() => {
    delete fake.options.failWith
    fake.options.credentials = FAKE_AWS_CREDENTIALS
  })
  const ask = (model = MODEL): Promise<unknown> =>
    openai.chat.completions
      .create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((e: unknown) => e)

  fake.options.failWith = {
    status: 400,
    type: 'ValidationException',
    message: 'The provided model identifier is invalid.',
  }
  const invalid = (await ask()) as APIError
  t.ok(invalid instanceof OpenAI.BadRequestError, 'ValidationException: 400')
  t.equal(invalid.message, '400 The provided model identifier is invalid.', 'its message relayed')
  const invalidAnthropic = await anthropic.messages
    .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
    .catch((e: unknown) => e)
  t.ok(invalidAnthropic instanceof Anthropic.BadRequestError, "400 in Anthropic's shape")

  fake.options.failWith = { status: 403, type: 'AccessDeniedException', message: 'You do not have access.' }
  const denied = (await ask()) as APIError
  t.equal(denied.status, 502, 'AccessDeniedException: upstream_auth_failed')
  t.equal(denied.code, 'upstream_auth_failed')

  delete fake.options.failWith
  fake.options.credentials = { ...FAKE_AWS_CREDENTIALS, secretAccessKey: 'a/secret/the/gateway/does/not/have' }
  const badSignature = (await ask()) as APIError
  t.equal(badSignature.code, 'upstream_auth_failed', 'a signature Bedrock refuses: upstream_auth_failed')
  t.equal(fake.refused.at(-1), 'InvalidSignatureException')
  fake.options.credentials = FAKE_AWS_CREDENTIALS

  fake.options.failWith = { status: 500, type: 'InternalServerException', message: 'Internal failure.' }
  const internal = (await ask()) as APIError
  t.equal(internal.status, 500, 'InternalServerException: an upstream failure')
  t.equal(internal.type, 'server_error')

  fake.options.failWith = { status: 503, type: 'ServiceUnavailableException', message: 'Service unavailable.' }
  const unavailable = (await ask(UNAVAILABLE.model)) as APIError
  t.ok(unavailable instanceof OpenAI.RateLimitError, 'ServiceUnavailableException: a capacity refusal')
  t.equal(unavailable.code, 'upstream_capacity_exceeded')
})

/** Bedrock names no wait: a refused deployment cools down for the gateway's default (src/capacity/upstream-headers.ts). */
const DEFAULT_COOLDOWN_MS = 1000

t.test(
  'capacity learns a ThrottlingException: the deployment cools down, Bedrock is not asked meanwhile',
  async (t) => {
    const { openai } = await newKey()
    t.teardown(() => {
      delete fake.options.failWith
    })
    const ask = (): Promise<unknown> =>
      openai.chat.completions
        .create({ model: THROTTLED.model, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
        .catch((e: unknown) => e)
    // The cooldown is short: a sample counts when the second call was over before it can have ended
    // (it began no earlier than the first call did); a busy machine gets a few tries.
    let sampled = false
    for (let attempt = 0; attempt < 5 && !sampled; attempt += 1) {
      fake.options.failWith = { status: 429, type: 'ThrottlingException', message: 'Too many requests, please wait.' }
      const started = Date.now()
      const limited = (await ask()) as APIError
      t.ok(limited instanceof OpenAI.RateLimitError)
      t.equal(limited.code, 'upstream_capacity_exceeded', "the gateway's capacity refusal")
      const before = fake.requests.length
      delete fake.options.failWith
      const again = await ask()
      if (Date.now() - started >= DEFAULT_COOLDOWN_MS) {
        // Too slow to tell: wait the cooldown out (Bedrock serves again) and try once more.
        await pollUntil(ask, (reply) => !(reply instanceof OpenAI.APIError))
        continue
      }
      sampled = true
      t.ok(again instanceof OpenAI.RateLimitError, 'refused again while the deployment cools down')
      t.equal(fake.requests.length, before, 'and Bedrock is not asked meanwhile')
      const res = await fetch(`${gw.url}/admin/backends`, { headers: admin })
      const list = (await res.json()) as {
        data: Array<{ name: string; deployments: Array<{ id: string; state: Record<string, unknown> | null }> }>
      }
      const deployment = list.data.find((m) => m.name === THROTTLED.model)?.deployments[0]
      t.equal(deployment?.id, `aws/${THROTTLED.upstream}`)
      const until = Date.parse(String(deployment?.state?.cooling_until))
      t.ok(until >= started + DEFAULT_COOLDOWN_MS, 'cooling until the default cooldown after the refusal')
    }
    t.ok(sampled, 'a second call fell within the cooldown')
  },
)

t.test('exceptions inside a ConverseStream', async (t) => {
  const { openai } = await newKey()
  t.teardown(() => {
    delete fake.options.streamFailWith
  })
  // Mid-stream: the words before it arrive, then the error in OpenAI's shape ends the stream.
  fake.options.streamFailWith = {
    exceptionType: 'throttlingException',
    message: 'Slow down mid-stream.',
    afterEvents: 3,
  }
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
  })
  let text = ''
  const error = await (async () => {
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
  })().catch((e: unknown) => e)
  t.equal(text, 'Hello from ', 'the words before the exception')
  t.ok(error instanceof OpenAI.APIError, 'then an error the SDK raises')
  t.match((error as Error).message, /Slow down mid-stream/)

  // The Anthropic SDK gets it as Anthropic's error event.
  const { anthropic } = await newKey()
  let said = ''
  const anthropicError = await (async () => {
    const events = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Say hello.' }],
    })
    events.on('text', (piece) => {
      said += piece
    })
    await events.finalMessage()
  })().catch((e: unknown) => e)
  t.equal(said, 'Hello from ', 'the words before the exception, to the Anthropic SDK')
  t.ok(anthropicError instanceof Anthropic.APIError, 'then the error event the Anthropic SDK raises')
  t.match((anthropicError as Error).message, /Slow down mid-stream/)

  // Opening the stream: the refusal it is, learned by capacity like a 429 status line.
  fake.options.streamFailWith = { exceptionType: 'throttlingException', message: 'Slow down at once.', afterEvents: 0 }
  const refused = await openai.chat.completions
    .create({ model: STREAM_THROTTLED.model, messages: [{ role: 'user', content: 'Hi' }], stream: true })
    .catch((e: unknown) => e)
  t.ok(refused instanceof OpenAI.RateLimitError, 'a stream that opens with throttlingException is a 429')
  t.equal((refused as APIError).code, 'upstream_capacity_exceeded')
})

t.test(
  'failover across providers: Claude on Anthropic direct and on Bedrock, one refusing, the other serves',
  async (t) => {
    const { openai } = await newKey()
    t.teardown(() => {
      delete direct.options.failWith
      delete fake.options.failWith
    })
    const ask = (): Promise<OpenAI.ChatCompletion> =>
      openai.chat.completions.create({ model: TWICE.model, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })

    // Anthropic overloaded (529): every call is answered, by Bedrock.
    direct.options.failWith = { status: 529, type: 'overloaded_error' }
    const directBefore = direct.requests.length
    const bedrockBefore = fake.requests.length
    for (let i = 0; i < 10 && direct.requests.length === directBefore; i += 1) {
      const reply = await ask()
      t.equal(reply.choices[0]?.message.content, 'Hello from the fake Bedrock.', `call ${i + 1} served by Bedrock`)
    }
    t.ok(direct.requests.length > directBefore, 'Anthropic direct was tried, and refused')
    t.ok(fake.requests.length > bedrockBefore, 'Bedrock served')
    t.equal(fake.requests.at(-1)?.modelId, TWICE.bedrock)
    delete direct.options.failWith
  },
)

t.test('failover across providers: Bedrock throttling, Anthropic direct serves', async (t) => {
  const { openai } = await newKey()
  t.teardown(() => {
    delete fake.options.failWith
  })
  fake.options.failWith = { status: 429, type: 'ThrottlingException', message: 'Too many requests.' }
  const directBefore = direct.requests.length
  const bedrockBefore = fake.requests.length
  for (let i = 0; i < 10 && fake.requests.length === bedrockBefore; i += 1) {
    const reply = await openai.chat.completions.create({
      model: BACK.model,
      max_tokens: 8,
      messages: [{ role: 'user', content: 'Hi' }],
    })
    t.equal(reply.choices[0]?.message.content, direct.options.replyText, `call ${i + 1} served by Anthropic direct`)
  }
  t.ok(fake.requests.length > bedrockBefore, 'Bedrock was tried, and throttled')
  t.ok(direct.requests.length > directBefore, 'Anthropic direct served')
})

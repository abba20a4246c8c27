// The openai SDK on a gateway whose Gemini models are deployed on a `gemini` backend, the
// fake Gemini API (test/helpers/fake-gemini.ts) behind it: chat, streams, a tool's round
// trip, thinking (reasoning_effort, reasoning.effort), an image and structured output come back in OpenAI's shape, metered exactly as
// Gemini's usageMetadata counted them; a feature Gemini cannot take is refused naming it;
// each of Gemini's error classes gets the answer the corridor gives any upstream's.
import t from 'tap'
import Anthropic from '@anthropic-ai/sdk'
import type { APIError } from 'openai'
import type OpenAI from 'openai'
import { BadRequestError } from 'openai'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { DEFAULT_USAGE, FAKE_GEMINI_KEY, googleError, startFakeGemini } from '../helpers/fake-gemini.ts'

const fake = await startFakeGemini()
t.teardown(() => fake.close())
const ON_GEMINI = new Set(['gemini-2.5-flash', 'gemini-2.5-pro', 'gemini-3-pro'])
const gw = await startTollgate({
  env: { GEMINI_API_KEY: FAKE_GEMINI_KEY },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      google: { type: 'gemini', baseUrl: fake.apiRoot, apiKeyEnv: 'GEMINI_API_KEY' },
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (ON_GEMINI.has(model.name)) model.deployments = [{ backend: 'google' }]
  },
})
t.teardown(() => gw.stop())

const PROMPT = DEFAULT_USAGE.promptTokenCount
const OUTPUT = DEFAULT_USAGE.candidatesTokenCount + (DEFAULT_USAGE.thoughtsTokenCount ?? 0)

async function keyed(): Promise<{ client: OpenAI; id: string }> {
  const { key, id } = await gw.createKey({ tier: 'Standard1000' })
  return { client: sdkClient(gw, key), id }
}

/** What /admin/usage holds for key `id` once `requests` calls of it are metered. */
async function metered(id: string, requests: number): Promise<{ input_tokens: number; output_tokens: number }> {
  const polled = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/usage?group_by=key`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      const body = (await res.json()) as {
        data: Array<{ key_id: string; requests: number; input_tokens: number; output_tokens: number }>
      }
      return body.data.find((row) => row.key_id === id)
    },
    (row) => row !== undefined && row.requests >= requests,
  )
  return polled.value as { input_tokens: number; output_tokens: number }
}

t.test('chat: the reply, Gemini usage exactly, and what Gemini was sent', async (t) => {
  const { client, id } = await keyed()
  const reply = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hello.' },
    ],
    max_tokens: 60,
    temperature: 0.2,
    top_p: 0.9,
    stop: ['END'],
  })
  t.equal(reply.choices[0]?.message.content, 'Hello from the fake Gemini.')
  t.equal(reply.choices[0]?.finish_reason, 'stop')
  t.equal(reply.usage?.prompt_tokens, PROMPT)
  t.equal(reply.usage?.completion_tokens, OUTPUT, 'thoughts count as output')
  t.equal(reply.usage?.prompt_tokens_details?.cached_tokens, DEFAULT_USAGE.cachedContentTokenCount)
  t.equal(reply.usage?.completion_tokens_details?.reasoning_tokens, DEFAULT_USAGE.thoughtsTokenCount)
  const sent = fake.requests.at(-1)
  t.match(sent?.path, /^\/v1beta\/models\/gemini-2\.5-flash:generateContent$/)
  t.equal(sent?.headers['x-goog-api-key'], FAKE_GEMINI_KEY)
  t.equal(sent?.headers.authorization, undefined, "the caller's key never reaches Google")
  t.same(sent?.json, {
    contents: [{ role: 'user', parts: [{ text: 'Say hello.' }] }],
    systemInstruction: { parts: [{ text: 'Be brief.' }] },
    generationConfig: { temperature: 0.2, topP: 0.9, maxOutputTokens: 60, stopSequences: ['END'] },
  })
  const row = await metered(id, 1)
  t.equal(row.input_tokens, PROMPT, "metered as Gemini's promptTokenCount")
  t.equal(row.output_tokens, OUTPUT, 'metered as candidatesTokenCount + thoughtsTokenCount')
})

t.test('stream: chunks as OpenAI sends them, usage last, metered exactly', async (t) => {
  const { client, id } = await keyed()
  const stream = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
    stream_options: { include_usage: true },
  })
  let text = ''
  let chunks = 0
  let finish: string | null | undefined
  let usage: OpenAI.CompletionUsage | null | undefined
  for await (const chunk of stream) {
    chunks += 1
    text += chunk.choices[0]?.delta.content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
    usage = chunk.usage ?? usage
  }
  t.equal(text, 'Hello from the fake Gemini.')
  t.ok(chunks > 2, `one chunk per Gemini event and the usage (${chunks})`)
  t.equal(finish, 'stop')
  t.equal(usage?.prompt_tokens, PROMPT)
  t.equal(usage?.completion_tokens, OUTPUT)
  t.match(fake.requests.at(-1)?.path, /:streamGenerateContent\?alt=sse$/)
  const row = await metered(id, 1)
  t.equal(row.input_tokens, PROMPT)
  t.equal(row.output_tokens, OUTPUT)
})

t.test('stream: each Gemini event reaches the client as it comes, not when the stream ends', async (t) => {
  const { client } = await keyed()
  let release = (): void => undefined
  fake.options.holdAfterFirstEvent = new Promise<void>((resolve) => {
    release = resolve
  })
  t.teardown(() => {
    release()
    delete fake.options.holdAfterFirstEvent
  })
  const stream = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
  })
  const chunks = stream[Symbol.asyncIterator]()
  // Gemini holds the rest back: the first word arrives all the same.
  const first = await chunks.next()
  t.equal(first.done, false)
  t.equal(first.done === false ? first.value.choices[0]?.delta.content : undefined, 'Hello ')
  release()
  let text = 'Hello '
  for (let next = await chunks.next(); next.done !== true; next = await chunks.next())
    text += next.value.choices[0]?.delta.content ?? ''
  t.equal(text, 'Hello from the fake Gemini.')
})

const WEATHER: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
      additionalProperties: false,
    },
    strict: true,
  },
}

t.test('tools: a call and its result, round trip, streamed and not', async (t) => {
  const { client, id } = await keyed()
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
  const first = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages,
    tools: [WEATHER],
    tool_choice: 'required',
  })
  const choice = first.choices[0]
  t.equal(choice?.finish_reason, 'tool_calls')
  const call = choice?.message.tool_calls?.[0]
  t.equal(call?.type === 'function' ? call.function.name : undefined, 'get_weather')
  t.same(JSON.parse(call?.type === 'function' ? call.function.arguments : '{}'), { city: 'Paris' })
  t.match(fake.requests.at(-1)?.json, {
    tools: [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: 'OBJECT', required: ['city'] } }] }],
    toolConfig: { functionCallingConfig: { mode: 'ANY' } },
  })
  messages.push(choice?.message as OpenAI.ChatCompletionMessageParam, {
    role: 'tool',
    tool_call_id: call?.id ?? '',
    content: '{"celsius":21}',
  })
  const second = await client.chat.completions.create({ model: 'gemini-2.5-flash', messages, tools: [WEATHER] })
  t.equal(second.choices[0]?.message.content, 'get_weather said {"celsius":21}')
  const contents = fake.requests.at(-1)?.json.contents as Array<{ role: string; parts: Array<Record<string, unknown>> }>
  t.same(
    contents.map((c) => c.role),
    ['user', 'model', 'user'],
  )
  t.match(contents[1]?.parts[0], {
    functionCall: { name: 'get_weather', args: { city: 'Paris' } },
    thoughtSignature: 'c2lnbmF0dXJl',
  })
  t.match(contents[2]?.parts[0], { functionResponse: { name: 'get_weather', response: { celsius: 21 } } })

  const streamed = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
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
  t.equal(calls[0]?.function?.arguments, '{"city":"Paris"}')
  const row = await metered(id, 3)
  t.equal(row.input_tokens, 3 * PROMPT)
  t.equal(row.output_tokens, 3 * OUTPUT)
})

t.test('thinking: reasoning_effort as a thinkingConfig, thoughts as reasoning_content, metered exactly', async (t) => {
  const { client, id } = await keyed()
  const reply = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'Think first.' }],
    reasoning_effort: 'medium',
  })
  t.same(
    fake.requests.at(-1)?.json.generationConfig,
    {
      maxOutputTokens: 1024,
      thinkingConfig: { thinkingBudget: 1023, includeThoughts: true },
    },
    'the budget (8192 for medium) held below the cap the gateway sent',
  )
  const message = reply.choices[0]?.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
  t.equal(message.content, 'Hello from the fake Gemini.')
  t.equal(message.reasoning_content, 'Weighing what was asked before answering.')
  t.equal(reply.usage?.completion_tokens, OUTPUT, 'thoughts are output tokens')
  t.equal(reply.usage?.completion_tokens_details?.reasoning_tokens, DEFAULT_USAGE.thoughtsTokenCount)

  const stream = await client.chat.completions.create({
    model: 'gemini-3-pro',
    messages: [{ role: 'user', content: 'Think first.' }],
    reasoning_effort: 'low',
    stream: true,
    stream_options: { include_usage: true },
  })
  let reasoning = ''
  let content = ''
  let reasoningTokens: number | undefined
  for await (const chunk of stream) {
    const delta: { content?: string | null; reasoning_content?: string } | undefined = chunk.choices[0]?.delta
    reasoning += delta?.reasoning_content ?? ''
    content += delta?.content ?? ''
    reasoningTokens = chunk.usage?.completion_tokens_details?.reasoning_tokens ?? reasoningTokens
  }
  t.match(fake.requests.at(-1)?.json.generationConfig, {
    thinkingConfig: { thinkingLevel: 'LOW', includeThoughts: true },
  })
  t.equal(reasoning, 'Weighing what was asked before answering.', 'the thoughts, as deltas')
  t.equal(content, 'Hello from the fake Gemini.')
  t.equal(reasoningTokens, DEFAULT_USAGE.thoughtsTokenCount)

  // The Responses API's reasoning.effort, with a tool: Gemini 3 refuses a call sent back
  // without its thought signature, which a reasoning item carries through the round trip.
  const first = await client.responses.create({
    model: 'gemini-3-pro',
    input: 'Weather in Paris?',
    tools: [{ type: 'function', name: 'get_weather', parameters: WEATHER.function.parameters ?? {}, strict: true }],
    reasoning: { effort: 'high' },
  })
  t.match(fake.requests.at(-1)?.json.generationConfig, { thinkingConfig: { thinkingLevel: 'HIGH' } })
  const call = first.output.find((item) => item.type === 'function_call')
  t.ok(call !== undefined, 'a function call')
  t.ok(
    first.output.some((item) => item.type === 'reasoning'),
    'a reasoning item',
  )
  const second = await client.responses.create({
    model: 'gemini-3-pro',
    input: [
      { role: 'user', content: 'Weather in Paris?' },
      ...first.output,
      {
        type: 'function_call_output',
        call_id: call?.type === 'function_call' ? call.call_id : '',
        output: '{"celsius":21}',
      },
    ] as OpenAI.Responses.ResponseInput,
    tools: [{ type: 'function', name: 'get_weather', parameters: WEATHER.function.parameters ?? {}, strict: true }],
    reasoning: { effort: 'high' },
  })
  t.equal(second.output_text, 'get_weather said {"celsius":21}')
  const contents = fake.requests.at(-1)?.json.contents as Array<{ parts: Array<Record<string, unknown>> }>
  t.ok(
    contents[1]?.parts.some((p) => p.functionCall !== undefined && p.thoughtSignature === 'c2lnbmF0dXJl'),
    'the call went back with its thought signature',
  )
  t.equal(second.usage?.output_tokens_details.reasoning_tokens, DEFAULT_USAGE.thoughtsTokenCount)
  const row = await metered(id, 4)
  t.equal(row.input_tokens, 4 * PROMPT)
  t.equal(row.output_tokens, 4 * OUTPUT)
})

t.test('an image goes inline', async (t) => {
  const { client } = await keyed()
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')
  const reply = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
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
  t.equal(reply.choices[0]?.message.content, `I see image/png of ${png.length} bytes.`)
  t.match(fake.requests.at(-1)?.json.contents, [
    { parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data: png.toString('base64') } }] },
  ])
})

t.test('structured output: json_schema as responseMimeType and responseSchema', async (t) => {
  const { client } = await keyed()
  const reply = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'A person, please.' }],
    response_format: {
      type: 'json_schema',
      json_schema: {
        name: 'person',
        strict: true,
        schema: {
          type: 'object',
          properties: { name: { type: 'string' }, age: { type: ['integer', 'null'] } },
          required: ['name', 'age'],
          additionalProperties: false,
        },
      },
    },
  })
  t.same(JSON.parse(reply.choices[0]?.message.content ?? ''), { name: 'text', age: 42 })
  t.same(fake.requests.at(-1)?.json.generationConfig, {
    maxOutputTokens: (fake.requests.at(-1)?.json.generationConfig as { maxOutputTokens: number }).maxOutputTokens,
    responseMimeType: 'application/json',
    responseSchema: {
      type: 'OBJECT',
      properties: { name: { type: 'STRING' }, age: { type: 'INTEGER', nullable: true } },
      required: ['name', 'age'],
    },
  })
})

t.test('the Anthropic SDK on /v1/messages reaches Gemini too, metered exactly', async (t) => {
  const { key, id } = await gw.createKey({ tier: 'Standard1000' })
  const sdk = new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 })
  const message = await sdk.messages.create({
    model: 'gemini-2.5-flash',
    max_tokens: 100,
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Say hello.' }],
  })
  t.match(message.content, [{ type: 'text', text: 'Hello from the fake Gemini.' }])
  t.equal(message.stop_reason, 'end_turn')
  // Anthropic counts cache reads apart from input_tokens; together they are Gemini's prompt.
  t.equal(message.usage.cache_read_input_tokens, DEFAULT_USAGE.cachedContentTokenCount)
  t.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), PROMPT)
  t.equal(message.usage.output_tokens, OUTPUT)
  t.match(fake.requests.at(-1)?.json, {
    systemInstruction: { parts: [{ text: 'Be brief.' }] },
    generationConfig: { maxOutputTokens: 100 },
  })
  const streamed = await sdk.messages
    .stream({ model: 'gemini-2.5-flash', max_tokens: 100, messages: [{ role: 'user', content: 'Say hello.' }] })
    .finalMessage()
  t.match(streamed.content, [{ type: 'text', text: 'Hello from the fake Gemini.' }])
  t.equal(streamed.usage.output_tokens, OUTPUT)
  const row = await metered(id, 2)
  t.equal(row.input_tokens, 2 * PROMPT)
  t.equal(row.output_tokens, 2 * OUTPUT)
})

t.test('what Gemini cannot be asked for is refused with a 400 naming it, and never sent', async (t) => {
  const { client } = await keyed()
  const before = fake.requests.length
  for (const [extra, named] of [
    [{ logprobs: true }, /logprobs/],
    [{ parallel_tool_calls: false, tools: [WEATHER] }, /parallel_tool_calls/],
    [
      {
        messages: [
          {
            role: 'user',
            content: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }],
          },
        ],
      },
      /image_url \(a web address\)/,
    ],
  ] as Array<[Record<string, unknown>, RegExp]>) {
    const body = { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], ...extra }
    const error = await client.chat.completions
      .create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e)
    t.ok(error instanceof BadRequestError, `refused: ${String(named)}`)
    t.equal((error as APIError).code, 'unsupported_parameter')
    t.match((error as APIError).message, named)
  }
  t.equal(fake.requests.length, before, 'Gemini was sent none of them')
})

t.test("Gemini's errors, each as the corridor answers its class", async (t) => {
  const { client } = await keyed()
  const ask = (model = 'gemini-2.5-pro'): Promise<unknown> =>
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e)
  t.teardown(() => {
    delete fake.options.failWith
    fake.options.apiKey = FAKE_GEMINI_KEY
  })

  fake.options.failWith = {
    status: 400,
    body: googleError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.'),
  }
  const invalid = (await ask()) as APIError
  t.ok(invalid instanceof BadRequestError, '400 INVALID_ARGUMENT: the caller gets a 400')
  t.equal(invalid.message, '400 Request contains an invalid argument.')
  t.equal(invalid.type, 'invalid_request_error')

  delete fake.options.failWith
  fake.options.apiKey = 'a-key-the-gateway-does-not-have'
  const auth = (await ask()) as APIError
  t.equal(auth.status, 502, "Gemini refusing the gateway's key (400 API_KEY_INVALID) is upstream_auth_failed")
  t.equal(auth.code, 'upstream_auth_failed')
  fake.options.apiKey = FAKE_GEMINI_KEY

  fake.options.failWith = { status: 403, body: googleError(403, 'PERMISSION_DENIED', 'Permission denied.') }
  const denied = (await ask()) as APIError
  t.equal(denied.status, 502, '403 PERMISSION_DENIED is upstream_auth_failed')
  t.equal(denied.code, 'upstream_auth_failed')

  fake.options.failWith = { status: 500, body: googleError(500, 'INTERNAL', 'An internal error has occurred.') }
  const internal = (await ask()) as APIError
  t.equal(internal.status, 500, '500 INTERNAL: an upstream failure')
  t.equal(internal.type, 'server_error')

  fake.options.failWith = {
    status: 429,
    body: googleError(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota.', [
      { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [] },
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '37s' },
    ]),
  }
  const limited = (await ask('gemini-3-pro')) as APIError
  t.equal(limited.status, 429)
  t.equal(limited.code, 'upstream_capacity_exceeded', "the gateway's capacity refusal, not Gemini's body")
  const wait = Number(limited.headers?.get('retry-after-ms'))
  t.ok(wait > 30_000 && wait <= 37_000, `the wait is Gemini's RetryInfo.retryDelay (${wait} ms)`)
  const before = fake.requests.length
  delete fake.options.failWith
  const again = (await ask('gemini-3-pro')) as APIError
  t.equal(again.status, 429, 'the deployment cools down for the time Gemini named')
  t.equal(fake.requests.length, before, 'and Gemini is not asked again meanwhile')
})

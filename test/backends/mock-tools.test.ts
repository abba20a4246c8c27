// The mock backend's function calling and structured output, called through adapter.send
// as the relay calls it: which reply a request gets (the rule in reply-plan.ts), the wire
// shapes plain and streamed on both APIs, finish reasons when a limit cuts JSON, usage
// counting what was produced, and the refusals.
import t from 'tap'
import type OpenAI from 'openai'
import type { UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import {
  CHAT_DEFINITION_FIELDS,
  countChatTokens,
  countDefinitionTokens,
  countTextTokens,
} from '../../src/tokenizer/tokens.ts'
import { dataEvents, json, mockBackend, post, type OpenAIErrorBody } from './mock-helpers.ts'

const backend = mockBackend(t)
const chat = (value: Record<string, unknown>): UpstreamRequest =>
  post('chat.completions', '/chat/completions', { model: 'm', ...value })
const responses = (value: Record<string, unknown>): UpstreamRequest =>
  post('responses', '/responses', { model: 'm', ...value })

/** The JSON payloads of a stream's frames, [DONE] left out. */
async function frames<T>(response: UpstreamResponse): Promise<T[]> {
  return (await dataEvents(response)).filter((data) => data !== '[DONE]') as T[]
}

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
} as const
const time = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] },
  },
} as const
const ask = [{ role: 'user', content: 'What is the weather in Hamburg?' }]

t.test(
  'chat: auto calls the first tool, with arguments valid for it, and bills them as completion tokens',
  async (t) => {
    const body = await json<OpenAI.ChatCompletion>(await backend.send(chat({ messages: ask, tools: [weather, time] })))
    const choice = body.choices[0]!
    t.equal(choice.finish_reason, 'tool_calls')
    t.equal(choice.message.content, null)
    const calls = choice.message.tool_calls ?? []
    t.equal(calls.length, 1)
    const call = calls[0] as OpenAI.ChatCompletionMessageFunctionToolCall
    t.match(call.id, /^call_[A-Za-z0-9]{24}$/)
    t.equal(call.type, 'function')
    t.equal(call.function.name, 'get_weather')
    t.same(JSON.parse(call.function.arguments), { city: 'sample city', unit: 'c' })
    t.equal(body.usage?.completion_tokens, await countTextTokens(call.function.arguments))
    // The tool definitions are rendered into the prompt and billed as input, as upstreams do.
    t.equal(
      body.usage?.prompt_tokens,
      (await countChatTokens(ask)) + (await countDefinitionTokens({ tools: [weather, time] }, CHAT_DEFINITION_FIELDS)),
      'the messages and the tool definitions',
    )
  },
)

t.test('chat: which tools, by the documented rule', async (t) => {
  const callsOf = async (value: Record<string, unknown>): Promise<string[]> => {
    const body = await json<OpenAI.ChatCompletion>(await backend.send(chat(value)))
    return (body.choices[0]?.message.tool_calls ?? []).map(
      (c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.name,
    )
  }
  const both = [{ role: 'user', content: 'Call get_time and get_weather, please.' }]
  t.same(
    await callsOf({ messages: both, tools: [weather, time] }),
    ['get_weather', 'get_time'],
    'tools the user names are called together, in the order offered',
  )
  t.same(
    await callsOf({ messages: both, tools: [weather, time], parallel_tool_calls: false }),
    ['get_weather'],
    'parallel_tool_calls false: one',
  )
  t.same(await callsOf({ messages: [{ role: 'user', content: 'Use get_time.' }], tools: [weather, time] }), [
    'get_time',
  ])
  t.same(
    await callsOf({ messages: [{ role: 'user', content: 'Use get_timer.' }], tools: [weather, time] }),
    ['get_weather'],
    'a longer word is not the name',
  )
  t.same(
    await callsOf({
      messages: ask,
      tools: [weather, time],
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    }),
    ['get_time'],
    'a named function',
  )
  t.same(
    await callsOf({
      messages: ask,
      tools: [weather, time],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'get_time' } }] },
      },
    }),
    ['get_time'],
    'allowed_tools narrows the set',
  )
  t.same(await callsOf({ messages: ask, tools: [weather], tool_choice: 'none' }), [], 'none: text')
  t.same(
    await callsOf({ messages: ask, tools: [{ type: 'custom', custom: { name: 'grep' } }, weather] }),
    ['get_weather'],
    'other kinds of tool are never called',
  )

  const toolResult = [
    ...ask,
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 12}' },
  ]
  const after = await json<OpenAI.ChatCompletion>(await backend.send(chat({ messages: toolResult, tools: [weather] })))
  t.equal(after.choices[0]?.finish_reason, 'stop', 'after a tool result, auto answers in text')
  t.match(after.choices[0]?.message.content, /mock backend/)
  t.notOk(after.choices[0]?.message.tool_calls, 'and calls nothing')
  t.same(
    await callsOf({ messages: toolResult, tools: [weather], tool_choice: 'required' }),
    ['get_weather'],
    'required calls again',
  )
})

t.test(
  'chat: a cut reply says length; a whole one says tool_calls; n choices each call with their own ids',
  async (t) => {
    const whole = await json<OpenAI.ChatCompletion>(
      await backend.send(chat({ messages: ask, tools: [weather], n: 2, max_tokens: 500 })),
    )
    t.same(
      whole.choices.map((c) => c.finish_reason),
      ['tool_calls', 'tool_calls'],
      'a generous limit does not cut JSON',
    )
    const ids = whole.choices.map((c) => c.message.tool_calls?.[0]?.id)
    t.equal(new Set(ids).size, 2)
    const cut = await json<OpenAI.ChatCompletion>(
      await backend.send(chat({ messages: ask, tools: [weather], max_tokens: 3 })),
    )
    t.equal(cut.choices[0]?.finish_reason, 'length')
    const args = (cut.choices[0]?.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall).function
      .arguments
    t.ok('{"city":"sample city","unit":"c"}'.startsWith(args) && args.length > 0, `cut arguments are a prefix: ${args}`)
    t.equal(cut.usage?.completion_tokens, await countTextTokens(args))
    t.ok((cut.usage?.completion_tokens ?? 99) <= 3)
  },
)

t.test(
  'chat stream: the call opens with index, id, type and name; arguments follow in pieces; finish tool_calls',
  async (t) => {
    const chunks = await frames<OpenAI.ChatCompletionChunk>(
      await backend.send(
        chat({
          messages: [{ role: 'user', content: 'get_weather and get_time' }],
          tools: [weather, time],
          stream: true,
          stream_options: { include_usage: true },
        }),
      ),
    )
    const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta))
    t.equal(deltas[0]?.role, 'assistant')
    const toolDeltas = deltas.flatMap((d) => d.tool_calls ?? [])
    const openings = toolDeltas.filter((d) => d.id !== undefined)
    t.same(
      openings.map((d) => [d.index, d.type, d.function?.name, d.function?.arguments]),
      [
        [0, 'function', 'get_weather', ''],
        [1, 'function', 'get_time', ''],
      ],
    )
    t.ok(
      toolDeltas.filter((d) => d.id === undefined).every((d) => d.function?.name === undefined && d.type === undefined),
      'later deltas carry only arguments',
    )
    const args = [0, 1].map((i) =>
      toolDeltas
        .filter((d) => d.index === i)
        .map((d) => d.function?.arguments ?? '')
        .join(''),
    )
    t.same(
      args.map((a) => JSON.parse(a) as unknown),
      [{ city: 'sample city', unit: 'c' }, { zone: 'sample zone' }],
    )
    t.ok(toolDeltas.length > 6, 'the arguments come in several pieces')
    const finishes = chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).filter((f) => f !== null)
    t.same(finishes, ['tool_calls'])
    const usage = chunks.at(-1)?.usage
    t.equal(usage?.completion_tokens, (await countTextTokens(args[0]!)) + (await countTextTokens(args[1]!)))
  },
)

t.test('chat: legacy functions get a function_call, plain and streamed', async (t) => {
  const functions = [weather.function]
  const body = await json<OpenAI.ChatCompletion>(await backend.send(chat({ messages: ask, functions })))
  t.equal(body.choices[0]?.finish_reason, 'function_call')
  t.same(body.choices[0]?.message.function_call, {
    name: 'get_weather',
    arguments: '{"city":"sample city","unit":"c"}',
  })
  const chunks = await frames<OpenAI.ChatCompletionChunk>(
    await backend.send(chat({ messages: ask, functions, function_call: { name: 'get_weather' }, stream: true })),
  )
  const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta))
  t.equal(deltas.find((d) => d.function_call?.name !== undefined)?.function_call?.name, 'get_weather')
  t.equal(deltas.map((d) => d.function_call?.arguments ?? '').join(''), '{"city":"sample city","unit":"c"}')
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'function_call')
  const none = await json<OpenAI.ChatCompletion>(
    await backend.send(chat({ messages: ask, functions, function_call: 'none' })),
  )
  t.equal(none.choices[0]?.finish_reason, 'stop')
})

t.test('chat: response formats', async (t) => {
  const schema = {
    type: 'object',
    properties: { answer: { type: 'string' }, score: { type: 'integer', minimum: 1, maximum: 5 } },
    required: ['answer', 'score'],
    additionalProperties: false,
  }
  const body = await json<OpenAI.ChatCompletion>(
    await backend.send(
      chat({
        messages: ask,
        response_format: { type: 'json_schema', json_schema: { name: 'rating', schema, strict: true } },
      }),
    ),
  )
  t.same(JSON.parse(body.choices[0]?.message.content ?? ''), { answer: 'sample answer', score: 1 })
  t.equal(body.choices[0]?.finish_reason, 'stop')
  t.equal(body.usage?.completion_tokens, await countTextTokens(body.choices[0]?.message.content ?? ''))

  const object = await json<OpenAI.ChatCompletion>(
    await backend.send(chat({ messages: ask, response_format: { type: 'json_object' } })),
  )
  const parsed = JSON.parse(object.choices[0]?.message.content ?? '') as { reply: string }
  t.match(parsed.reply, /^This is Tollgate's mock backend/, 'json_object: the prose reply, inside an object')

  const text = await json<OpenAI.ChatCompletion>(
    await backend.send(chat({ messages: ask, response_format: { type: 'text' } })),
  )
  t.match(text.choices[0]?.message.content, /^This is Tollgate's mock/)

  const cut = await json<OpenAI.ChatCompletion>(
    await backend.send(
      chat({
        messages: ask,
        max_completion_tokens: 4,
        response_format: { type: 'json_schema', json_schema: { name: 'r', schema } },
      }),
    ),
  )
  t.equal(cut.choices[0]?.finish_reason, 'length', 'JSON cut by the limit says so')
  t.throws(() => JSON.parse(cut.choices[0]?.message.content ?? ''), 'and is not whole')

  const streamed = await frames<OpenAI.ChatCompletionChunk>(
    await backend.send(
      chat({
        messages: ask,
        stream: true,
        response_format: { type: 'json_schema', json_schema: { name: 'r', schema } },
      }),
    ),
  )
  t.equal(
    streamed.map((c) => c.choices[0]?.delta.content ?? '').join(''),
    body.choices[0]?.message.content,
    'streamed JSON adds up',
  )
  t.equal(streamed.at(-1)?.choices[0]?.finish_reason, 'stop')
})

t.test('responses: function_call items, plain and streamed, and text after a function_call_output', async (t) => {
  const tools = [
    { type: 'web_search' },
    { type: 'function', name: 'get_weather', parameters: weather.function.parameters, strict: true },
  ]
  const res = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'Weather in Paris?', tools })),
  )
  t.equal(res.status, 'completed')
  t.equal(res.output.length, 1)
  const item = res.output[0] as OpenAI.Responses.ResponseFunctionToolCall
  t.equal(item.type, 'function_call')
  t.match(item.id, /^fc_/)
  t.match(item.call_id, /^call_/)
  t.equal(item.name, 'get_weather')
  t.equal(item.status, 'completed')
  t.same(JSON.parse(item.arguments), { city: 'sample city', unit: 'c' })
  t.equal(res.usage?.output_tokens, await countTextTokens(item.arguments))

  const events = await frames<OpenAI.Responses.ResponseStreamEvent>(
    await backend.send(responses({ input: 'Weather in Paris?', tools, stream: true })),
  )
  const types = events.map((e) => e.type)
  t.same(
    types.filter((type) => type !== 'response.function_call_arguments.delta'),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ],
  )
  const added = events[2] as OpenAI.Responses.ResponseOutputItemAddedEvent
  const addedItem = added.item as OpenAI.Responses.ResponseFunctionToolCall
  t.same(
    [addedItem.type, addedItem.name, addedItem.arguments, addedItem.status],
    ['function_call', 'get_weather', '', 'in_progress'],
  )
  const deltas = events.filter(
    (e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent =>
      e.type === 'response.function_call_arguments.delta',
  )
  t.ok(deltas.length > 3 && deltas.every((d) => d.item_id === addedItem.id && d.output_index === 0))
  const done = events.find(
    (e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent =>
      e.type === 'response.function_call_arguments.done',
  )
  t.equal(done?.arguments, deltas.map((d) => d.delta).join(''))
  t.same(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
  )

  const after = await json<OpenAI.Responses.Response>(
    await backend.send(
      responses({
        tools,
        input: [
          { role: 'user', content: 'Weather in Paris?' },
          { type: 'function_call', call_id: item.call_id, name: 'get_weather', arguments: item.arguments },
          { type: 'function_call_output', call_id: item.call_id, output: '{"temperature": 14}' },
        ],
      }),
    ),
  )
  t.equal((after.output[0] as OpenAI.Responses.ResponseOutputMessage).type, 'message', 'after the output, a message')
  const named = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'x', tools, tool_choice: { type: 'function', name: 'get_weather' } })),
  )
  t.equal((named.output[0] as OpenAI.Responses.ResponseFunctionToolCall).name, 'get_weather')
  const hosted = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'x', tools, tool_choice: { type: 'web_search' } })),
  )
  t.equal(hosted.output[0]?.type, 'message', 'a hosted tool choice: the mock has no web to search, so it answers')
})

t.test('responses: text.format json_schema, and max_output_tokens makes the response incomplete', async (t) => {
  const format = {
    type: 'json_schema',
    name: 'city',
    schema: {
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
      additionalProperties: false,
    },
    strict: true,
  }
  const res = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'A city?', text: { format } })),
  )
  const part = (res.output[0] as OpenAI.Responses.ResponseOutputMessage)
    .content[0] as OpenAI.Responses.ResponseOutputText
  t.same(JSON.parse(part.text), { name: 'sample name' })
  t.same(res.text, { format }, 'the format is echoed')
  t.equal(res.status, 'completed')

  const cut = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'A city?', text: { format }, max_output_tokens: 2 })),
  )
  t.equal(cut.status, 'incomplete')
  t.same(cut.incomplete_details, { reason: 'max_output_tokens' })
  t.equal((cut.output[0] as OpenAI.Responses.ResponseOutputMessage).status, 'incomplete')
  t.equal(cut.completed_at, null)

  const prose = await json<OpenAI.Responses.Response>(
    await backend.send(responses({ input: 'Go on.', max_output_tokens: 16 })),
  )
  t.equal(prose.status, 'incomplete', 'prose fills the limit, so the limit ended it (as chat says "length")')
  t.equal(prose.usage?.output_tokens, 16)
  const events = await frames<OpenAI.Responses.ResponseStreamEvent>(
    await backend.send(responses({ input: 'Go on.', max_output_tokens: 16, stream: true })),
  )
  const last = events.at(-1) as OpenAI.Responses.ResponseIncompleteEvent
  t.equal(last.type, 'response.incomplete')
  t.same(last.response.incomplete_details, { reason: 'max_output_tokens' })
})

t.test("refusals in OpenAI's shape", async (t) => {
  const cases: Array<[UpstreamRequest, string]> = [
    [
      chat({ messages: ask, tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }),
      'tool_choice',
    ],
    [
      chat({ messages: ask, tools: [{ type: 'function', function: { description: 'no name' } }] }),
      'tools[0].function.name',
    ],
    [chat({ messages: ask, tools: { weather } }), 'tools'],
    [chat({ messages: ask, tools: [weather], tool_choice: 'sometimes' }), 'tool_choice'],
    [chat({ messages: ask, response_format: { type: 'yaml' } }), 'response_format.type'],
    [chat({ messages: ask, response_format: { type: 'json_schema' } }), 'response_format.json_schema'],
    [chat({ messages: ask, functions: [weather.function], function_call: { name: 'nope' } }), 'function_call'],
    [responses({ input: 'x', tools: [{ type: 'function', parameters: {} }] }), 'tools[0].name'],
    [responses({ input: 'x', text: { format: { type: 'xml' } } }), 'text.format.type'],
  ]
  for (const [request, param] of cases) {
    const error = await json<OpenAIErrorBody>(await backend.send(request), 400)
    t.equal(error.error.param, param, param)
    t.equal(error.error.type, 'invalid_request_error')
  }
})

t.test('a hostile schema in a tool: answered, once for all n choices, within the pattern budget', async (t) => {
  const trap = {
    type: 'function',
    function: {
      name: 'trap',
      parameters: {
        type: 'object',
        properties: { s: { type: 'string', pattern: '^(x+x+)+y$', minLength: 40 } },
        required: ['s'],
      },
    },
  }
  const started = performance.now()
  const body = await json<OpenAI.ChatCompletion>(await backend.send(chat({ messages: ask, tools: [trap], n: 128 })))
  const ms = performance.now() - started
  t.equal(body.choices.length, 128)
  t.ok(body.choices.every((c) => c.finish_reason === 'tool_calls'))
  // 128 choices share one set of arguments, so one pattern budget (100 ms) is spent, not 128.
  t.ok(ms < 3000, `${ms.toFixed(0)} ms`)
})

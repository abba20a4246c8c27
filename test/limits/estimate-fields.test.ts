// The input estimate covers the whole prompt, whatever field the text is in: for each field
// an attacker could fill (tools, functions, response_format, tool_choice, prediction,
// metadata, one the gateway has never heard of, tool calls inside messages, Responses
// items and output schemas), adding it raises the reservation by at least the tokens the
// upstream would bill for it and by not much more. Plain settings and the model's name
// cost nothing. The mock backend bills tool definitions and schemas as input, and the
// gateway's own count (for a call whose upstream reports no usage) agrees with it.
import t from 'tap'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import type { UpstreamRequest } from '../../src/backends/port.ts'
import type { Endpoint } from '../../src/config/schema.ts'
import { estimateJsonTokens } from '../../src/tokenizer/estimate-json.ts'
import { countPromptTokens, estimateUsage } from '../../src/limits/estimate.ts'
import { loadEncoder } from '../../src/tokenizer/tokens.ts'
import { client, json } from '../backends/mock-helpers.ts'
import { functionTools, jsonSchemaFormat, metadataOf, predictionOf, responsesTools } from '../helpers/prompt-fields.ts'

const encoder = await loadEncoder()
const count = (value: unknown): number => encoder.count(JSON.stringify(value))
const options = { defaultMaxTokens: 16 }
const inputOf = (endpoint: Endpoint, body: Record<string, unknown>): number =>
  estimateUsage(endpoint, body, options).inputTokens

/** Tolerance above the upstream's count: the JSON weights sit at about 1.1–1.5× on ordinary text. */
const MOST = 1.7

const CHAT = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }
const tools = functionTools(40)
const CHAT_FIELDS: Record<string, unknown> = {
  tools,
  functions: tools.map((tool) => tool.function),
  response_format: jsonSchemaFormat(),
  tool_choice: { type: 'function', function: { name: 'lookup_order_status_7' } },
  function_call: { name: 'lookup_order_status_7' },
  prediction: predictionOf(8000),
  metadata: metadataOf(),
  // A field the gateway does not know; an upstream's extension may render it into the prompt.
  documents: [{ title: 'Returns policy', text: 'Items may be returned within thirty days of delivery. '.repeat(60) }],
  user: 'customer-'.repeat(200),
}

t.test(
  'chat completions: each field raises the estimate by at least its tokens, and by at most 1.7× them',
  async (t) => {
    const base = inputOf('chat.completions', CHAT)
    for (const [field, value] of Object.entries(CHAT_FIELDS)) {
      const added = inputOf('chat.completions', { ...CHAT, [field]: value }) - base
      const tokens = count(value)
      t.ok(added >= tokens, `${field}: +${added} estimated for ${tokens} tokens`)
      t.ok(added <= tokens * MOST, `${field}: not inflated (${(added / tokens).toFixed(2)}×)`)
    }
  },
)

t.test('tool calls and their results inside the messages are estimated too', async (t) => {
  const call = {
    id: 'call_1',
    type: 'function',
    function: {
      name: 'lookup_order_status',
      arguments: JSON.stringify({ order: 'A-1234', note: 'please check the courier and the warehouse '.repeat(40) }),
    },
  }
  const messages = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_1', content: 'Delivered yesterday. '.repeat(50) },
  ]
  const withCalls = inputOf('chat.completions', { ...CHAT, messages })
  const without = inputOf('chat.completions', {
    ...CHAT,
    messages: [messages[0], { role: 'assistant', content: null }, messages[2]],
  })
  t.ok(
    withCalls - without >= count([call]),
    `an assistant's tool_calls: +${withCalls - without} for ${count([call])} tokens`,
  )
  t.ok(
    withCalls >= (await countPromptTokens('chat.completions', { ...CHAT, messages })),
    'and the estimate is not below the count',
  )
})

t.test(
  'Responses API: tools, the output schema under text.format, function call items and their outputs',
  async (t) => {
    const body = { model: 'gpt-4o-mini', input: 'hi', max_output_tokens: 16 }
    const base = inputOf('responses', body)
    const fields: Record<string, unknown> = {
      tools: responsesTools(40),
      text: { format: { type: 'json_schema', ...jsonSchemaFormat().json_schema } },
      tool_choice: { type: 'function', name: 'lookup_order_status_3' },
      metadata: metadataOf(),
    }
    for (const [field, value] of Object.entries(fields)) {
      const added = inputOf('responses', { ...body, [field]: value }) - base
      t.ok(added >= count(value) && added <= count(value) * MOST, `${field}: +${added} for ${count(value)} tokens`)
    }
    const call = {
      type: 'function_call',
      call_id: 'c1',
      name: 'lookup',
      arguments: JSON.stringify({
        order_id: 'A-1234',
        question: 'Where is my parcel, and when will the courier arrive? '.repeat(40),
      }),
    }
    const result = {
      type: 'function_call_output',
      call_id: 'c1',
      output: 'The parcel left the warehouse yesterday and should arrive tomorrow morning. '.repeat(40),
    }
    const items = [{ role: 'user', content: 'hi' }, call, result]
    const withCall = inputOf('responses', { ...body, input: items.slice(0, 2) })
    const withBoth = inputOf('responses', { ...body, input: items })
    const alone = inputOf('responses', { ...body, input: items.slice(0, 1) })
    t.ok(
      withCall - alone >= encoder.count(call.arguments),
      `a function call's arguments: +${withCall - alone} for ${encoder.count(call.arguments)} tokens`,
    )
    // Its output is prose, estimated as prose in messages is (within about 10 %).
    t.ok(
      withBoth - withCall >= 0.9 * encoder.count(result.output),
      `a function call's output: +${withBoth - withCall} for ${encoder.count(result.output)} tokens`,
    )
    const counted = await countPromptTokens('responses', { ...body, input: items })
    t.ok(
      counted > encoder.count(call.arguments) + encoder.count(result.output),
      `the count sees both (${counted} tokens)`,
    )
    t.ok(withBoth >= counted, `the estimate (${withBoth}) is not below the count (${counted})`)
  },
)

t.test('completions and embeddings: any other text-bearing field counts', async (t) => {
  const suffix = 'return value // the end of the function\n'.repeat(100)
  const base = inputOf('completions', { model: 'm', prompt: 'hi', max_tokens: 4 })
  t.ok(
    inputOf('completions', { model: 'm', prompt: 'hi', max_tokens: 4, suffix }) - base >= encoder.count(suffix),
    'a suffix',
  )
  const meta = metadataOf()
  const embed = inputOf('embeddings', { model: 'e', input: 'hi' })
  t.ok(
    inputOf('embeddings', { model: 'e', input: 'hi', metadata: meta }) - embed >= count(meta),
    'metadata on an embedding',
  )
})

t.test('the model, plain settings and the stream options cost nothing', async (t) => {
  const settings = {
    temperature: 0.2,
    top_p: 1,
    n: 1,
    seed: 7,
    stream: true,
    stream_options: { include_usage: true },
    parallel_tool_calls: false,
    logprobs: null,
    presence_penalty: 0,
  }
  t.equal(inputOf('chat.completions', { ...CHAT, ...settings }), inputOf('chat.completions', CHAT))
  t.equal(inputOf('chat.completions', { ...CHAT, model: 'x'.repeat(200) }), inputOf('chat.completions', CHAT))
})

t.test('the JSON estimate is linear: 4 MB of tool schemas in well under a second', async (t) => {
  const big = functionTools(7_000)
  const bytes = JSON.stringify(big).length
  const started = performance.now()
  const tokens = inputOf('chat.completions', { ...CHAT, tools: big })
  const ms = performance.now() - started
  t.ok(bytes > 4_000_000, `${(bytes / 1e6).toFixed(1)} MB of tools`)
  t.ok(tokens > bytes / 5, `${tokens} tokens estimated`)
  t.ok(ms < 1000, `in ${ms.toFixed(1)} ms`)
  t.equal(estimateJsonTokens(undefined), 0, 'what JSON leaves out costs nothing')
})

t.test(
  'the mock bills tool definitions and schemas as input, as upstreams do, and the gateway counts the same',
  async (t) => {
    const backend = createMockBackend('mock', {
      type: 'mock',
      tokensPerSecond: 1_000_000,
      defaultCompletionTokens: 8,
      fineTuneStepMs: 50,
    })
    const send = async (
      endpoint: Endpoint,
      path: string,
      value: Record<string, unknown>,
    ): Promise<Record<string, number>> => {
      const request: UpstreamRequest = {
        endpoint,
        method: 'POST',
        path,
        model: null,
        body: { kind: 'json', value },
        requestId: 'r',
        signal: new AbortController().signal,
        client,
      }
      return (await json<{ usage: Record<string, number> }>(await backend.send(request))).usage
    }
    const chatBody = { ...CHAT, tools, response_format: jsonSchemaFormat() }
    const plain = (await send('chat.completions', '/chat/completions', CHAT)).prompt_tokens ?? 0
    const withTools = (await send('chat.completions', '/chat/completions', chatBody)).prompt_tokens ?? 0
    // Counted in pieces, as every count is: exact on ordinary text, give or take a token where a piece ends.
    const definitions = count(tools) + count(jsonSchemaFormat())
    t.ok(
      Math.abs(withTools - plain - definitions) <= 3,
      `chat: the tools and the schema are billed (${plain} → ${withTools}; ${definitions} tokens of definitions)`,
    )
    t.equal(
      withTools,
      await countPromptTokens('chat.completions', chatBody),
      "the gateway's count agrees with the mock",
    )
    t.ok(inputOf('chat.completions', chatBody) >= withTools, 'and the estimate is not below it')

    const responsesBody = {
      model: 'gpt-4o-mini',
      input: 'hi',
      instructions: 'Be brief.',
      tools: responsesTools(20),
      max_output_tokens: 16,
    }
    const billed = (await send('responses', '/responses', responsesBody)).input_tokens ?? 0
    t.equal(
      billed,
      await countPromptTokens('responses', responsesBody),
      `responses: the gateway's count agrees with the mock (${billed})`,
    )
    t.ok(inputOf('responses', responsesBody) >= billed, 'and the estimate is not below it')
    await backend.close()
  },
)

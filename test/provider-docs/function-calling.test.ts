// The provider's own function-calling and structured-output examples (telekom/
// aifoundation-docs, src/content/docs/v1/guides/), run against Tollgate as `npm start`
// starts it: the default configuration, whose models are served by the built-in mock.
// Each example is a call written here after the page named beside it (the Python ones in
// the official JS SDK, call for call), then checked the way its reader would rely on it:
// the arguments parse and fit the function's schema, the JSON fits the format's schema.
// After them, the SDK's own helpers the pages lead to: parse with zod, streaming
// accumulation, and the runTools agent loop.
import { Ajv, type AnySchema } from 'ajv'
import OpenAI from 'openai'
import { zodFunction, zodResponseFormat, zodResponsesFunction, zodTextFormat } from 'openai/helpers/zod'
import type { ChatCompletionMessageFunctionToolCall, ChatCompletionTool } from 'openai/resources/chat/completions'
import t, { type Test } from 'tap'
import { z } from 'zod'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

let gw: RunningTollgate
let client: OpenAI

t.before(async () => {
  gw = await startTollgate()
  const { key } = await gw.createKey({ name: 'provider-docs', tier: 'Standard4000' })
  client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
})
t.teardown(async () => {
  await gw.stop()
})

const ajv = new Ajv({ strict: false })
function fits(t: Test, schema: unknown, value: unknown, what: string): void {
  const validate = ajv.compile(schema as AnySchema)
  t.ok(validate(value), `${what} fits its schema: ${JSON.stringify(value)} ${JSON.stringify(validate.errors ?? [])}`)
}

// function-calling.mdx, "Basic Example": the weather tool with a location and a unit.
const currentWeather = {
  type: 'function',
  function: {
    name: 'get_current_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
        format: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'The temperature unit to use.' },
      },
      required: ['location', 'format'],
    },
  },
} satisfies ChatCompletionTool

t.test(
  'function-calling.mdx, Basic Example: chat.completions.create with tools answers with a tool call',
  async (t) => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'Do not guess function arguments; ask when a request is ambiguous.' },
      { role: 'user', content: 'How is the weather in Hamburg today?' },
    ]
    const response = await client.chat.completions.create({ model: 'gpt-4.1', messages, tools: [currentWeather] })
    const message = response.choices[0]!.message
    // The page prints the message: no content, one tool call with an id, a type and a function.
    t.equal(message.content, null)
    t.equal(message.role, 'assistant')
    t.equal(response.choices[0]!.finish_reason, 'tool_calls')
    const call = message.tool_calls?.[0] as ChatCompletionMessageFunctionToolCall
    t.match(call.id, /^call_[A-Za-z0-9]+$/)
    t.equal(call.type, 'function')
    t.equal(call.function.name, 'get_current_weather')
    const args = JSON.parse(call.function.arguments) as unknown
    fits(t, currentWeather.function.parameters, args, 'the arguments')
    t.equal(
      response.usage?.completion_tokens,
      await countTextTokens(call.function.arguments),
      'the arguments are what is billed as completion',
    )

    // Beyond the page, the step every reader takes next: send the tool's result back; the
    // model answers in text.
    const followUp = await client.chat.completions.create({
      model: 'gpt-4.1',
      tools: [currentWeather],
      messages: [
        ...messages,
        message,
        { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 11, unit: 'celsius' }) },
      ],
    })
    t.equal(followUp.choices[0]!.finish_reason, 'stop')
    t.type(followUp.choices[0]!.message.content, 'string')
    t.notOk(followUp.choices[0]!.message.tool_calls)
  },
)

// function-calling.mdx, "Function Calling with Responses API": a flat function tool.
const responsesWeather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'Get current temperature for a given location.',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string', description: 'City and country e.g. Bogota, Colombia' } },
    required: ['location'],
    additionalProperties: false,
  },
  strict: null,
}

t.test(
  'function-calling.mdx, Responses API: responses.create with a function tool answers with a function_call item',
  async (t) => {
    const response = await client.responses.create({
      model: 'gpt-4.1',
      input: [{ role: 'user', content: 'How is the weather in Paris today?' }],
      tools: [responsesWeather],
    })
    t.equal(response.status, 'completed')
    const item = response.output[0] as OpenAI.Responses.ResponseFunctionToolCall
    t.equal(item.type, 'function_call')
    t.equal(item.name, 'get_weather')
    t.match(item.call_id, /^call_/)
    fits(t, responsesWeather.parameters, JSON.parse(item.arguments), 'the arguments')

    // Beyond the page: the function's output goes back as an input item; the reply is text.
    const followUp = await client.responses.create({
      model: 'gpt-4.1',
      tools: [responsesWeather],
      input: [
        { role: 'user', content: 'How is the weather in Paris today?' },
        item,
        { type: 'function_call_output', call_id: item.call_id, output: '{"temperature_c": 17}' },
      ],
    })
    t.type(followUp.output_text, 'string')
    t.ok(followUp.output_text.length > 0)
  },
)

// function-calling.mdx, "Structured Output (JSON Schema)": product details out of a description.
const productSchema = {
  type: 'object',
  properties: {
    product_name: { type: 'string' },
    features: { type: 'array', items: { type: 'string' } },
    colors: { type: 'array', items: { type: 'string' } },
    pricing: {
      type: 'object',
      properties: { regular_price: { type: 'number' }, sale_price: { type: 'number' }, currency: { type: 'string' } },
      required: ['regular_price', 'sale_price', 'currency'],
      additionalProperties: false,
    },
  },
  required: ['product_name', 'features', 'colors', 'pricing'],
  additionalProperties: false,
}
const description =
  'A padded laptop backpack for machines up to 15.6 inches, in navy, black and grey; $79.99, now $64.99.'

t.test('function-calling.mdx, Structured Output: text.format json_schema gives JSON of that schema', async (t) => {
  const response = await client.responses.create({
    model: 'gpt-4.1',
    input: `Pull the product details out of this text: ${description}`,
    text: { format: { type: 'json_schema', name: 'product_details', schema: productSchema, strict: true } },
  })
  // The page reads output[0].content[0].text and json.loads it.
  const message = response.output[0] as OpenAI.Responses.ResponseOutputMessage
  const text = (message.content[0] as OpenAI.Responses.ResponseOutputText).text
  const product = JSON.parse(text) as unknown
  fits(t, productSchema, product, 'the product')
  t.equal(response.output_text, text)
  t.equal(response.usage?.output_tokens, await countTextTokens(text))
})

t.test("streaming.mdx, Streaming with Function Calling: the page's accumulation loop rebuilds the call", async (t) => {
  const tools: ChatCompletionTool[] = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Get current weather for a location',
        parameters: {
          type: 'object',
          properties: { location: { type: 'string', description: 'City name' } },
          required: ['location'],
        },
      },
    },
  ]
  const stream = await client.chat.completions.create({
    model: 'gpt-4.1',
    messages: [{ role: 'user', content: 'How is the weather in Berlin?' }],
    tools,
    stream: true,
  })
  // The page's loop: open an entry on a delta with an id, then append argument fragments by index.
  const calls = new Map<number, { id: string; name: string; arguments: string }>()
  let chunks = 0
  let finish: string | null = null
  for await (const chunk of stream) {
    chunks++
    const choice = chunk.choices[0]
    if (choice === undefined) continue
    finish = choice.finish_reason ?? finish
    for (const tc of choice.delta.tool_calls ?? []) {
      if (tc.id) calls.set(tc.index, { id: tc.id, name: tc.function?.name ?? '', arguments: '' })
      const entry = calls.get(tc.index)
      if (entry && tc.function?.arguments) entry.arguments += tc.function.arguments
    }
  }
  t.equal(calls.size, 1)
  const call = calls.get(0)!
  t.equal(call.name, 'get_weather')
  t.match(call.id, /^call_/)
  fits(
    t,
    tools[0]!.type === 'function' ? tools[0]!.function.parameters : {},
    JSON.parse(call.arguments),
    'the accumulated arguments',
  )
  t.equal(finish, 'tool_calls')
  t.ok(chunks > 4, `the arguments arrive across chunks (${chunks} chunks)`)
})

// The SDK helpers: the docs' product schema written in zod, as SDK users write it.
const Product = z.object({
  product_name: z.string(),
  features: z.array(z.string()),
  colors: z.array(z.string()),
  pricing: z.object({ regular_price: z.number(), sale_price: z.number(), currency: z.string() }),
})
const WeatherArgs = z.object({ location: z.string(), format: z.enum(['celsius', 'fahrenheit']) })

t.test('SDK: chat.completions.parse with zodResponseFormat and zodFunction', async (t) => {
  const completion = await client.chat.completions.parse({
    model: 'gpt-4.1',
    messages: [{ role: 'user', content: `Pull the product details out of this text: ${description}` }],
    response_format: zodResponseFormat(Product, 'product_details'),
  })
  const parsed = completion.choices[0]!.message.parsed
  t.ok(parsed, 'parsed content')
  t.same(Product.parse(parsed), parsed)

  const withTool = await client.chat.completions.parse({
    model: 'gpt-4.1',
    messages: [{ role: 'user', content: 'How is the weather in Hamburg?' }],
    tools: [zodFunction({ name: 'get_current_weather', parameters: WeatherArgs })],
  })
  const call = withTool.choices[0]!.message.tool_calls?.[0]
  t.equal(call?.type, 'function')
  if (call?.type === 'function')
    t.same(
      WeatherArgs.parse(call.function.parsed_arguments),
      call.function.parsed_arguments,
      'strict tool arguments parse with zod',
    )

  // A limit too small for the JSON: the reply is cut, says "length", and the SDK refuses to parse it.
  await t.rejects(
    client.chat.completions.parse({
      model: 'gpt-4.1',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'Product details, please.' }],
      response_format: zodResponseFormat(Product, 'product_details'),
    }),
    { message: /length limit was reached/ },
    "the SDK's LengthFinishReasonError",
  )
})

t.test('SDK: chat.completions.stream accumulates tool calls and parsed content', async (t) => {
  const stream = client.chat.completions.stream({
    model: 'gpt-4.1',
    messages: [{ role: 'user', content: 'How is the weather in Hamburg?' }],
    tools: [zodFunction({ name: 'get_current_weather', parameters: WeatherArgs })],
  })
  const done: unknown[] = []
  stream.on('tool_calls.function.arguments.done', (event) => done.push(event.parsed_arguments))
  const final = await stream.finalChatCompletion()
  const call = final.choices[0]!.message.tool_calls?.[0]
  t.equal(final.choices[0]!.finish_reason, 'tool_calls')
  t.equal(call?.type, 'function')
  if (call?.type === 'function') {
    t.same(done, [call.function.parsed_arguments], 'the arguments.done event carries the parsed arguments')
    t.ok(WeatherArgs.safeParse(call.function.parsed_arguments).success)
  }

  const json = client.chat.completions.stream({
    model: 'gpt-4.1',
    messages: [{ role: 'user', content: description }],
    response_format: zodResponseFormat(Product, 'product_details'),
  })
  const finalJson = await json.finalChatCompletion()
  t.ok(Product.safeParse(finalJson.choices[0]!.message.parsed).success, 'streamed structured output parses')
})

t.test('SDK: runTools runs the agent loop to a text answer, plain and streamed', async (t) => {
  const run = async (stream: boolean): Promise<void> => {
    const seen: unknown[] = []
    const tool = zodFunction({
      name: 'get_current_weather',
      parameters: WeatherArgs,
      function: (args) => {
        seen.push(args)
        return { temperature: 9, unit: args.format }
      },
    })
    const body = {
      model: 'gpt-4.1',
      messages: [{ role: 'user' as const, content: 'How is the weather in Hamburg?' }],
      tools: [tool],
    }
    const runner = stream
      ? client.chat.completions.runTools({ ...body, stream: true })
      : client.chat.completions.runTools(body)
    const content = await runner.finalContent()
    t.type(content, 'string', `stream ${stream}: a text answer at the end`)
    t.equal(seen.length, 1, `stream ${stream}: the function ran once, on parsed arguments`)
    t.ok(WeatherArgs.safeParse(seen[0]).success)
    t.same(
      runner.messages.map((m) => m.role),
      ['user', 'assistant', 'tool', 'assistant'],
    )
  }
  await run(false)
  await run(true)
})

t.test('SDK: responses.parse with zodTextFormat and zodResponsesFunction; responses.stream with a tool', async (t) => {
  const parsed = await client.responses.parse({
    model: 'gpt-4.1',
    input: `Pull the product details out of this text: ${description}`,
    text: { format: zodTextFormat(Product, 'product_details') },
  })
  t.ok(Product.safeParse(parsed.output_parsed).success, 'output_parsed fits the zod schema')

  const withTool = await client.responses.parse({
    model: 'gpt-4.1',
    input: 'How is the weather in Paris?',
    tools: [zodResponsesFunction({ name: 'get_weather', parameters: WeatherArgs })],
  })
  const item = withTool.output[0]
  t.equal(item?.type, 'function_call')
  if (item?.type === 'function_call')
    t.ok(WeatherArgs.safeParse(item.parsed_arguments).success, 'parsed_arguments fits')

  const stream = client.responses.stream({
    model: 'gpt-4.1',
    input: 'How is the weather in Paris?',
    tools: [responsesWeather],
  })
  const deltas: string[] = []
  stream.on('response.function_call_arguments.delta', (event) => deltas.push(event.delta))
  const final = await stream.finalResponse()
  const call = final.output[0] as OpenAI.Responses.ResponseFunctionToolCall
  t.equal(call.type, 'function_call')
  t.equal(deltas.join(''), call.arguments, 'the deltas add up to the final arguments')
  fits(t, responsesWeather.parameters, JSON.parse(call.arguments), 'the streamed arguments')

  const cut = await client.responses.create({ model: 'gpt-4.1', input: 'Write a long story.', max_output_tokens: 20 })
  t.equal(cut.status, 'incomplete', 'a reply cut by max_output_tokens is incomplete')
  t.equal(cut.incomplete_details?.reason, 'max_output_tokens')
})

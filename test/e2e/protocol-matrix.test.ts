// The protocol matrix on running gateways: every caller Tollgate speaks {openai SDK chat,
// openai SDK responses, @anthropic-ai/sdk messages} × every upstream it speaks {openai,
// anthropic, gemini, vertex, bedrock, mock} × {plain, stream, a tool's round trip, an image,
// structured output, thinking/reasoning, each error class}. Every cell either works, with
// the usage the caller saw equal to what the upstream's fake reported and to what the
// gateway metered, or is refused with the documented 400 that names what it refuses
// (docs/backends.md, "What each caller can ask of each upstream"). Which cells are
// refused is the table below (ROWS): anything not listed there must work.
//
// One gateway per upstream, each row's cells in parallel, each cell on a key of its own
// (so what is metered is the cell's) and its prompt tagged (so what the upstream received
// is found among the cells' requests). Each error class has a model of its own per caller,
// deployed on a fake that always answers that error, so one's cool-down leaves the rest
// alone. A new upstream is one more row: its fakes, its deployments, its refusals.
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts'
import { FAKE_AWS_CREDENTIALS, startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts'
import { FAKE_GEMINI_KEY, googleError, startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

type Caller = 'chat' | 'responses' | 'messages'
type Feature = 'plain' | 'stream' | 'tools' | 'image' | 'structured' | 'thinking'
type Fault = 400 | 401 | 429 | 500 | 529
type Cell = `${Caller}.${Feature}`

const CALLERS: readonly Caller[] = ['chat', 'responses', 'messages']
const FEATURES: readonly Feature[] = ['plain', 'stream', 'tools', 'image', 'structured', 'thinking']

interface Usage {
  readonly input: number
  readonly output: number
}

interface Deployment {
  readonly backend: string
  readonly model?: string
}

/** A row's upstream, started: how a gateway reaches it, and what it reports and received. */
interface Rig {
  readonly backends: Record<string, Record<string, unknown>>
  readonly env: Record<string, string>
  readonly deployment: Deployment
  /** A deployment whose upstream always answers the error, per error class its API has. */
  readonly faults: Partial<Record<Fault, Deployment>>
  /** The usage the fake reports for a reply of text or of a tool call; undefined: the reply's own (the mock counts). */
  reported?(reply: 'text' | 'tool'): Usage
  /** The upstream requests whose text holds `tag`; undefined: the upstream keeps no record (the mock). */
  received?(tag: string): readonly Record<string, unknown>[]
  /** The request asked the upstream, in its own API, for structured output. */
  asksFormat?(request: Record<string, unknown>): boolean
  /** The request asked the upstream, in its own API, to think. */
  asksThinking?(request: Record<string, unknown>): boolean
  close(): Promise<void>
}

interface Row {
  readonly name: string
  start(): Promise<Rig>
  /** The cells refused with a 400 (untranslatable_feature, or the upstream's own), and what its message names. */
  readonly refused: Partial<Record<Cell, RegExp>>
}

/** Each reply's cap; a call that thinks needs room beyond Anthropic's least thinking budget (1024). */
const CAP = 64
const THINKING_CAP = 2048

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
const CITY = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
}

const textOf = (request: Record<string, unknown>): string => JSON.stringify(request)

const fakeUpstreamRow: Row = {
  name: 'openai',
  async start() {
    const toolCall = { name: 'get_weather', arguments: '{"city":"Paris"}' }
    const fake = await startFakeUpstream({ toolCall })
    const faulty = new Map<Fault, FakeUpstream>()
    for (const status of [400, 401, 429, 500] as const)
      faulty.set(status, await startFakeUpstream({ failWith: status }))
    const words = (fake.options.replyText ?? 'Hello there, this is the fake upstream speaking.').match(/\s*\S+/g) ?? []
    return {
      backends: {
        fake: { type: 'openai', baseUrl: fake.url },
        ...Object.fromEntries([...faulty].map(([status, f]) => [`fault${status}`, { type: 'openai', baseUrl: f.url }])),
      },
      env: {},
      deployment: { backend: 'fake', model: 'fake-model' },
      faults: Object.fromEntries([...faulty.keys()].map((s) => [s, { backend: `fault${s}` }])),
      reported: (reply) => ({ input: 17, output: reply === 'tool' ? 6 : words.length }),
      received: (tag) =>
        fake.requests.map((r) => r.json as Record<string, unknown>).filter((r) => textOf(r).includes(tag)),
      asksFormat: (r) =>
        r.response_format !== undefined || (r.text as { format?: unknown } | undefined)?.format !== undefined,
      asksThinking: (r) => r.reasoning_effort !== undefined || r.reasoning !== undefined,
      close: async () => {
        await Promise.all([fake, ...faulty.values()].map((f) => f.close()))
      },
    }
  },
  refused: {
    // Anthropic's extended thinking is carried only to an upstream that speaks it.
    'messages.thinking': /thinking/,
  },
}

function anthropicRig(fake: FakeAnthropic, faulty: Map<Fault, FakeAnthropic>): Rig {
  const u = fake.options.usage
  const prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
  const backend = (f: FakeAnthropic): Record<string, unknown> => ({
    type: 'anthropic',
    baseUrl: f.url,
    apiKeyEnv: 'CLAUDE_KEY',
  })
  return {
    backends: {
      claude: backend(fake),
      ...Object.fromEntries([...faulty].map(([status, f]) => [`fault${status}`, backend(f)])),
    },
    env: { CLAUDE_KEY: fake.options.apiKey },
    deployment: { backend: 'claude', model: 'claude-sonnet-4-5-20250929' },
    faults: Object.fromEntries([...faulty.keys()].map((s) => [s, { backend: `fault${s}`, model: 'claude-sonnet-4' }])),
    reported: () => ({ input: prompt, output: u.output_tokens }),
    received: (tag) => fake.requests.map((r) => r.json).filter((r) => textOf(r).includes(tag)),
    asksFormat: (r) => (r.output_config as { format?: unknown } | undefined)?.format !== undefined,
    asksThinking: (r) => (r.thinking as { type?: unknown } | undefined)?.type === 'enabled',
    close: async () => {
      await Promise.all([fake, ...faulty.values()].map((f) => f.close()))
    },
  }
}

const ANTHROPIC_ERRORS: Record<Fault, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
}

const anthropicRow: Row = {
  name: 'anthropic',
  async start() {
    const fake = await startFakeAnthropic()
    const faulty = new Map<Fault, FakeAnthropic>()
    for (const status of [400, 401, 429, 500, 529] as const)
      faulty.set(
        status,
        await startFakeAnthropic({ failWith: { status, type: ANTHROPIC_ERRORS[status], retryAfter: '30' } }),
      )
    return anthropicRig(fake, faulty)
  },
  refused: {}, // every caller's way of asking to think is extended thinking here
}

const GOOGLE_ERRORS: Record<400 | 401 | 429 | 500, unknown> = {
  400: googleError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.'),
  401: googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.'),
  429: googleError(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota.', [
    { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '30s' },
  ]),
  500: googleError(500, 'INTERNAL', 'An internal error has occurred.'),
}

/** A Gemini row: the Gemini API by key, or Vertex AI by service account. */
function geminiRow(name: 'gemini' | 'vertex'): Row {
  return {
    name,
    async start() {
      const fake = await startFakeGemini()
      const faulty = new Map<Fault, FakeGemini>()
      for (const status of [400, 401, 429, 500] as const)
        faulty.set(status, await startFakeGemini({ failWith: { status, body: GOOGLE_ERRORS[status] } }))
      const backend = (f: FakeGemini, i: number): Record<string, unknown> =>
        name === 'gemini'
          ? { type: 'gemini', baseUrl: f.apiRoot, apiKeyEnv: 'GEMINI_KEY' }
          : {
              type: 'gemini',
              baseUrl: `${f.origin}/v1`,
              vertex: { project: 'fake-project', location: 'us-central1', credentialsEnv: `VERTEX_SA_${i}` },
            }
      const all = [fake, ...faulty.values()]
      const u = fake.options.usage
      return {
        backends: {
          google: backend(fake, 0),
          ...Object.fromEntries([...faulty].map(([status, f], i) => [`fault${status}`, backend(f, i + 1)])),
        },
        env:
          name === 'gemini'
            ? { GEMINI_KEY: FAKE_GEMINI_KEY }
            : Object.fromEntries(all.map((f, i) => [`VERTEX_SA_${i}`, f.serviceAccount])),
        deployment: { backend: 'google', model: 'gemini-2.5-flash' },
        faults: Object.fromEntries(
          [...faulty.keys()].map((s) => [s, { backend: `fault${s}`, model: 'gemini-2.5-pro' }]),
        ),
        reported: () => ({ input: u.promptTokenCount, output: u.candidatesTokenCount + (u.thoughtsTokenCount ?? 0) }),
        received: (tag) => fake.requests.map((r) => r.json).filter((r) => textOf(r).includes(tag)),
        asksFormat: (r) =>
          (r.generationConfig as { responseMimeType?: unknown } | undefined)?.responseMimeType === 'application/json',
        asksThinking: (r) =>
          (r.generationConfig as { thinkingConfig?: unknown } | undefined)?.thinkingConfig !== undefined,
        close: async () => {
          await Promise.all(all.map((f) => f.close()))
        },
      }
    },
    refused: {
      // OpenAI's effort (chat's reasoning_effort, the Responses API's reasoning.effort) is a
      // thinkingConfig; Anthropic's extended thinking (a budget, signed blocks) is refused, naming it.
      'messages.thinking': /thinking/,
    },
  }
}

/**
 * Bedrock's exception per error class: a refused credential is a 403 (its 401 cell), and
 * ServiceUnavailableException (503) is its overloaded answer (the 529 cell).
 */
const BEDROCK_ERRORS: Record<Fault, { status: number; type: string; message: string }> = {
  400: { status: 400, type: 'ValidationException', message: 'The provided request is not valid.' },
  401: { status: 403, type: 'AccessDeniedException', message: "You don't have access to the model." },
  429: { status: 429, type: 'ThrottlingException', message: 'Too many requests, please wait.' },
  500: { status: 500, type: 'InternalServerException', message: 'An internal server error occurred.' },
  529: { status: 503, type: 'ServiceUnavailableException', message: 'The service is unavailable.' },
}

const bedrockRow: Row = {
  name: 'bedrock',
  async start() {
    const fake = await startFakeBedrock()
    const faulty = new Map<Fault, FakeBedrock>()
    for (const fault of [400, 401, 429, 500, 529] as const)
      faulty.set(fault, await startFakeBedrock({ failWith: BEDROCK_ERRORS[fault] }))
    const backend = (f: FakeBedrock): Record<string, unknown> => ({
      type: 'bedrock',
      region: f.options.region,
      endpoint: f.origin,
    })
    const u = fake.options.usage
    return {
      backends: {
        aws: backend(fake),
        ...Object.fromEntries([...faulty].map(([fault, f]) => [`fault${fault}`, backend(f)])),
      },
      env: {
        AWS_ACCESS_KEY_ID: FAKE_AWS_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: FAKE_AWS_CREDENTIALS.secretAccessKey,
        AWS_SESSION_TOKEN: FAKE_AWS_CREDENTIALS.sessionToken ?? '',
      },
      deployment: { backend: 'aws', model: 'anthropic.claude-sonnet-4-5-20250929-v1:0' },
      faults: Object.fromEntries(
        [...faulty.keys()].map((s) => [s, { backend: `fault${s}`, model: 'anthropic.claude-sonnet-4-20250514-v1:0' }]),
      ),
      // Bedrock's inputTokens leave out the cache's reads and writes: the prompt is the three.
      reported: () => ({
        input: u.inputTokens + (u.cacheReadInputTokens ?? 0) + (u.cacheWriteInputTokens ?? 0),
        output: u.outputTokens,
      }),
      received: (tag) => fake.requests.map((r) => r.json).filter((r) => textOf(r).includes(tag)),
      asksFormat: (r) => (r.outputConfig as { textFormat?: unknown } | undefined)?.textFormat !== undefined,
      asksThinking: (r) =>
        (r.additionalModelRequestFields as { thinking?: { type?: unknown } } | undefined)?.thinking?.type === 'enabled',
      close: async () => {
        await Promise.all([fake, ...faulty.values()].map((f) => f.close()))
      },
    }
  },
  refused: {
    // Converse takes extended thinking as Claude's own `thinking`; OpenAI's effort is refused, naming it.
    'chat.thinking': /reasoning_effort/,
    'responses.thinking': /reasoning/,
  },
}

const mockRow: Row = {
  name: 'mock',
  start: () =>
    Promise.resolve({
      backends: {},
      env: {},
      deployment: { backend: 'mock' },
      faults: {}, // the built-in mock answers no upstream errors
      close: () => Promise.resolve(),
    }),
  refused: {}, // it thinks as Claude does: signed thinking blocks, checked when sent back
}

const ROWS: readonly Row[] = [
  fakeUpstreamRow,
  anthropicRow,
  geminiRow('gemini'),
  geminiRow('vertex'),
  bedrockRow,
  mockRow,
]

/** What each caller is answered for an upstream's error class: status, and the error's type or code. */
const FAULT_ANSWERS: Record<Caller, Record<Fault, { status: number; kind: string }>> = {
  chat: {
    400: { status: 400, kind: 'invalid_request_error' },
    401: { status: 502, kind: 'upstream_auth_failed' },
    429: { status: 429, kind: 'upstream_capacity_exceeded' },
    500: { status: 500, kind: 'server_error' },
    529: { status: 429, kind: 'upstream_capacity_exceeded' },
  },
  responses: {
    400: { status: 400, kind: 'invalid_request_error' },
    401: { status: 502, kind: 'upstream_auth_failed' },
    429: { status: 429, kind: 'upstream_capacity_exceeded' },
    500: { status: 500, kind: 'server_error' },
    529: { status: 429, kind: 'upstream_capacity_exceeded' },
  },
  messages: {
    400: { status: 400, kind: 'invalid_request_error' },
    401: { status: 502, kind: 'api_error' },
    429: { status: 529, kind: 'overloaded_error' },
    500: { status: 500, kind: 'api_error' },
    529: { status: 529, kind: 'overloaded_error' },
  },
}

/** A gateway for a row: the matrix model on its deployment, and one model per (error class, caller). */
async function gatewayFor(rig: Rig): Promise<RunningTollgate> {
  return startTollgate({
    env: rig.env,
    config: (doc) => {
      doc.backends = { ...(doc.backends as object), ...rig.backends }
      const models = doc.models as unknown[]
      models.push({ name: 'matrix', kind: 'chat', deployments: [rig.deployment] })
      for (const [fault, deployment] of Object.entries(rig.faults))
        for (const caller of CALLERS)
          models.push({ name: `matrix-${fault}-${caller}`, kind: 'chat', deployments: [deployment] })
    },
  })
}

interface Clients {
  readonly id: string
  readonly openai: OpenAI
  readonly anthropic: Anthropic
}

async function clientsOf(gw: RunningTollgate): Promise<Clients> {
  const { key, id } = await gw.createKey({ tier: 'Standard4000' })
  return {
    id,
    openai: new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 }),
  }
}

/** The key's metered totals once `requests` calls are in. */
async function metered(gw: RunningTollgate, id: string, requests: number): Promise<Usage & { requests: number }> {
  const polled = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      return ((await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } })
        .totals
    },
    (totals) => totals.requests >= requests,
    600,
    20,
  )
  const { requests: n, input_tokens: input, output_tokens: output } = polled.value
  return { requests: n, input, output }
}

/** What a cell's calls came back with: each reply's usage as the caller saw it, and what kind of reply it was. */
interface Seen {
  readonly replies: Array<{ readonly usage: Usage; readonly kind: 'text' | 'tool' }>
}

const WEATHER = { name: 'get_weather', description: 'The weather in a city' }

// ---- the openai SDK, chat completions ----
async function chatCell(c: Clients, feature: Feature, tag: string): Promise<Seen> {
  const model = 'matrix'
  const replies: Seen['replies'] = []
  const usageOf = (u: OpenAI.CompletionUsage | undefined): Usage => ({
    input: u?.prompt_tokens ?? -1,
    output: u?.completion_tokens ?? -1,
  })
  const ask = async (
    body: Omit<OpenAI.ChatCompletionCreateParamsNonStreaming, 'model' | 'stream'>,
    streamed = false,
  ): Promise<OpenAI.ChatCompletion> => {
    // Streamed, through the SDK's own accumulator: it checks the chunks add up to a completion.
    const reply = streamed
      ? await c.openai.chat.completions
          .stream({ model, max_tokens: CAP, ...body, stream_options: { include_usage: true } })
          .finalChatCompletion()
      : await c.openai.chat.completions.create({ model, max_tokens: CAP, ...body })
    const message = reply.choices[0]?.message
    replies.push({ usage: usageOf(reply.usage), kind: message?.tool_calls?.length ? 'tool' : 'text' })
    return reply
  }
  const user = (content: string): OpenAI.ChatCompletionMessageParam => ({ role: 'user', content })
  switch (feature) {
    case 'plain': {
      const reply = await ask({ messages: [user(`Hi ${tag}`)] })
      if (!reply.choices[0]?.message.content) throw new Error('no text')
      break
    }
    case 'stream': {
      const stream = await c.openai.chat.completions.create({
        model,
        max_tokens: CAP,
        messages: [user(`Hi ${tag}`)],
        stream: true,
        stream_options: { include_usage: true },
      })
      let text = ''
      let usage: OpenAI.CompletionUsage | undefined
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? ''
        if (chunk.usage) usage = chunk.usage
      }
      if (text === '') throw new Error('no text streamed')
      replies.push({ usage: usageOf(usage), kind: 'text' })
      break
    }
    case 'tools': {
      const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { ...WEATHER, parameters: CITY } }]
      const messages = [user(`Weather in Paris? ${tag}`)]
      const first = await ask({ messages, tools }, true)
      const call = first.choices[0]?.message.tool_calls?.[0]
      if (call?.type !== 'function' || call.function.name !== 'get_weather') throw new Error('no tool call')
      const second = await ask({
        messages: [
          ...messages,
          first.choices[0]?.message as OpenAI.ChatCompletionMessageParam,
          { role: 'tool', tool_call_id: call.id, content: '{"temperature":21}' },
        ],
        tools,
      })
      if (!second.choices[0]?.message.content) throw new Error('no text after the tool result')
      break
    }
    case 'image': {
      const reply = await ask({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: `What is this? ${tag}` },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
            ],
          },
        ],
      })
      if (!reply.choices[0]?.message.content) throw new Error('no text')
      break
    }
    case 'structured':
      await ask({
        messages: [user(`A city, as JSON. ${tag}`)],
        response_format: { type: 'json_schema', json_schema: { name: 'city', schema: CITY, strict: true } },
      })
      break
    case 'thinking':
      await ask({ messages: [user(`Think first. ${tag}`)], reasoning_effort: 'low', max_tokens: THINKING_CAP })
      break
  }
  return { replies }
}

// ---- the openai SDK, the Responses API ----
async function responsesCell(c: Clients, feature: Feature, tag: string): Promise<Seen> {
  const model = 'matrix'
  const replies: Seen['replies'] = []
  const usageOf = (u: OpenAI.Responses.ResponseUsage | undefined | null): Usage => ({
    input: u?.input_tokens ?? -1,
    output: u?.output_tokens ?? -1,
  })
  const ask = async (
    body: Omit<OpenAI.Responses.ResponseCreateParamsNonStreaming, 'model' | 'stream'>,
    streamed = false,
  ): Promise<OpenAI.Responses.Response> => {
    // Streamed, through the SDK's ResponseStream: it checks each event against the items opened before it.
    const reply = streamed
      ? await c.openai.responses.stream({ model, max_output_tokens: CAP, ...body }).finalResponse()
      : await c.openai.responses.create({ model, max_output_tokens: CAP, ...body })
    if (reply.object !== 'response') throw new Error('not a response object')
    const called = reply.output.some((item) => item.type === 'function_call')
    replies.push({ usage: usageOf(reply.usage), kind: called ? 'tool' : 'text' })
    return reply
  }
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', ...WEATHER, parameters: CITY, strict: false }]
  /** A tool's round trip: the call, then its output sent back with the reply's items (reasoning included). */
  const roundTrip = async (
    extra: Partial<Omit<OpenAI.Responses.ResponseCreateParamsNonStreaming, 'stream'>>,
  ): Promise<void> => {
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: `Weather in Paris? ${tag}` }]
    const first = await ask({ input, tools, ...extra }, true)
    const call = first.output.find((item) => item.type === 'function_call')
    if (call?.type !== 'function_call' || call.name !== 'get_weather') throw new Error('no function_call item')
    const second = await ask({
      input: [
        ...input,
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { type: 'function_call_output', call_id: call.call_id, output: '{"temperature":21}' },
      ],
      tools,
      ...extra,
    })
    if (second.output_text === '') throw new Error('no text after the function call output')
  }
  switch (feature) {
    case 'plain': {
      const reply = await ask({ input: `Hi ${tag}`, instructions: 'Be brief.' })
      if (reply.output_text === '') throw new Error('no output_text')
      break
    }
    case 'stream': {
      const stream = await c.openai.responses.create({
        model,
        max_output_tokens: CAP,
        input: `Hi ${tag}`,
        stream: true,
      })
      let text = ''
      let done: OpenAI.Responses.Response | undefined
      const types: string[] = []
      for await (const event of stream) {
        types.push(event.type)
        if (event.type === 'response.output_text.delta') text += event.delta
        // The mock fills the cap it is given, and says so: response.incomplete.
        if (event.type === 'response.completed' || event.type === 'response.incomplete') done = event.response
      }
      if (text === '' || done === undefined) throw new Error(`no text or no response.completed: ${types.join(' ')}`)
      if (types[0] !== 'response.created') throw new Error(`the stream began with ${types[0]}`)
      replies.push({ usage: usageOf(done.usage), kind: 'text' })
      break
    }
    case 'tools':
      await roundTrip({})
      break
    case 'image': {
      const reply = await ask({
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: `What is this? ${tag}` },
              { type: 'input_image', image_url: `data:image/png;base64,${PNG}`, detail: 'auto' },
            ],
          },
        ],
      })
      if (reply.output_text === '') throw new Error('no output_text')
      break
    }
    case 'structured':
      await ask({
        input: `A city, as JSON. ${tag}`,
        text: { format: { type: 'json_schema', name: 'city', schema: CITY, strict: true } },
      })
      break
    case 'thinking':
      // With a tool: the reasoning goes back with the call (an anthropic upstream checks its signature).
      await roundTrip({ reasoning: { effort: 'low' }, max_output_tokens: THINKING_CAP })
      break
  }
  return { replies }
}

// ---- the Anthropic SDK, the Messages API ----
async function messagesCell(c: Clients, feature: Feature, tag: string): Promise<Seen> {
  const model = 'matrix'
  const replies: Seen['replies'] = []
  const usageOf = (u: Anthropic.Usage): Usage => ({
    input: u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0),
    output: u.output_tokens,
  })
  const ask = async (
    body: Omit<Anthropic.MessageCreateParamsNonStreaming, 'model' | 'max_tokens'> & { max_tokens?: number },
    streamed = false,
  ): Promise<Anthropic.Message> => {
    const reply = streamed
      ? await c.anthropic.messages.stream({ model, max_tokens: CAP, ...body }).finalMessage()
      : await c.anthropic.messages.create({ model, max_tokens: CAP, ...body })
    replies.push({ usage: usageOf(reply.usage), kind: reply.stop_reason === 'tool_use' ? 'tool' : 'text' })
    return reply
  }
  const tools: Anthropic.Tool[] = [{ ...WEATHER, input_schema: CITY as Anthropic.Tool.InputSchema }]
  const roundTrip = async (extra: Partial<Anthropic.MessageCreateParamsNonStreaming>): Promise<void> => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: `Weather in Paris? ${tag}` }]
    const first = await ask({ messages, tools, ...extra }, true)
    const use = first.content.find((block) => block.type === 'tool_use')
    if (use?.type !== 'tool_use' || use.name !== 'get_weather') throw new Error('no tool_use block')
    const second = await ask({
      messages: [
        ...messages,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"temperature":21}' }] },
      ],
      tools,
      ...extra,
    })
    if (!second.content.some((block) => block.type === 'text' && block.text !== '')) throw new Error('no text after')
  }
  switch (feature) {
    case 'plain': {
      const reply = await ask({ system: 'Be brief.', messages: [{ role: 'user', content: `Hi ${tag}` }] })
      if (reply.content[0]?.type !== 'text') throw new Error('no text block')
      break
    }
    case 'stream': {
      const stream = c.anthropic.messages.stream({
        model,
        max_tokens: CAP,
        messages: [{ role: 'user', content: `Hi ${tag}` }],
      })
      let text = ''
      stream.on('text', (piece) => (text += piece))
      const final = await stream.finalMessage()
      if (text === '') throw new Error('no text streamed')
      replies.push({ usage: usageOf(final.usage), kind: 'text' })
      break
    }
    case 'tools':
      await roundTrip({})
      break
    case 'image': {
      const reply = await ask({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: `What is this? ${tag}` },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
            ],
          },
        ],
      })
      if (reply.content[0]?.type !== 'text') throw new Error('no text block')
      break
    }
    case 'structured':
      await ask({
        messages: [{ role: 'user', content: `A city, as JSON. ${tag}` }],
        output_config: { format: { type: 'json_schema', schema: CITY } },
      })
      break
    case 'thinking':
      await roundTrip({ thinking: { type: 'enabled', budget_tokens: 1024 }, max_tokens: THINKING_CAP })
      break
  }
  return { replies }
}

const CELLS: Record<Caller, (c: Clients, feature: Feature, tag: string) => Promise<Seen>> = {
  chat: chatCell,
  responses: responsesCell,
  messages: messagesCell,
}

/** The status and the error's message, type and code, however the SDK threw it. */
function errorOf(err: unknown): { status: number; message: string; kinds: string[] } | undefined {
  if (err instanceof OpenAI.APIError)
    return { status: err.status ?? 0, message: err.message, kinds: [String(err.type), String(err.code)] }
  if (err instanceof Anthropic.APIError) {
    const body = err.error as { error?: { type?: string } } | undefined
    return { status: err.status ?? 0, message: err.message, kinds: [String(body?.error?.type)] }
  }
  return undefined
}

let cellCount = 0
for (const row of ROWS) {
  t.test(`upstream ${row.name}`, async (t) => {
    const rig = await row.start()
    t.teardown(() => rig.close())
    const gw = await gatewayFor(rig)
    t.teardown(() => gw.stop())

    const working = CALLERS.flatMap((caller) => FEATURES.map((feature) => ({ caller, feature })))
    const faults = CALLERS.flatMap((caller) =>
      (Object.keys(rig.faults).map(Number) as Fault[]).map((fault) => ({ caller, fault })),
    )
    await Promise.all([
      ...working.map(async ({ caller, feature }) => {
        const cell: Cell = `${caller}.${feature}`
        const tag = `[cell ${row.name}.${cell} ${++cellCount}]`
        const c = await clientsOf(gw)
        const refusal = row.refused[cell]
        let seen: Seen
        try {
          seen = await CELLS[caller](c, feature, tag)
        } catch (err) {
          const error = errorOf(err)
          if (refusal !== undefined && error?.status === 400 && refusal.test(error.message)) {
            t.pass(`${cell}: refused (${error.message})`)
            t.match(await metered(gw, c.id, 0), { input: 0, output: 0 }, `${cell}: nothing metered`)
            return
          }
          t.fail(
            `${cell}: ${refusal === undefined ? 'should work' : `should be refused naming ${String(refusal)}`}, got ${String(err)}`,
          )
          return
        }
        if (refusal !== undefined) {
          t.fail(`${cell}: should be refused naming ${String(refusal)}, but it worked`)
          return
        }
        // The usage each reply showed is what the upstream reported, and the sum is what was metered.
        for (const [i, reply] of seen.replies.entries()) {
          if (rig.reported !== undefined)
            t.same(reply.usage, rig.reported(reply.kind), `${cell}: reply ${i + 1}'s usage is the upstream's`)
          else t.ok(reply.usage.input > 0 && reply.usage.output > 0, `${cell}: reply ${i + 1} has a usage`)
        }
        const sum = seen.replies.reduce(
          (a, r) => ({ input: a.input + r.usage.input, output: a.output + r.usage.output }),
          {
            input: 0,
            output: 0,
          },
        )
        t.same(
          await metered(gw, c.id, seen.replies.length),
          { requests: seen.replies.length, ...sum },
          `${cell}: metered exactly`,
        )
        // What reached the upstream asked, in its own API, for what the caller asked.
        const sent = rig.received?.(tag)
        if (sent !== undefined) {
          t.ok(sent.length >= seen.replies.length, `${cell}: the upstream received the cell's requests`)
          if (feature === 'structured' && rig.asksFormat !== undefined)
            t.ok(sent.every(rig.asksFormat), `${cell}: the upstream was asked for structured output`)
          if (feature === 'thinking' && rig.asksThinking !== undefined)
            t.ok(sent.every(rig.asksThinking), `${cell}: the upstream was asked to think`)
        }
      }),
      ...faults.map(async ({ caller, fault }) => {
        const cell = `${caller}.error ${fault}`
        const c = await clientsOf(gw)
        const model = `matrix-${fault}-${caller}`
        const asked =
          caller === 'messages'
            ? c.anthropic.messages.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] })
            : caller === 'chat'
              ? c.openai.chat.completions.create({ model, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] })
              : c.openai.responses.create({ model, max_output_tokens: 16, input: 'Hi' })
        const error = errorOf(
          await asked.then(
            () => undefined,
            (err: unknown) => err,
          ),
        )
        const expected = FAULT_ANSWERS[caller][fault]
        t.equal(error?.status, expected.status, `${cell}: answered ${expected.status}`)
        t.ok(error?.kinds.includes(expected.kind), `${cell}: ${expected.kind} (${String(error?.kinds)})`)
        t.match(await metered(gw, c.id, 0), { input: 0, output: 0 }, `${cell}: nothing metered`)
      }),
    ])
  })
}

// Tollgate driven the way Claude Code drives it, on `npm start`'s defaults (config/default.yaml:
// every catalogue model on the built-in mock): @anthropic-ai/sdk with ANTHROPIC_BASE_URL at
// the gateway, the key as ANTHROPIC_AUTH_TOKEN (Authorization: Bearer) and as
// ANTHROPIC_API_KEY (x-api-key), Claude Code's headers (anthropic-beta, x-app: cli, its
// user-agent), the beta paths (`?beta=true`), the quota probe on the small fast model,
// count_tokens, and a session of several turns: a long system prompt as text blocks and the
// last user message marked with cache_control, metadata.user_id, thinking enabled, its tools
// (Bash, Read, Edit, ... with their JSON schemas) streamed, and their results sent back with
// the signed thinking. Each step's shape is checked, and the key is charged exactly what the
// messages reported.
//
// Claude Code's max_tokens is 32000 unless CLAUDE_CODE_MAX_OUTPUT_TOKENS says otherwise, and
// the mock writes up to it: the session below is a Claude Code run with
// CLAUDE_CODE_MAX_OUTPUT_TOKENS=2048 and MAX_THINKING_TOKENS=1024, which keeps it short.
import Anthropic from '@anthropic-ai/sdk'
import t, { type Test } from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

type Beta = Anthropic.Beta.Messages.BetaMessage
type BetaParam = Anthropic.Beta.Messages.BetaMessageParam
type BetaBlock = Anthropic.Beta.Messages.BetaContentBlock
type BetaEvent = Anthropic.Beta.Messages.BetaRawMessageStreamEvent

const MODEL = 'claude-sonnet-4.5' // ANTHROPIC_MODEL
const SMALL_FAST_MODEL = 'gemini-2.5-flash' // ANTHROPIC_SMALL_FAST_MODEL: any chat model of the key
const MAX_TOKENS = 2048
const THINKING = { type: 'enabled', budget_tokens: 1024 } as const
const BETAS = ['claude-code-20250219', 'interleaved-thinking-2025-05-14', 'fine-grained-tool-streaming-2025-05-14']
const HEADERS = {
  'x-app': 'cli',
  'user-agent': 'claude-cli/2.0.14 (external, cli)',
  'anthropic-dangerous-direct-browser-access': 'true',
}
const METADATA = {
  user_id: `user_${'5f'.repeat(32)}_account__session_6f1c2a4e-8f0b-4c61-9d2e-3b7a1c0e9d55`,
}

const schema = (properties: Record<string, unknown>, required: string[]): Record<string, unknown> => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
  $schema: 'http://json-schema.org/draft-07/schema#',
})
/** Claude Code's own tools (a selection), as it defines them. */
const TOOLS: Anthropic.Beta.Messages.BetaTool[] = [
  {
    name: 'Bash',
    description: 'Executes a given bash command in a persistent shell session with optional timeout.',
    input_schema: schema(
      {
        command: { type: 'string', description: 'The command to execute' },
        timeout: { type: 'number', description: 'Optional timeout in milliseconds (max 600000)' },
        description: { type: 'string', description: 'Clear, concise description of what this command does' },
        run_in_background: { type: 'boolean' },
      },
      ['command'],
    ) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
  {
    name: 'Glob',
    description: 'Fast file pattern matching tool that works with any codebase size.',
    input_schema: schema({ pattern: { type: 'string' }, path: { type: 'string' } }, [
      'pattern',
    ]) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
  {
    name: 'Grep',
    description: 'A powerful search tool built on ripgrep.',
    input_schema: schema(
      {
        pattern: { type: 'string' },
        path: { type: 'string' },
        glob: { type: 'string' },
        output_mode: { type: 'string', enum: ['content', 'files_with_matches', 'count'] },
        '-i': { type: 'boolean' },
        head_limit: { type: 'number' },
      },
      ['pattern'],
    ) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
  {
    name: 'Read',
    description: 'Reads a file from the local filesystem.',
    input_schema: schema({ file_path: { type: 'string' }, offset: { type: 'number' }, limit: { type: 'number' } }, [
      'file_path',
    ]) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
  {
    name: 'Edit',
    description: 'Performs exact string replacements in files.',
    input_schema: schema(
      {
        file_path: { type: 'string' },
        old_string: { type: 'string' },
        new_string: { type: 'string' },
        replace_all: { type: 'boolean', default: false },
      },
      ['file_path', 'old_string', 'new_string'],
    ) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
  {
    name: 'TodoWrite',
    description: 'Create and manage a structured task list for your current coding session.',
    input_schema: schema(
      {
        todos: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              content: { type: 'string', minLength: 1 },
              status: { type: 'string', enum: ['pending', 'in_progress', 'completed'] },
              activeForm: { type: 'string', minLength: 1 },
            },
            required: ['content', 'status', 'activeForm'],
            additionalProperties: false,
          },
        },
      },
      ['todos'],
    ) as Anthropic.Beta.Messages.BetaTool.InputSchema,
  },
]

/** A system prompt of Claude Code's length (some thousands of tokens), as text blocks marked for caching. */
const SYSTEM: Anthropic.Beta.Messages.BetaTextBlockParam[] = [
  {
    type: 'text',
    text: "You are Claude Code, Anthropic's official CLI for Claude.",
    cache_control: { type: 'ephemeral' },
  },
  {
    type: 'text',
    text: Array.from(
      { length: 120 },
      (_, i) =>
        `Rule ${i + 1}: be concise, prefer editing existing files, never commit unless asked, run the tests after each change.`,
    ).join('\n'),
    cache_control: { type: 'ephemeral' },
  },
]

const reminder = (text: string): Anthropic.Beta.Messages.BetaTextBlockParam => ({
  type: 'text',
  text: `<system-reminder>\n${text}\n</system-reminder>`,
})

/** The conversation as Claude Code sends it: the cache marker moved to the last block of the last user turn. */
function marked(messages: readonly BetaParam[]): BetaParam[] {
  return messages.map((message, i) => {
    const last = i === messages.length - 1
    const blocks = (
      typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content
    ) as Array<Record<string, unknown>>
    return {
      role: message.role,
      content: blocks.map((block, j) => {
        const { cache_control: _dropped, ...rest } = block
        return (last && j === blocks.length - 1 ? { ...rest, cache_control: { type: 'ephemeral' } } : rest) as never
      }),
    }
  })
}

const gw = await startTollgate()
t.teardown(() => gw.stop())
// What the key needs: the chat.completions scope (both /v1/messages routes), and the models.
const created = await gw.createKey({
  tier: 'Standard4000',
  name: 'claude-code',
  endpoints: ['chat.completions'],
  models: [MODEL, SMALL_FAST_MODEL],
})

interface Exchange {
  readonly url: string
  readonly headers: Headers
  readonly status: number
  readonly responseHeaders: Headers
}
const exchanges: Exchange[] = []
/**
 * Claude Code's client: the SDK with its headers, recording what went out and what came back.
 * The SDK release Claude Code bundles sends ANTHROPIC_API_KEY as x-api-key and puts
 * `?beta=true` on the beta paths; the release installed here sends every key as a bearer
 * token and no query, so both are set as Claude Code's would send them.
 */
const claudeCode = (auth: 'ANTHROPIC_AUTH_TOKEN' | 'ANTHROPIC_API_KEY'): Anthropic =>
  new Anthropic({
    baseURL: gw.url,
    apiKey: null,
    authToken: auth === 'ANTHROPIC_AUTH_TOKEN' ? created.key : null,
    maxRetries: 0,
    defaultHeaders: { ...HEADERS, ...(auth === 'ANTHROPIC_API_KEY' ? { 'x-api-key': created.key } : {}) },
    defaultQuery: { beta: 'true' },
    fetch: async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init)
      exchanges.push({
        url: String(input instanceof Request ? input.url : input),
        headers: new Headers(init?.headers),
        status: response.status,
        responseHeaders: response.headers,
      })
      return response
    },
  })
const bearer = claudeCode('ANTHROPIC_AUTH_TOKEN')
const xApiKey = claudeCode('ANTHROPIC_API_KEY')

/** Every message the session got, for the metering check at the end. */
const messages: Array<{ model: string; usage: Anthropic.Beta.Messages.BetaUsage }> = []

/** The last exchange: Claude Code's beta path, its headers sent, and the gateway's answer with request-id and limits. */
function checkExchange(t: Test, path: string, auth: 'bearer' | 'x-api-key'): void {
  const last = exchanges.at(-1)
  if (last === undefined) throw new Error('nothing was sent')
  t.equal(new URL(last.url).pathname + new URL(last.url).search, `${path}?beta=true`, `${path}?beta=true`)
  t.equal(last.headers.get('x-app'), 'cli')
  t.match(last.headers.get('user-agent') ?? '', /^claude-cli\//)
  t.match(last.headers.get('anthropic-beta') ?? '', /claude-code-20250219/)
  t.ok(last.headers.get('anthropic-version'), 'anthropic-version')
  if (auth === 'bearer') t.equal(last.headers.get('authorization'), `Bearer ${created.key}`)
  else {
    t.equal(last.headers.get('x-api-key'), created.key)
    t.equal(last.headers.get('authorization'), null, 'the key as x-api-key alone')
  }
  t.equal(last.status, 200)
  t.ok(last.responseHeaders.get('request-id'), 'request-id')
  t.ok(Number(last.responseHeaders.get('anthropic-ratelimit-requests-limit')) > 0, 'anthropic-ratelimit-requests-*')
  t.ok(
    Number(last.responseHeaders.get('anthropic-ratelimit-output-tokens-limit')) > 0,
    'anthropic-ratelimit-output-tokens-*',
  )
}

/**
 * What Claude Code 2.1 sends besides (as captured from it): adaptive thinking, the effort,
 * context editing, its betas and user-agent, tools that stream their input eagerly, and a
 * cache scope on the system blocks.
 */
const RELEASE_2_1 = {
  thinking: { type: 'adaptive' },
  output_config: { effort: 'high' },
  context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
  tools: TOOLS.map((tool) => ({ ...tool, eager_input_streaming: true })),
  system: SYSTEM.map((block) => ({ ...block, cache_control: { type: 'ephemeral', scope: 'global' } })),
  betas: [
    'claude-code-20250219',
    'interleaved-thinking-2025-05-14',
    'context-management-2025-06-27',
    'prompt-caching-scope-2026-01-05',
    'mid-conversation-system-2026-04-07',
    'effort-2025-11-24',
  ],
}

/** One streamed turn of the session, as Claude Code's main loop sends it (2.0's or 2.1's); the events and the final message. */
async function turn(
  history: readonly BetaParam[],
  release: '2.0' | '2.1' = '2.0',
): Promise<{ events: BetaEvent[]; message: Beta }> {
  const params = {
    model: MODEL,
    max_tokens: MAX_TOKENS,
    thinking: THINKING,
    temperature: 1,
    system: SYSTEM,
    tools: TOOLS,
    metadata: METADATA,
    messages: marked(history),
    betas: BETAS,
    ...(release === '2.1' ? RELEASE_2_1 : {}),
  }
  const stream = bearer.beta.messages.stream(
    params as unknown as Anthropic.Beta.Messages.MessageCreateParamsNonStreaming,
    {
      headers: release === '2.1' ? { 'user-agent': 'claude-cli/2.1.165 (external, sdk-cli)' } : {},
    },
  )
  const events: BetaEvent[] = []
  for await (const event of stream) events.push(event)
  const message = await stream.finalMessage()
  messages.push({ model: MODEL, usage: message.usage })
  return { events, message }
}

/** A turn's events are Anthropic's sequence: message_start, blocks (thinking first, signed), message_delta, message_stop. */
function checkEvents(t: Test, events: readonly BetaEvent[], message: Beta): void {
  t.equal(events[0]?.type, 'message_start')
  t.same(
    events.slice(-2).map((e) => e.type),
    ['message_delta', 'message_stop'],
  )
  const starts = events.filter((e) => e.type === 'content_block_start')
  t.same(
    starts.map((e) => e.index),
    message.content.map((_, i) => i),
    'one content_block_start per block, in order',
  )
  t.equal(events.filter((e) => e.type === 'content_block_stop').length, starts.length, 'each block stopped')
  const deltas = events.flatMap((e) => (e.type === 'content_block_delta' ? [e] : []))
  const thinking = deltas.filter((e) => e.index === 0)
  t.equal(thinking[0]?.delta.type, 'thinking_delta', 'the thought streams first')
  t.equal(thinking.at(-1)?.delta.type, 'signature_delta', 'and ends with its signature')
  const thought = message.content[0]
  t.ok(thought?.type === 'thinking' && thought.signature.length > 0, 'a signed thinking block')
  for (const [index, block] of message.content.entries()) {
    if (block.type !== 'tool_use') continue
    const json = deltas
      .filter((e) => e.index === index)
      .map((e) => (e.delta.type === 'input_json_delta' ? e.delta.partial_json : ''))
      .join('')
    t.same(block.input, JSON.parse(json), `${block.name}'s input is its streamed input_json_delta`)
  }
  const delta = events.at(-2)
  if (delta?.type === 'message_delta') {
    t.equal(delta.delta.stop_reason, message.stop_reason)
    t.ok(delta.usage.input_tokens !== null && delta.usage.input_tokens > 0, 'message_delta carries the input tokens')
    t.equal(delta.usage.output_tokens, message.usage.output_tokens)
  }
}

const toolUses = (content: readonly BetaBlock[]): Anthropic.Beta.Messages.BetaToolUseBlock[] =>
  content.flatMap((b) => (b.type === 'tool_use' ? [b] : []))

t.test('the start-up probe, HEAD / (Claude Code 2.1): answered, without an error', async (t) => {
  const res = await fetch(gw.url, { method: 'HEAD', headers: HEADERS })
  t.ok(res.status < 500, `HEAD / answers ${res.status}`)
})

t.test('the quota probe on the small fast model (x-api-key): one token, not streamed', async (t) => {
  const probe = await xApiKey.beta.messages.create({
    model: SMALL_FAST_MODEL,
    max_tokens: 1,
    messages: [{ role: 'user', content: 'quota' }],
    metadata: METADATA,
    betas: BETAS,
  })
  messages.push({ model: SMALL_FAST_MODEL, usage: probe.usage })
  checkExchange(t, '/v1/messages', 'x-api-key')
  t.equal(probe.type, 'message')
  t.equal(probe.model, SMALL_FAST_MODEL, 'a Gemini model answers the Anthropic SDK too')
  t.equal(probe.stop_reason, 'max_tokens')
  t.equal(probe.usage.output_tokens, 1)
})

const question: BetaParam = {
  role: 'user',
  content: [
    reminder('This is a reminder that your todo list is currently empty.'),
    { type: 'text', text: 'Read package.json, then run the tests with Bash.' },
  ],
}

t.test('count_tokens on the beta path: the whole prompt, tools and system included', async (t) => {
  const counted = await xApiKey.beta.messages.countTokens({
    model: MODEL,
    system: SYSTEM,
    tools: TOOLS,
    thinking: THINKING,
    messages: marked([question]),
    betas: BETAS,
  })
  checkExchange(t, '/v1/messages/count_tokens', 'x-api-key')
  t.ok(counted.input_tokens > 2000, `a long prompt: ${counted.input_tokens} tokens`)
})

t.test('a session of several turns: tools, their results, thinking carried back, each streamed', async (t) => {
  const history: BetaParam[] = [question]

  // 1. The model thinks and calls the two tools the user named.
  const first = await turn(history)
  checkExchange(t, '/v1/messages', 'bearer')
  checkEvents(t, first.events, first.message)
  t.equal(first.message.stop_reason, 'tool_use')
  const calls = toolUses(first.message.content)
  t.same(calls.map((c) => c.name).sort(), ['Bash', 'Read'], 'Read and Bash, called at once')
  for (const call of calls) {
    const input = call.input as Record<string, unknown>
    t.type(input[call.name === 'Bash' ? 'command' : 'file_path'], 'string', `${call.name}'s required input`)
    t.ok(call.id.length > 0, 'a tool_use id')
  }

  // 2. The results go back, after the assistant turn as it came (its signed thought first): the model answers.
  history.push({ role: 'assistant', content: first.message.content as Anthropic.Beta.Messages.BetaContentBlockParam[] })
  history.push({
    role: 'user',
    content: calls.map((call) => ({
      type: 'tool_result' as const,
      tool_use_id: call.id,
      content: call.name === 'Read' ? '{"name": "tollgate", "scripts": {"test": "tap"}}' : '# { total: 12, pass: 12 }',
    })),
  })
  const second = await turn(history)
  checkEvents(t, second.events, second.message)
  t.same(
    second.message.content.map((b) => b.type),
    ['thinking', 'text'],
    'a thought, then the answer: no more tools after their results',
  )
  t.equal(second.message.usage.output_tokens, MAX_TOKENS, 'thought and answer fill max_tokens (the mock writes to it)')

  // 3. Claude Code upgraded to 2.1 mid-session (its request shape, above), and a new request,
  // after a system message in mid-conversation, as 2.1 adds: one tool, Edit.
  history.push({
    role: 'assistant',
    content: second.message.content as Anthropic.Beta.Messages.BetaContentBlockParam[],
  })
  history.push({ role: 'system', content: 'The user switched to accept-edits mode.' } as unknown as BetaParam)
  history.push({
    role: 'user',
    content: [reminder('The user opened README.md in the IDE.'), { type: 'text', text: 'Now fix the typo with Edit.' }],
  })
  const third = await turn(history, '2.1')
  checkEvents(t, third.events, third.message)
  t.same(
    toolUses(third.message.content).map((c) => c.name),
    ['Edit'],
  )
  const edit = toolUses(third.message.content)[0]
  if (edit === undefined) throw new Error('no Edit call')
  t.match(edit.input, { file_path: String, old_string: String, new_string: String }, "Edit's required input")

  // 4. The tool failed (is_error): the model answers, thinking first again.
  history.push({ role: 'assistant', content: third.message.content as Anthropic.Beta.Messages.BetaContentBlockParam[] })
  history.push({
    role: 'user',
    content: [
      {
        type: 'tool_result',
        tool_use_id: edit.id,
        is_error: true,
        content: [{ type: 'text', text: '<tool_use_error>String to replace not found in file.</tool_use_error>' }],
      },
    ],
  })
  const fourth = await turn(history, '2.1')
  checkEvents(t, fourth.events, fourth.message)
  t.same(
    fourth.message.content.map((b) => b.type),
    ['thinking', 'text'],
  )
  t.ok(
    fourth.message.usage.input_tokens > first.message.usage.input_tokens,
    `the prompt grew over the session (${first.message.usage.input_tokens} → ${fourth.message.usage.input_tokens})`,
  )
})

t.test('usage is metered to the key exactly as the messages reported it, per model', async (t) => {
  const expected = new Map<string, { requests: number; input: number; output: number }>()
  for (const { model, usage } of messages) {
    const row = expected.get(model) ?? { requests: 0, input: 0, output: 0 }
    row.requests += 1
    // The key is charged the whole prompt: input plus what the upstream read from or wrote to its cache.
    row.input += usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0)
    row.output += usage.output_tokens
    expected.set(model, row)
  }
  t.equal(messages.length, 5, 'the probe and four turns')
  const usage = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${created.id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      return (await res.json()) as {
        data: Array<{ model: string; requests: number; input_tokens: number; output_tokens: number }>
        totals: { requests: number }
      }
    },
    (body) => body.totals.requests >= messages.length,
    200,
    100,
  )
  t.ok(usage.met, 'the usage arrived')
  const metered = new Map<string, { requests: number; input: number; output: number }>()
  for (const row of usage.value.data) {
    const sum = metered.get(row.model) ?? { requests: 0, input: 0, output: 0 }
    sum.requests += row.requests
    sum.input += row.input_tokens
    sum.output += row.output_tokens
    metered.set(row.model, sum)
  }
  t.same(Object.fromEntries(metered), Object.fromEntries(expected), 'count_tokens is not charged; every message is')
})

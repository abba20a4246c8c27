// A fake of Anthropic's Messages API on loopback, built from the published API reference
// (docs.anthropic.com: "Messages", "Streaming Messages", "Errors", "Rate limits"):
//   POST /v1/messages with x-api-key and anthropic-version (a missing or wrong key is 401
//   authentication_error, no anthropic-version a 400), a body checked the way the service
//   checks it (model, max_tokens and messages required, unknown members refused);
//   a Message in reply (text, or a tool_use block when tools are offered and the last turn
//   is not a tool result), its usage in four parts; with stream: true the documented event
//   sequence: message_start (the prompt's usage), content_block_start, ping,
//   content_block_delta (text_delta, input_json_delta), content_block_stop, message_delta
//   (stop_reason, the output's usage), message_stop; with thinking enabled, a signed thinking
//   block first (thinking_delta, then signature_delta), and on later turns the signatures
//   checked and a tool-using assistant turn required to start with its thinking, as the
//   service does; errors in Anthropic's shape with
//   request-id, retry-after on 429 and 529; anthropic-ratelimit-* headers on every reply.
// test/backends/fake-anthropic.test.ts holds it to the official @anthropic-ai/sdk.
import { randomBytes } from 'node:crypto'
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeAnthropicUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

export interface FakeAnthropicOptions {
  /** The key it accepts as x-api-key. */
  apiKey: string
  /** The text reply, streamed one word (with its leading space) per text_delta. */
  replyText: string
  /** The tool_use input when it calls a tool. */
  toolInput: Record<string, unknown>
  /** The usage every reply reports (distinctive numbers, so "reported" is easy to tell from "counted"). */
  usage: FakeAnthropicUsage
  /** Answer with this error (status, Anthropic's type) instead. */
  failWith?: { status: number; type: string; retryAfter?: string }
  /** Headers on every reply (anthropic-ratelimit-*). */
  headers: Record<string, string>
}

export interface FakeAnthropicRequest {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly json: Record<string, unknown>
}

export interface FakeAnthropic {
  /** The API root with its version path, as an anthropic backend's baseUrl: http://127.0.0.1:PORT/v1 */
  readonly url: string
  /** The root an Anthropic SDK takes as baseURL. */
  readonly origin: string
  readonly requests: FakeAnthropicRequest[]
  readonly options: FakeAnthropicOptions
  close(): Promise<void>
}

/** Top-level members of a Messages request (the API reference's MessageCreateParams). */
const MEMBERS = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'metadata',
  'tools',
  'tool_choice',
  'thinking',
  'service_tier',
  'container',
  'mcp_servers',
  'output_config',
  'cache_control',
  'context_management',
])
const BLOCKS = new Set(['text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'])
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])
/** The thinking the fake does, when asked to. */
export const FAKE_THINKING = 'Let me think about this.'
/** Signatures the fake gave its thinking blocks: a block sent back must carry one of them, unchanged. */
const signatures = new Set<string>()

class Invalid extends Error {}

export async function startFakeAnthropic(options: Partial<FakeAnthropicOptions> = {}): Promise<FakeAnthropic> {
  const state: FakeAnthropicOptions = {
    apiKey: 'sk-ant-fake',
    replyText: 'Bonjour from Claude.',
    toolInput: { city: 'Paris' },
    usage: { input_tokens: 1234, output_tokens: 56, cache_creation_input_tokens: 700, cache_read_input_tokens: 3000 },
    headers: {},
    ...options,
  }
  const requests: FakeAnthropicRequest[] = []
  const server = http.createServer((req, res) => {
    void handle(req, res, state, requests)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const origin = `http://127.0.0.1:${port}`
  return {
    url: `${origin}/v1`,
    origin,
    requests,
    options: state,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  state: FakeAnthropicOptions,
  requests: FakeAnthropicRequest[],
): Promise<void> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const requestId = `req_${randomBytes(12).toString('hex')}`
  res.setHeader('request-id', requestId)
  for (const [name, value] of Object.entries(state.headers)) res.setHeader(name, value)
  const error = (status: number, type: string, message: string, headers: Record<string, string> = {}): void => {
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ type: 'error', error: { type, message }, request_id: requestId }))
  }
  const path = (req.url ?? '').split('?')[0]
  if (req.method !== 'POST' || path !== '/v1/messages') return error(404, 'not_found_error', 'Not found')
  let body: unknown
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    return error(400, 'invalid_request_error', 'The request body is not valid JSON.')
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return error(400, 'invalid_request_error', 'The request body must be an object.')
  const json = body as Record<string, unknown>
  requests.push({ path: req.url ?? '', headers: req.headers, json })
  // The key as x-api-key (the API reference's), or as a bearer token (what the SDK sends since 1.x).
  const key = req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer /i, '')
  if (key !== state.apiKey) return error(401, 'authentication_error', 'invalid x-api-key')
  if (typeof req.headers['anthropic-version'] !== 'string')
    return error(400, 'invalid_request_error', 'anthropic-version: header is required')
  if (state.failWith !== undefined) {
    const { status, type, retryAfter } = state.failWith
    return error(
      status,
      type,
      `fake anthropic failure ${status}`,
      retryAfter === undefined ? {} : { 'retry-after': retryAfter },
    )
  }
  try {
    check(json)
    checkThinking(json)
  } catch (err) {
    if (err instanceof Invalid) return error(400, 'invalid_request_error', err.message)
    throw err
  }
  const reply = replyOf(json, state)
  if (json.stream === true) return stream(res, reply, state.usage)
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(
    JSON.stringify({
      id: reply.id,
      type: 'message',
      role: 'assistant',
      model: reply.model,
      content: reply.content,
      stop_reason: reply.stopReason,
      stop_sequence: null,
      usage: { ...state.usage, service_tier: 'standard' },
    }),
  )
}

/** The request checks the service makes that a translation could get wrong. */
function check(body: Record<string, unknown>): void {
  for (const name of Object.keys(body))
    if (!MEMBERS.has(name)) throw new Invalid(`${name}: Extra inputs are not permitted`)
  if (typeof body.model !== 'string') throw new Invalid('model: Field required')
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1)
    throw new Invalid('max_tokens: Field required')
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system))
    throw new Invalid('system: Input should be a valid string or list')
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new Invalid('messages: Field required')
  for (const [i, message] of body.messages.entries()) {
    const m = message as Record<string, unknown>
    if (m.role !== 'user' && m.role !== 'assistant')
      throw new Invalid(`messages.${i}.role: Input should be 'user' or 'assistant'`)
    if (typeof m.content === 'string') continue
    if (!Array.isArray(m.content)) throw new Invalid(`messages.${i}.content: Input should be a valid list`)
    for (const [j, block] of (m.content as Array<Record<string, unknown>>).entries()) {
      const at = `messages.${i}.content.${j}`
      if (!BLOCKS.has(String(block.type))) throw new Invalid(`${at}.type: Input tag '${String(block.type)}' is invalid`)
      if (block.type === 'image') {
        const source = block.source as Record<string, unknown>
        if (source.type === 'base64' && !IMAGE_TYPES.has(String(source.media_type)))
          throw new Invalid(
            `${at}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`,
          )
      }
      if (block.type === 'tool_use' && (typeof block.input !== 'object' || block.input === null))
        throw new Invalid(`${at}.input: Input should be a valid dictionary`)
      if (block.type === 'tool_result' && typeof block.tool_use_id !== 'string')
        throw new Invalid(`${at}.tool_use_id: Field required`)
    }
  }
  if (body.tools !== undefined) {
    for (const [i, tool] of (body.tools as Array<Record<string, unknown>>).entries())
      if (typeof tool.name !== 'string' || typeof tool.input_schema !== 'object')
        throw new Invalid(`tools.${i}: a custom tool needs name and input_schema`)
  }
}

/** Thinking blocks sent back must be the fake's own, signature and text unchanged; a tool-using turn starts with one. */
function checkThinking(body: Record<string, unknown>): void {
  const enabled = (body.thinking as { type?: string } | undefined)?.type === 'enabled'
  for (const [i, message] of (body.messages as Array<Record<string, unknown>>).entries()) {
    if (message.role !== 'assistant' || !Array.isArray(message.content)) continue
    const blocks = message.content as Array<Record<string, unknown>>
    for (const [j, block] of blocks.entries())
      if (block.type === 'thinking' && (!signatures.has(String(block.signature)) || block.thinking !== FAKE_THINKING))
        throw new Invalid(`messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`)
    if (enabled && blocks.some((b) => b.type === 'tool_use') && blocks[0]?.type !== 'thinking')
      throw new Invalid(
        `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(blocks[0]?.type)}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`,
      )
  }
}

interface Reply {
  readonly id: string
  readonly model: string
  readonly content: Array<Record<string, unknown>>
  readonly stopReason: string
}

/** A tool call when tools are offered and the last turn holds no tool result; text otherwise. */
function replyOf(body: Record<string, unknown>, state: FakeAnthropicOptions): Reply {
  const id = `msg_${randomBytes(12).toString('hex')}`
  const model = body.model as string
  const messages = body.messages as Array<Record<string, unknown>>
  const last = messages.at(-1)?.content
  const answered = Array.isArray(last) && last.some((b: Record<string, unknown>) => b.type === 'tool_result')
  const tools = body.tools as Array<Record<string, unknown>> | undefined
  const tool = tools?.[0]
  const thinking: Array<Record<string, unknown>> = []
  if ((body.thinking as { type?: string } | undefined)?.type === 'enabled') {
    const signature = randomBytes(24).toString('base64')
    signatures.add(signature)
    thinking.push({ type: 'thinking', thinking: FAKE_THINKING, signature })
  }
  if (tool !== undefined && !answered && (body.tool_choice as { type?: string } | undefined)?.type !== 'none') {
    const call = {
      type: 'tool_use',
      id: `toolu_${randomBytes(8).toString('hex')}`,
      name: tool.name,
      input: state.toolInput,
    }
    return { id, model, content: [...thinking, call], stopReason: 'tool_use' }
  }
  return { id, model, content: [...thinking, { type: 'text', text: state.replyText }], stopReason: 'end_turn' }
}

function stream(res: ServerResponse, reply: Reply, usage: FakeAnthropicUsage): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
  const send = (type: string, data: Record<string, unknown>): void => {
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
  }
  send('message_start', {
    message: {
      id: reply.id,
      type: 'message',
      role: 'assistant',
      model: reply.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // The prompt's part of the usage; the output's comes with message_delta.
      usage: {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        output_tokens: 1,
      },
    },
  })
  for (const [index, block] of reply.content.entries()) {
    if (block.type === 'thinking') {
      send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } })
      if (index === 0) send('ping', {})
      for (const word of String(block.thinking).match(/\s*\S+/g) ?? [])
        send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: word } })
      send('content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } })
    } else if (block.type === 'text') {
      send('content_block_start', { index, content_block: { type: 'text', text: '' } })
      if (index === 0) send('ping', {})
      for (const word of String(block.text).match(/\s*\S+/g) ?? [])
        send('content_block_delta', { index, delta: { type: 'text_delta', text: word } })
    } else {
      send('content_block_start', { index, content_block: { ...block, input: {} } })
      if (index === 0) send('ping', {})
      const json = JSON.stringify(block.input)
      const third = Math.ceil(json.length / 3)
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: '' } })
      for (let at = 0; at < json.length; at += third)
        send('content_block_delta', {
          index,
          delta: { type: 'input_json_delta', partial_json: json.slice(at, at + third) },
        })
    }
    send('content_block_stop', { index })
  }
  send('message_delta', {
    delta: { stop_reason: reply.stopReason, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens },
  })
  send('message_stop', {})
  res.end()
}

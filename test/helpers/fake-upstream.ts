// A real OpenAI-compatible HTTP server on loopback for tests: chat, completions,
// responses (JSON and SSE), embeddings, models, and a multipart echo. It records what it
// received and can be told to misbehave (fail, delay headers, stall or drop mid-stream).
// Options live on the returned object and may be changed between requests.
import { createHash, randomBytes } from 'node:crypto'
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

export interface FakeUpstreamOptions {
  /** The assistant's reply; streamed one word (with its leading space) per event. */
  replyText?: string
  /** Reported prompt tokens (a distinctive number, so "reported" is easy to tell from "counted"). */
  promptTokens?: number
  /** Answer every request with this status and an OpenAI-shaped error body. */
  failWith?: number
  /** Wait this long before sending response headers. */
  headerDelayMs?: number
  /** Wait this long between two streamed events. */
  eventDelayMs?: number
  /** After this many streamed events, send nothing more but keep the connection open. */
  stallAfterEvents?: number
  /** After this many streamed events, destroy the socket. */
  dropAfterEvents?: number
  /** A streamed reply is this one event and nothing else (an error a server reports after its 200). */
  onlyEvent?: unknown
  /** 'honour' sends the usage chunk only when stream_options.include_usage is set. */
  includeUsage?: 'honour' | 'never' | 'always'
  /** Write streamed bytes in slices of this size, yielding between slices. */
  sliceBytes?: number
  lineEnding?: '\n' | '\r\n'
  /**
   * A model that never stops by itself: each reply is this many tokens (one word each) when
   * the request sets no cap, and exactly its cap when it sets one (max_completion_tokens,
   * max_tokens, max_output_tokens), as an upstream bills them.
   */
  uncappedTokens?: number
  /**
   * Call this function (chat's tool_calls, or a Responses function_call item) when the request
   * declares tools and its last turn is not a tool's result; its usage reports
   * TOOL_CALL_TOKENS output tokens. Unset: tools are never called.
   */
  toolCall?: { readonly name: string; readonly arguments: string }
}

/** Output tokens a tool call reports (options.toolCall). */
export const TOOL_CALL_TOKENS = 6

export interface RecordedRequest {
  readonly method: string
  /** Path with query, as received: "/v1/chat/completions". */
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  readonly sha256: string
  /** The parsed body when it was JSON. */
  readonly json: unknown
  /** Settles when the exchange ends: 'finished' when the whole response went out, 'closed' when the peer left first. */
  readonly ended: Promise<'finished' | 'closed'>
}

export interface FakeUpstream {
  /** Base URL with the version path, as a backend's baseUrl: http://127.0.0.1:PORT/v1 */
  readonly url: string
  readonly port: number
  readonly requests: RecordedRequest[]
  readonly options: FakeUpstreamOptions
  /** Number of TCP connections accepted so far (keep-alive reuse shows as fewer). */
  connections(): number
  close(): Promise<void>
}

export const DEFAULT_REPLY = 'Hello there, this is the fake upstream speaking.'
const DEFAULT_PROMPT_TOKENS = 17

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = []
  let connections = 0
  const server = http.createServer((req, res) => {
    handle(req, res, options, requests).catch(() => res.destroy())
  })
  server.on('connection', () => {
    connections += 1
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    options,
    connections: () => connections,
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
  options: FakeUpstreamOptions,
  requests: RecordedRequest[],
): Promise<void> {
  const chunks: Buffer[] = []
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk)
  const body = Buffer.concat(chunks)
  let json: unknown
  if ((req.headers['content-type'] ?? '').startsWith('application/json')) {
    try {
      json = JSON.parse(body.toString('utf8'))
    } catch {
      json = undefined
    }
  }
  const ended = new Promise<'finished' | 'closed'>((resolve) => {
    res.on('close', () => resolve(res.writableFinished ? 'finished' : 'closed'))
  })
  requests.push({
    method: req.method ?? '',
    path: req.url ?? '',
    headers: req.headers,
    body,
    sha256: createHash('sha256').update(body).digest('hex'),
    json,
    ended,
  })

  if (options.headerDelayMs !== undefined) await sleep(options.headerDelayMs)
  if (res.destroyed) return
  if (options.failWith !== undefined) {
    sendJson(res, options.failWith, {
      error: {
        message: `fake upstream failure ${options.failWith}`,
        // OpenAI's types: a request it refuses is the caller's fault, a failure of its own a server_error.
        type: options.failWith < 500 ? 'invalid_request_error' : 'server_error',
        param: null,
        code: null,
      },
    })
    return
  }

  const request = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>
  const path = (req.url ?? '').split('?', 1)[0]
  const model = typeof request.model === 'string' ? request.model : 'fake-model'
  const words =
    options.uncappedTokens === undefined
      ? wordsOf(options.replyText ?? DEFAULT_REPLY)
      : Array.from<string>({ length: capOf(request) ?? options.uncappedTokens }).fill(' w')
  const promptTokens = options.promptTokens ?? DEFAULT_PROMPT_TOKENS
  const stream = request.stream === true
  const wantsUsage =
    options.includeUsage === 'always' ||
    ((options.includeUsage ?? 'honour') === 'honour' &&
      (request.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true)

  if (stream && options.onlyEvent !== undefined) {
    await sendEvents(res, [{ data: JSON.stringify(options.onlyEvent) }], options)
    return
  }
  const callsTool = options.toolCall !== undefined && wantsToolCall(request)
  if (callsTool && options.toolCall !== undefined) {
    await sendToolCall(res, path ?? '', request, model, promptTokens, options.toolCall, options)
    return
  }
  switch (`${req.method} ${path}`) {
    case 'POST /v1/chat/completions': {
      const usage = {
        prompt_tokens: promptTokens,
        completion_tokens: words.length,
        total_tokens: promptTokens + words.length,
      }
      const base = { id: 'chatcmpl-fake', created: 1700000000, model }
      if (!stream) {
        sendJson(res, 200, {
          ...base,
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }],
          usage,
        })
        return
      }
      const nullUsage = wantsUsage ? { usage: null } : {}
      const events = [
        {
          ...base,
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
          ...nullUsage,
        },
        ...words.map((w) => ({
          ...base,
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: { content: w }, finish_reason: null }],
          ...nullUsage,
        })),
        {
          ...base,
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
          ...nullUsage,
        },
        ...(wantsUsage ? [{ ...base, object: 'chat.completion.chunk', choices: [], usage }] : []),
      ].map((e) => ({ data: JSON.stringify(e) }))
      await sendEvents(res, [...events, { data: '[DONE]' }], options)
      return
    }
    case 'POST /v1/completions': {
      const usage = {
        prompt_tokens: promptTokens,
        completion_tokens: words.length,
        total_tokens: promptTokens + words.length,
      }
      const base = { id: 'cmpl-fake', object: 'text_completion', created: 1700000000, model }
      if (!stream) {
        sendJson(res, 200, { ...base, choices: [{ index: 0, text: words.join(''), finish_reason: 'stop' }], usage })
        return
      }
      const events = [
        ...words.map((w) => ({ ...base, choices: [{ index: 0, text: w, finish_reason: null }] })),
        ...(wantsUsage ? [{ ...base, choices: [], usage }] : []),
      ].map((e) => ({ data: JSON.stringify(e) }))
      await sendEvents(res, [...events, { data: '[DONE]' }], options)
      return
    }
    case 'POST /v1/responses': {
      const usage = {
        input_tokens: promptTokens,
        output_tokens: words.length,
        total_tokens: promptTokens + words.length,
      }
      const done = {
        id: 'resp-fake',
        object: 'response',
        model,
        status: 'completed',
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: words.join('') }] }],
        usage,
      }
      if (!stream) {
        sendJson(res, 200, done)
        return
      }
      const events = [
        {
          event: 'response.created',
          data: JSON.stringify({
            type: 'response.created',
            response: { ...done, status: 'in_progress', output: [], usage: null },
          }),
        },
        ...words.map((w) => ({
          event: 'response.output_text.delta',
          data: JSON.stringify({ type: 'response.output_text.delta', delta: w }),
        })),
        { event: 'response.completed', data: JSON.stringify({ type: 'response.completed', response: done }) },
      ]
      await sendEvents(res, events, options)
      return
    }
    case 'POST /v1/embeddings':
      sendJson(res, 200, {
        object: 'list',
        model,
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
      })
      return
    case 'GET /v1/models':
      sendJson(res, 200, {
        object: 'list',
        data: [{ id: 'fake-model', object: 'model', created: 1700000000, owned_by: 'fake' }],
      })
      return
    case 'POST /v1/audio/transcriptions':
    case 'POST /v1/audio/translations':
    case 'POST /v1/images/edits':
    case 'POST /v1/files':
      sendJson(res, 200, {
        object: 'echo',
        content_type: req.headers['content-type'] ?? null,
        bytes: body.length,
        sha256: createHash('sha256').update(body).digest('hex'),
      })
      return
    default:
      sendJson(res, 404, {
        error: { message: 'Unknown fake route.', type: 'invalid_request_error', param: null, code: 'unknown_url' },
      })
  }
}

/** A request that declares tools and whose last turn is not a tool's result (chat or Responses). */
function wantsToolCall(request: Record<string, unknown>): boolean {
  if (!Array.isArray(request.tools) || request.tools.length === 0) return false
  const turns = Array.isArray(request.messages) ? request.messages : Array.isArray(request.input) ? request.input : []
  const last = turns.at(-1) as { role?: unknown; type?: unknown } | undefined
  return last?.role !== 'tool' && last?.type !== 'function_call_output'
}

async function sendToolCall(
  res: ServerResponse,
  path: string,
  request: Record<string, unknown>,
  model: string,
  promptTokens: number,
  call: { readonly name: string; readonly arguments: string },
  options: FakeUpstreamOptions,
): Promise<void> {
  const stream = request.stream === true
  if (path === '/v1/responses') {
    const usage = {
      input_tokens: promptTokens,
      output_tokens: TOOL_CALL_TOKENS,
      total_tokens: promptTokens + TOOL_CALL_TOKENS,
    }
    // Ids of their own per reply, as OpenAI's: the gateway remembers whose each output item is.
    const suffix = randomBytes(8).toString('hex')
    const item = { id: `fc_${suffix}`, type: 'function_call', status: 'completed', call_id: `call_${suffix}`, ...call }
    const done = { id: 'resp-fake', object: 'response', model, status: 'completed', output: [item], usage }
    if (!stream) return sendJson(res, 200, done)
    const at = { item_id: item.id, output_index: 0 }
    const events = [
      { type: 'response.created', response: { ...done, status: 'in_progress', output: [], usage: null } },
      { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', arguments: '' } },
      { type: 'response.function_call_arguments.delta', ...at, delta: call.arguments },
      { type: 'response.function_call_arguments.done', ...at, name: call.name, arguments: call.arguments },
      { type: 'response.output_item.done', output_index: 0, item },
      { type: 'response.completed', response: done },
    ]
    await sendEvents(
      res,
      events.map((e) => ({ event: e.type, data: JSON.stringify(e) })),
      options,
    )
    return
  }
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: TOOL_CALL_TOKENS,
    total_tokens: promptTokens + TOOL_CALL_TOKENS,
  }
  const base = { id: 'chatcmpl-fake', created: 1700000000, model }
  const toolCall = { id: 'call_fake', type: 'function', function: call }
  if (!stream) {
    sendJson(res, 200, {
      ...base,
      object: 'chat.completion',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: null, tool_calls: [toolCall] },
          finish_reason: 'tool_calls',
        },
      ],
      usage,
    })
    return
  }
  const chunk = (delta: unknown, finish: string | null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish }],
  })
  const events = [
    chunk(
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ index: 0, ...toolCall, function: { name: call.name, arguments: '' } }],
      },
      null,
    ),
    chunk({ tool_calls: [{ index: 0, function: { arguments: call.arguments } }] }, null),
    chunk({}, 'tool_calls'),
    { ...base, object: 'chat.completion.chunk', choices: [], usage },
  ]
  await sendEvents(res, [...events.map((e) => ({ data: JSON.stringify(e) })), { data: '[DONE]' }], options)
}

/** The request's own cap on its reply, if it sets one. */
function capOf(request: Record<string, unknown>): number | undefined {
  for (const member of ['max_completion_tokens', 'max_tokens', 'max_output_tokens']) {
    const value = request[member]
    if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value
  }
  return undefined
}

function wordsOf(text: string): string[] {
  return text.match(/\s*\S+/g) ?? []
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) })
  res.end(payload)
}

interface FakeEvent {
  readonly event?: string
  readonly data: string
}

async function sendEvents(
  res: ServerResponse,
  events: readonly FakeEvent[],
  options: FakeUpstreamOptions,
): Promise<void> {
  const eol = options.lineEnding ?? '\n'
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
  res.flushHeaders()
  let sent = 0
  for (const event of events) {
    if (res.destroyed) return
    if (options.stallAfterEvents !== undefined && sent >= options.stallAfterEvents) return // keep the socket open, silent
    if (options.dropAfterEvents !== undefined && sent >= options.dropAfterEvents) {
      // end(), not destroy(): what was written still arrives, then the connection closes
      // without the terminating chunk.
      res.socket?.end()
      return
    }
    const text = `${event.event === undefined ? '' : `event: ${event.event}${eol}`}data: ${event.data}${eol}${eol}`
    await writeSliced(res, Buffer.from(text, 'utf8'), options.sliceBytes)
    sent += 1
    if (options.eventDelayMs !== undefined) await sleep(options.eventDelayMs)
  }
  res.end()
}

async function writeSliced(res: ServerResponse, bytes: Buffer, sliceBytes: number | undefined): Promise<void> {
  if (sliceBytes === undefined) {
    res.write(bytes)
    return
  }
  for (let i = 0; i < bytes.length; i += sliceBytes) {
    if (res.destroyed) return
    res.write(bytes.subarray(i, i + sliceBytes))
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
}

// The adapter for Anthropic's Messages API (api.anthropic.com, or anything that speaks it).
// The corridor speaks chat completions; this adapter translates at the edge, one file per
// direction: the request out (request-out.ts), the reply in (reply-in.ts), the stream in
// (stream-in.ts, event by event, unbuffered) and the errors in (errors-in.ts). What comes
// back is what an OpenAI-compatible upstream would have sent, so the relay, its usage tap,
// failover and capacity treat it as they treat any other (capacity reads Anthropic's
// anthropic-ratelimit-* headers itself: src/capacity/upstream-headers.ts).
//
// The gateway's key goes as x-api-key. anthropic-version is the configured one, unless the
// caller spoke Anthropic (POST /v1/messages): then its own anthropic-version and
// anthropic-beta are passed on, since they were written for this API.
import type { IncomingMessage } from 'node:http'
import { pipeline, Readable } from 'node:stream'
import type { AnthropicBackendConfig } from '../../config/schema.ts'
import { gatewayError } from '../../errors.ts'
import { HOP_BY_HOP_HEADERS } from '../../http/hop-by-hop.ts'
import { mediaType } from '../../http/media-type.ts'
import { isJsonObject } from '../../json.ts'
import { sendUpstream, upstreamConnection } from '../http/send.ts'
import { watchBody } from '../http/watch-body.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../port.ts'
import { openAIErrorOf } from './errors-in.ts'
import { chatCompletionOf } from './reply-in.ts'
import { messagesRequestOf } from './request-out.ts'
import { ChatStreamTransform } from './stream-in.ts'

const HOP_BY_HOP = new Set(HOP_BY_HOP_HEADERS)
/** A whole (non-streamed) reply larger than this is not an answer any model gives. */
const MAX_JSON_BYTES = 32 * 1024 * 1024
/** The caller's headers passed on when it spoke Anthropic itself. */
const CALLER_HEADERS = ['anthropic-version', 'anthropic-beta'] as const

export function createAnthropicBackend(
  name: string,
  config: AnthropicBackendConfig,
  apiKey: string | undefined,
): BackendAdapter {
  const target = new URL(`${config.baseUrl.replace(/\/+$/, '')}/messages`)
  const connection = upstreamConnection(target.href, config)

  async function send(request: UpstreamRequest): Promise<UpstreamResponse> {
    if (request.endpoint !== 'chat.completions' || request.body.kind !== 'json')
      throw gatewayError('untranslatable_feature', {
        message: `${request.endpoint} is not supported by this model's upstream, which speaks Anthropic's Messages API.`,
      })
    const body = messagesRequestOf(request.body.value, request.model ?? String(request.body.value.model), config)
    const bytes = Buffer.from(JSON.stringify(body), 'utf8')
    const response = await sendUpstream(connection, target, headersOf(request), bytes, request)
    return replyOf(response, request.signal, body.stream === true)
  }

  function headersOf(request: UpstreamRequest): Record<string, string> {
    const headers: Record<string, string> = {
      ...config.headers,
      'content-type': 'application/json',
      'accept-encoding': 'identity',
      'anthropic-version': config.version,
      'x-request-id': request.requestId,
      ...request.trace,
    }
    const caller = request.client.req
    if (caller.url?.startsWith('/v1/messages') === true) {
      for (const header of CALLER_HEADERS) {
        const value = caller.headers[header]
        if (typeof value === 'string' && value !== '') headers[header] = value
      }
    }
    if (apiKey !== undefined) headers['x-api-key'] = apiKey
    return headers
  }

  /** The upstream's response in OpenAI's terms: a stream translated as it flows, a JSON reply translated whole. */
  async function replyOf(response: IncomingMessage, signal: AbortSignal, stream: boolean): Promise<UpstreamResponse> {
    const status = response.statusCode ?? 502
    const headers = headersIn(response)
    const body = watchBody(response, config.idleTimeoutMs, signal)
    const created = Math.floor(Date.now() / 1000)
    if (status < 300 && stream && mediaType(headers['content-type'] ?? '') === 'text/event-stream') {
      const translated = new ChatStreamTransform(created)
      // Errors travel both ways: an upstream failure ends the stream with it, a client gone destroys the upstream's.
      pipeline(body, translated, () => undefined)
      return { status, headers: { ...headers, 'content-type': 'text/event-stream' }, body: translated }
    }
    const text = await readWhole(body)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    if (status < 300 && !isJsonObject(parsed))
      throw gatewayError('upstream_bad_response', {
        message: 'The upstream model server sent a reply that is not JSON.',
      })
    const out = status < 300 ? { status, body: chatCompletionOf(parsed, created) } : openAIErrorOf(status, parsed)
    const bytes = Buffer.from(JSON.stringify(out.body), 'utf8')
    return {
      status: out.status,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(bytes.length) },
      body: Readable.from([bytes]),
    }
  }

  return {
    name,
    type: 'anthropic',
    supports: (endpoint) => endpoint === 'chat.completions',
    send,
    async close() {
      connection.agent.destroy()
    },
  }
}

/** The response's headers, lower-case, less those of the connection and the body's length (the body is rewritten). */
function headersIn(response: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'content-length') continue
    headers[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return headers
}

async function readWhole(body: Readable): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk))
    size += bytes.length
    if (size > MAX_JSON_BYTES) {
      body.destroy()
      throw gatewayError('upstream_bad_response', {
        message: 'The upstream model server sent a reply too large to read.',
      })
    }
    chunks.push(bytes)
  }
  return Buffer.concat(chunks).toString('utf8')
}

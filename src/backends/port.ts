// The inference backend port. An adapter turns one upstream request into one upstream
// response in OpenAI's wire format (JSON, or server-sent events when streaming); the
// relay in src/proxy taps the token usage from that response. Capabilities an adapter
// lacks are declared by supports(), never silently ignored.
import type { TraceHeaders } from '../observability/tracing.ts'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { Endpoint } from '../config/schema.ts'
import type { RequestBody } from '../http/body.ts'

export interface UpstreamRequest {
  readonly endpoint: Endpoint
  readonly method: 'GET' | 'POST' | 'DELETE'
  /** Path under the backend's API root, query string included: "/chat/completions", "/files/file-1". */
  readonly path: string
  /** The model as the upstream knows it (after the configured rewrite), or null. */
  readonly model: string | null
  /** JSON bodies arrive with `model` already rewritten and stream_options already set. */
  readonly body: RequestBody
  readonly requestId: string
  /** Aborted when the client goes away or the gateway gives up: stop work, free the socket. */
  readonly signal: AbortSignal
  /**
   * The client's exchange. The openai adapter hands it to http-proxy-3, which takes the
   * method from it and watches it for disconnects. Its body was already read (use `body`),
   * and no adapter writes to `res`: the relay does.
   */
  readonly client: { readonly req: IncomingMessage; readonly res: ServerResponse }
  /** The W3C trace context of this attempt's span, sent upstream in place of the client's (traces on). */
  readonly trace?: TraceHeaders
}

export interface UpstreamResponse {
  readonly status: number
  /** Lower-case names; hop-by-hop headers already removed. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Readable
}

export interface BackendAdapter {
  readonly name: string
  readonly type: 'openai' | 'anthropic' | 'mock' | 'gemini' | 'bedrock'
  supports(endpoint: Endpoint): boolean
  /**
   * Sends the request. Resolves once response headers are in. Rejects with GatewayError
   * 'upstream_unreachable' (could not connect: safe to fail over) or 'upstream_timeout'.
   * A stalled body is destroyed with GatewayError 'upstream_timeout'.
   */
  send(request: UpstreamRequest): Promise<UpstreamResponse>
  /** Resolves once the adapter can serve without a slow first call; awaited before the gateway listens. */
  ready?(): Promise<void>
  close(): Promise<void>
}

/**
 * A call's tokens. inputTokens is the whole prompt, as the upstream reports it (what rate
 * limits, quotas and the capacity count); the cache parts are parts of it, never more than
 * it together: what the upstream read from its prompt cache and what it wrote to it, which
 * plans price apart (keys/money.ts, callCost). Absent is 0: nothing was cached.
 */
export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  /** Of inputTokens, read from the upstream's prompt cache (OpenAI's cached_tokens). */
  readonly cacheReadTokens?: number
  /** Of inputTokens, written to the upstream's prompt cache (Anthropic's cache_creation_input_tokens). */
  readonly cacheWriteTokens?: number
}

export const NO_USAGE: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0 })

// The adapter for Google's Gemini API (ai.google.dev/api): a chat completion call goes out
// as `models/{model}:generateContent` (or `:streamGenerateContent?alt=sse` when it streams)
// with the gateway's key in x-goog-api-key, and its answer comes back in OpenAI's wire format,
// so the relay, its usage tap and every step after it are those of any other upstream. The
// translations are in gemini/, one file per format and direction; this file carries the
// bytes: its own request (nothing of the client's headers reaches Google), timeouts, and
// every way the connection can fail as the GatewayError failover expects.
import { pipeline, Readable } from 'node:stream'
import type { GeminiBackendConfig } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from './port.ts'
import { geminiErrorOf } from './gemini/errors-in.ts'
import { chatCompletionOf } from './gemini/reply-in.ts'
import { geminiRequestOf } from './gemini/request-out.ts'
import { GeminiStreamIn } from './gemini/stream-in.ts'
import { createVertexAuth, type VertexAuth } from './gemini/vertex-auth.ts'
import { readAll, translatedWhole } from './http/read-body.ts'
import { sendUpstream, upstreamConnection } from './http/send.ts'
import { watchBody } from './http/watch-body.ts'

/** How much of an error body is read to translate it. */
const ERROR_BODY_BYTES = 64 * 1024
/** A whole (non-streamed) reply larger than this is not a chat completion. */
const REPLY_BYTES = 64 * 1024 * 1024
/** What a configured model name may hold: Gemini's resource names (models/…, tunedModels/…). */
const MODEL_NAME = /^(?:(?:models|tunedModels)\/)?[A-Za-z0-9][\w.-]*$/

/** `secret`: the API key, or on Vertex AI the service account's key (JSON). */
export function createGeminiBackend(
  name: string,
  config: GeminiBackendConfig,
  secret: string | undefined,
): BackendAdapter {
  const vertex = config.vertex
  const root = (config.baseUrl ?? defaultRoot(vertex?.location)).replace(/\/+$/, '')
  // On Vertex AI a model is a publisher's, in the project's location.
  const models =
    vertex === undefined ? root : `${root}/projects/${vertex.project}/locations/${vertex.location}/publishers/google`
  const connection = upstreamConnection(root, config)
  const apiKey: Record<string, string> = secret === undefined ? {} : { 'x-goog-api-key': secret }
  const auth: VertexAuth =
    vertex === undefined
      ? { headers: () => Promise.resolve(apiKey), forget: () => undefined }
      : createVertexAuth(secret, { tokenUrl: vertex.tokenUrl, timeoutMs: config.responseTimeoutMs })

  async function send(request: UpstreamRequest): Promise<UpstreamResponse> {
    if (request.endpoint !== 'chat.completions' || request.body.kind !== 'json')
      throw gatewayError('capability_missing')
    const model = request.model ?? ''
    if (!MODEL_NAME.test(model)) throw gatewayError('internal', { message: `Not a Gemini model name: ${model}` })
    const stream = request.body.value.stream === true
    const bytes = Buffer.from(JSON.stringify(geminiRequestOf(request.body.value, model)), 'utf8')
    const resource = model.includes('/') ? model : `models/${model}`
    const url = new URL(`${models}/${resource}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`)
    const headers = {
      ...config.headers,
      'content-type': 'application/json',
      'accept-encoding': 'identity',
      'x-request-id': request.requestId,
      ...request.trace,
      ...(await auth.headers()),
    }
    const upstream = await sendUpstream(connection, url, headers, bytes, request)
    const status = upstream.statusCode ?? 502
    const body = watchBody(upstream, config.idleTimeoutMs, request.signal)
    if (status >= 400) {
      const error = geminiErrorOf(status, (await readAll(body, ERROR_BODY_BYTES, true)).toString('utf8'))
      // A refused credential: the corridor answers upstream_auth_failed and reads no body.
      if (error.status === 401) auth.forget()
      if (error.status === 401 || error.status === 403)
        return { status: error.status, headers: {}, body: Readable.from([]) }
      return {
        status: error.status,
        headers: { ...error.headers, 'content-type': 'application/json' },
        body: Readable.from([Buffer.from(JSON.stringify(error.body))]),
      }
    }
    const created = Math.floor(Date.now() / 1000)
    if (stream) {
      // Each event goes out as it comes; an upstream failure mid-stream reaches the relay through it.
      const events = new GeminiStreamIn(model, created)
      events.on('error', () => undefined)
      pipeline(body, events, () => undefined)
      return { status, headers: { 'content-type': 'text/event-stream' }, body: events }
    }
    return {
      status,
      headers: { 'content-type': 'application/json' },
      body: Readable.from(translatedWhole(body, REPLY_BYTES, (reply) => chatCompletionOf(reply, model, created))),
    }
  }

  return {
    name,
    type: 'gemini',
    supports: (endpoint) => endpoint === 'chat.completions',
    send,
    async close() {
      connection.agent.destroy()
    },
  }
}

function defaultRoot(location: string | undefined): string {
  if (location === undefined) return 'https://generativelanguage.googleapis.com/v1beta'
  return location === 'global'
    ? 'https://aiplatform.googleapis.com/v1'
    : `https://${location}-aiplatform.googleapis.com/v1`
}

// The Responses API on a deployment that speaks only chat completions (an anthropic or a
// gemini backend, and any adapter that supports chat.completions and not responses). The
// translation is per deployment: the corridor sends each deployment it tries the request
// in the deployment's own language (a chat completion for this one, the Responses request
// as it came for an openai or mock one), and this deployment's reply is turned back into
// the Responses API's before the relay sees it. So the relay's usage tap, the limits, the
// budgets, metering and traces see a Responses reply with the upstream's exact usage, as
// from any other deployment, and a model whose deployments mix both kinds fails over
// between them freely.
//
// What a chat-only deployment cannot be asked for is refused (400 untranslatable_feature),
// for the model as a whole, at the intake, before anything is admitted: a call's outcome
// does not depend on which deployment a pick lands on.
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../../backends/port.ts'
import type { BackendRegistry, Deployment, ModelRoute } from '../../backends/registry.ts'
import type { Endpoint } from '../../config/schema.ts'
import type { RequestBody } from '../../http/body.ts'
import { mediaType } from '../../http/media-type.ts'
import type { JsonObject } from '../../json.ts'
import type { EndpointSpec } from '../endpoints.ts'
import { deploymentsFor, translate, type UpstreamCall } from '../upstream-request.ts'
import { responseOfChat } from './reply.ts'
import { chatRequestOf } from './request.ts'
import { ResponsesStreamTransform } from './stream.ts'

/** Whether `adapter` serves `endpoint` only through this translation. */
export function overChat(endpoint: Endpoint, adapter: Pick<BackendAdapter, 'supports'>): boolean {
  return endpoint === 'responses' && !adapter.supports('responses') && adapter.supports('chat.completions')
}

/** Whether `adapter` can serve `endpoint`, natively or through this translation. */
export function serves(endpoint: Endpoint, adapter: Pick<BackendAdapter, 'supports'>): boolean {
  return adapter.supports(endpoint) || overChat(endpoint, adapter)
}

/** The deployments that may serve a call (upstream-request.ts) and can: natively, or through this translation. */
export function deploymentsServing(
  registry: BackendRegistry,
  spec: EndpointSpec,
  modelName: string | null,
): readonly Deployment[] {
  return deploymentsFor(registry, spec, modelName).filter((t) => serves(spec.endpoint, t.adapter))
}

/**
 * Refuses, at the intake, a Responses body that some deployment of the model would have to
 * be sent as a chat completion and that cannot be (once per kind of backend: what one can
 * be asked for can depend on it, as reasoning does).
 */
export function checkTranslatable(endpoint: Endpoint, body: RequestBody, route: ModelRoute | undefined): void {
  if (body.kind !== 'json' || route === undefined) return
  const types = new Set(route.deployments.filter((d) => overChat(endpoint, d.adapter)).map((d) => d.adapter.type))
  for (const type of types) chatRequestOf(body.value, { type })
}

/**
 * The request for `target`: as the call came (upstream-request.ts), or for a chat-only
 * deployment the chat completion it translates to, with the model, the gateway's output
 * cap and the stream's usage asked for as any chat call's.
 */
export function requestFor(call: UpstreamCall, target: Deployment, sentCap: number | undefined): UpstreamRequest {
  if (!overChat(call.endpoint, target.adapter) || call.body.kind !== 'json') return translate(call, target, sentCap)
  const cap = target.adapter.type === 'mock' ? undefined : sentCap
  const chat = chatRequestOf(call.body.value, {
    type: target.adapter.type,
    ...(cap === undefined ? {} : { sentCap: cap }),
  })
  return translate(
    { ...call, endpoint: 'chat.completions', path: '/chat/completions', body: { kind: 'json', value: chat } },
    target,
  )
}

/**
 * A chat-only deployment's reply as the Responses API's: a stream event by event, a whole
 * reply whole. An error status goes as it came: the backends answer it in OpenAI's error
 * shape, which is the Responses API's too.
 */
export function replyFor(
  response: UpstreamResponse,
  call: Pick<UpstreamCall, 'endpoint' | 'body'>,
  target: Deployment,
): UpstreamResponse {
  if (!overChat(call.endpoint, target.adapter) || call.body.kind !== 'json' || response.status >= 300) return response
  const request = call.body.value
  const headers = { ...response.headers }
  delete headers['content-length']
  if (mediaType(response.headers['content-type'] ?? '') === 'text/event-stream') {
    const events = new ResponsesStreamTransform(request)
    // Either side's end is the other's: a client gone stops the upstream, an upstream broken off ends the stream in error.
    pipeline(response.body, events).catch(() => undefined)
    return { status: response.status, headers, body: events }
  }
  return { status: response.status, headers, body: Readable.from(wholeReply(response.body, request)) }
}

async function* wholeReply(body: Readable, request: JsonObject): AsyncGenerator<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of body) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer))
  let chat: unknown
  try {
    chat = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    // Not JSON: the relay judges it as it would the upstream's own (upstream_bad_response).
    yield Buffer.concat(chunks)
    return
  }
  yield Buffer.from(JSON.stringify(responseOfChat(chat, request)))
}

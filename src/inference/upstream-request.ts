// What a deployment is sent for a call: the counterpart of envoy ai-gateway's request
// translator, for OpenAI-compatible upstreams. The client's body goes upstream as it came,
// except where the deployment or the gateway needs otherwise: the model becomes the
// deployment's own name for it, a call that set no output cap is sent the one it holds
// (Estimate.sentCap, limits/estimate.ts), and a stream of chat or completions asks for usage (the
// gateway charges from it; the relay hides the usage chunk from a client that did not
// ask); the private member only an anthropic backend reads is taken off for any other.
// Pure: the same call and deployment give the same request, so failover can build one per
// deployment it tries.
import type { BackendAdapter, UpstreamRequest } from '../backends/port.ts'
import type { BackendRegistry, Deployment } from '../backends/registry.ts'
import type { Endpoint } from '../config/schema.ts'
import type { RequestBody } from '../http/body.ts'
import type { Params } from '../http/router.ts'
import { wireBytes } from '../http/json-bytes.ts'
import { isJsonObject } from '../json.ts'
import { withoutAnthropicCarried } from '../protocols/anthropic/carried.ts'
import type { EndpointSpec } from './endpoints.ts'

/**
 * The member that caps a call's output, per endpoint, for a call that named none and is sent
 * the gateway's cap. Chat gets `max_tokens`, not `max_completion_tokens`: every
 * OpenAI-compatible server reads it (vLLM, Ollama, LM Studio, TGI, Azure of any API version),
 * while Ollama and LM Studio ignore `max_completion_tokens` without a word, which would let
 * the call run uncapped. The one family that refuses `max_tokens`, OpenAI's reasoning models,
 * refuses it aloud (400, nothing generated, nothing charged): their clients send
 * `max_completion_tokens` themselves, or their tier holds the model's ceiling instead.
 */
const CAP_MEMBER: Partial<Readonly<Record<Endpoint, string>>> = {
  'chat.completions': 'max_tokens',
  completions: 'max_tokens',
  responses: 'max_output_tokens',
}

/** Endpoints whose streamed usage the upstream only reports when asked. */
const ASK_FOR_STREAM_USAGE: ReadonlySet<Endpoint> = new Set(['chat.completions', 'completions'])

/** Whether the reply streams, and whether the client asked to see its usage. */
export interface StreamAsk {
  /** The endpoint can stream and the body asks it to. */
  readonly stream: boolean
  /** The client set stream_options.include_usage itself. */
  readonly clientWantsUsage: boolean
}

/** A call as any deployment would be sent it; `translate` fills in the deployment. */
export interface UpstreamCall extends Pick<
  UpstreamRequest,
  'endpoint' | 'method' | 'path' | 'body' | 'requestId' | 'signal' | 'client'
> {
  readonly stream: boolean
}

export function streamAskOf(spec: Pick<EndpointSpec, 'streams'>, body: RequestBody): StreamAsk {
  const json = body.kind === 'json' ? body.value : null
  // A multipart form (a streamed transcription) says it as the text field "true".
  const asked = json ? json.stream === true : body.kind === 'multipart' && body.fields.stream === 'true'
  const stream = spec.streams === true && asked
  const options = json?.stream_options as { include_usage?: unknown } | null | undefined
  return { stream, clientWantsUsage: stream && options?.include_usage === true }
}

/** The upstream's path for the endpoint, with the client's query. */
export function upstreamPathOf(
  spec: Pick<EndpointSpec, 'upstreamPath'>,
  params: Params,
  query: URLSearchParams,
): string {
  const search = query.toString()
  return spec.upstreamPath(params) + (search ? `?${search}` : '')
}

/**
 * The body a deployment is sent: a JSON body names the deployment's model (when it has a
 * name of its own), carries the gateway's output cap when the call set none (`sentCap`, in
 * the endpoint's own member) and, streaming chat or completions, asks for usage, keeping the
 * client's other stream_options. A form or no body goes as it came. A JSON body read from
 * the client goes as the bytes it sent, patched where a member changes (json-bytes.ts).
 */
export function upstreamBodyOf(
  endpoint: Endpoint,
  body: RequestBody,
  upstreamModel: string | null,
  stream: boolean,
  sentCap?: number,
): RequestBody {
  if (body.kind !== 'json') return body
  const changes = new Map<string, unknown>()
  if (upstreamModel !== null && 'model' in body.value && body.value.model !== upstreamModel)
    changes.set('model', upstreamModel)
  const capMember = CAP_MEMBER[endpoint]
  if (sentCap !== undefined && capMember !== undefined) changes.set(capMember, sentCap)
  if (stream && ASK_FOR_STREAM_USAGE.has(endpoint)) {
    const options = body.value.stream_options
    if (!isJsonObject(options) || options.include_usage !== true)
      changes.set('stream_options', { ...(typeof options === 'object' ? options : {}), include_usage: true })
  }
  const value = changes.size === 0 ? body.value : { ...body.value, ...Object.fromEntries(changes) }
  const wire = body.received === undefined ? undefined : wireBytes(body.received, changes)
  return { kind: 'json', value, ...(wire === undefined ? {} : { wire }) }
}

/**
 * The request for `target`, whose upstream knows the model as its `upstreamModel`; `sentCap`
 * is the cap per reply of a call that set none (Estimate.sentCap). The built-in mock is not
 * sent it: it writes any cap to the token, where a model stops before it, and its reply
 * without one is its own configured length (defaultCompletionTokens).
 */
export function translate(
  call: UpstreamCall,
  target: Pick<Deployment, 'upstreamModel'> & { readonly adapter: Pick<BackendAdapter, 'type'> },
  sentCap?: number,
): UpstreamRequest {
  const model = target.upstreamModel
  const cap = target.adapter.type === 'mock' ? undefined : sentCap
  return {
    endpoint: call.endpoint,
    method: call.method,
    path: call.path,
    model,
    body: upstreamBodyOf(call.endpoint, privateTo(target.adapter.type, call.body), model, call.stream, cap),
    requestId: call.requestId,
    signal: call.signal,
    client: call.client,
  }
}

/**
 * The body without what only an anthropic backend reads (protocols/anthropic/carried.ts),
 * for any other. Only a translated body holds it, and that has no client bytes to keep.
 */
function privateTo(type: string, body: RequestBody): RequestBody {
  if (type === 'anthropic' || body.kind !== 'json') return body
  const value = withoutAnthropicCarried(body.value)
  return value === body.value ? body : { kind: 'json', value }
}

/** The deployments that may serve a call: the model's, or the one resources deployment. */
export function deploymentsFor(
  registry: BackendRegistry,
  spec: EndpointSpec,
  modelName: string | null,
): readonly Deployment[] {
  if (spec.resource) return [registry.resources]
  const route = modelName === null ? undefined : registry.model(modelName)
  return route?.deployments ?? []
}

// Anthropic's Messages API, inbound: POST /v1/messages and /v1/messages/count_tokens, so
// that Anthropic's SDKs and Claude Code work with only their base URL and key changed.
// A message walks the corridor as a chat completion (the one internal call): the request
// is translated at the door (request-in.ts), the reply on its way out (reply-sink.ts), and
// everything between (the key, its scopes and limits, budgets, the deployments and their
// capacity, metering, traces, the access log) is the chat completion's, unchanged. Errors,
// the gateway's own and the upstream's, are answered in Anthropic's shape (errors.ts),
// with the key's limits as anthropic-ratelimit-* headers beside the x-ratelimit-* ones.
//
// The key needs the chat.completions scope for both routes. The query string (Anthropic's
// SDKs add `?beta=true` on their beta paths) selects nothing; the anthropic-version /
// anthropic-beta headers reach an anthropic backend only (backends/anthropic): a beta feature
// is asked for in the body, where request-in.ts carries or refuses it. Extended thinking is
// carried when every deployment of the model speaks Anthropic, refused otherwise.
import type { BackendRegistry } from '../../backends/registry.ts'
import type { Config } from '../../config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from '../../errors.ts'
import { discardUnreadBody, readJsonBody } from '../../http/body.ts'
import type { RequestContext } from '../../http/context.ts'
import { unknownRouteMessage } from '../../http/route-hints.ts'
import type { JsonObject } from '../../json.ts'
import { sendJson } from '../../http/reply.ts'
import type { Router } from '../../http/router.ts'
import type { OpenCall } from '../../inference/caller.ts'
import { liveExchange, type AdmissionStrategy, type Corridor } from '../../inference/corridor.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from '../../inference/endpoints.ts'
import { checkModelScope } from '../../inference/scopes.ts'
import { countPromptTokens } from '../../limits/estimate.ts'
import type { RuntimeSource } from '../../runtime/snapshot.ts'
import { anthropicErrorOf } from './errors.ts'
import { modelInfoOf, modelPageOf } from './models-out.ts'
import { mirrorRateLimitHeaders } from './ratelimit-headers.ts'
import { AnthropicReplySink } from './reply-sink.ts'
import { chatRequestOf } from './request-in.ts'

export interface AnthropicRouteDeps {
  readonly config: Pick<Config, 'server'>
  readonly runtime: RuntimeSource
  readonly corridor: Corridor
  /** How a message is admitted: /v2's (the limiter once; over the limit is the caller's 429). */
  readonly admission: AdmissionStrategy
  readonly openCall: OpenCall
}

const CHAT: EndpointSpec = (() => {
  const spec = PROXIED_ENDPOINTS.find((s) => s.endpoint === 'chat.completions')
  if (spec === undefined) throw new Error('the chat.completions endpoint is missing')
  return spec
})()

/** No query reaches the upstream: see the top of this file. */
const NO_QUERY = (): URLSearchParams => new URLSearchParams()

export function registerAnthropicRoutes(router: Router, deps: AnthropicRouteDeps): void {
  const { corridor, admission } = deps

  router.on('POST', '/v1/messages', (ctx, params) =>
    answering(ctx, () =>
      corridor.enter(
        ctx,
        CHAT,
        params,
        NO_QUERY(),
        async (call) => {
          await corridor.run(call, { ...liveExchange(ctx), sink: new AnthropicReplySink(ctx.res, ctx.id) }, admission)
        },
        {
          route: 'anthropic.messages',
          inbound: (body, registry) => chatRequestOf(body, 'create', { thinking: speaksAnthropic(registry, body) }),
        },
      ),
    ),
  )

  // The models the key may use, in Anthropic's shape, for a caller that speaks it (its SDKs
  // always send anthropic-version). Any other caller is where an OpenAI SDK with a /v1 base
  // URL lands: it gets the 404 that points it at /v2, as every other inference path under /v1.
  router.on('GET', '/v1/models', async (ctx, _params, query) => {
    if (ctx.req.headers['anthropic-version'] === undefined) throw notUnderV1(ctx)
    await answering(ctx, async () => {
      const principal = await deps.openCall(ctx, 'anthropic.models.list', 'models.list')
      sendJson(ctx.res, 200, modelPageOf(deps.runtime.current.catalogue.list(principal, 'chat').data, query))
    })
  })
  router.on('GET', '/v1/models/*', async (ctx, params) => {
    const id = params['*'] ?? ''
    if (ctx.req.headers['anthropic-version'] === undefined) throw notUnderV1(ctx)
    await answering(ctx, async () => {
      const principal = await deps.openCall(ctx, 'anthropic.models.get', 'models.get')
      sendJson(ctx.res, 200, modelInfoOf(deps.runtime.current.catalogue.get(principal, id)))
    })
  })

  router.on('POST', '/v1/messages/count_tokens', (ctx) =>
    answering(ctx, async () => {
      const principal = await deps.openCall(ctx, 'anthropic.count_tokens', 'chat.completions')
      const body = await readJsonBody(ctx.req, deps.config.server.jsonBodyLimitBytes)
      const chat = chatRequestOf(body.value, 'count_tokens', {
        thinking: speaksAnthropic(deps.runtime.current.registry, body.value),
      })
      const model = chat.model as string
      const route = deps.runtime.current.registry.model(model)
      if (route === undefined || !(CHAT.modelKinds ?? []).includes(route.config.kind))
        throw gatewayError('model_not_found', {
          message: 'The model does not exist or cannot be used for messages.',
          param: 'model',
        })
      checkModelScope(principal, model)
      ctx.model = model
      const inputTokens = await countPromptTokens('chat.completions', chat)
      mirrorRateLimitHeaders(ctx.res)
      sendJson(ctx.res, 200, { input_tokens: inputTokens })
    }),
  )
}

/** The 404 of an inference path under /v1 for a caller that does not speak Anthropic: it names the /v2 path. */
function notUnderV1(ctx: RequestContext): GatewayError {
  return gatewayError('unknown_route', {
    message: unknownRouteMessage(ctx.req.method ?? 'GET', ctx.req.url ?? '/v1/models', () => true),
  })
}

/**
 * Whether every deployment of the body's model speaks Anthropic's features (what only they can
 * be asked for may pass): an anthropic backend, or bedrock, whose Converse carries Claude's
 * extended thinking (additionalModelRequestFields.thinking, reasoningContent with its signature).
 */
function speaksAnthropic(registry: BackendRegistry, body: JsonObject): boolean {
  const route = typeof body.model === 'string' ? registry.model(body.model) : undefined
  return (
    route !== undefined &&
    route.deployments.length > 0 &&
    route.deployments.every((d) => d.adapter.type === 'anthropic' || d.adapter.type === 'bedrock')
  )
}

/** Runs a route, answering whatever it throws in Anthropic's shape (the access log still records the entry's name). */
async function answering(ctx: RequestContext, route: () => Promise<void>): Promise<void> {
  ctx.res.setHeader('request-id', ctx.id)
  try {
    await route()
  } catch (err) {
    const error = toGatewayError(err)
    // A store outage is store_unavailable (and the app's outage log's); only the unknown is an error with a stack.
    if (!(err instanceof GatewayError) && error.errorName === 'internal') ctx.log.error({ err }, 'unhandled error')
    ctx.errorName = error.errorName
    if (error.errorName !== 'request_timeout') discardUnreadBody(ctx.req, ctx.res)
    if (ctx.res.headersSent) {
      if (!ctx.res.writableEnded) ctx.res.end()
      return
    }
    const { status, body } = anthropicErrorOf(error, ctx.id)
    for (const [name, value] of Object.entries(error.headers)) ctx.res.setHeader(name, value)
    mirrorRateLimitHeaders(ctx.res)
    sendJson(ctx.res, status, body)
  }
}

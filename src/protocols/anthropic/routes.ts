// Anthropic's Messages API, inbound: POST /v1/messages and /v1/messages/count_tokens, so
// that Anthropic's SDKs and Claude Code work with only their base URL and key changed.
// A message walks the corridor as a chat completion (the one internal call): the request
// is translated at the door (request-in.ts), the reply on its way out (reply-sink.ts), and
// everything between (the key, its scopes and limits, budgets, the deployments and their
// capacity, metering, traces, the access log) is the chat completion's, unchanged. Errors,
// the gateway's own and the upstream's, are answered in Anthropic's shape (errors.ts),
// with the key's limits as anthropic-ratelimit-* headers beside the x-ratelimit-* ones.
//
// The same routes under /queue (an SDK's base URL http://host/queue): POST /queue/v1/messages
// waits in the key's line instead of answering 429, streams included (the drop-in queue's
// admission, queue/waiter.ts), or with `Prefer: respond-async` is stored and answered 202
// with its poll location; the stored request remembers that its caller speaks Anthropic
// (StoredCall.protocol), so polling shows its reply in Anthropic's shape (queued-result.ts),
// whichever gateway ran it and however many restarts later.
//
// The key needs the chat.completions scope for both routes. The query string (Anthropic's
// SDKs add `?beta=true` on their beta paths) selects nothing; the anthropic-version /
// anthropic-beta headers reach an anthropic backend only (backends/anthropic): a beta feature
// is asked for in the body, where request-in.ts carries or refuses it. Extended thinking is
// carried when every deployment of the model can think (an anthropic backend, or the
// built-in mock, which thinks as Claude does), refused otherwise.
import type { BackendRegistry } from '../../backends/registry.ts'
import type { Config } from '../../config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from '../../errors.ts'
import { discardUnreadBody, readJsonBody } from '../../http/body.ts'
import { bodyRateOf } from '../../http/body-rate.ts'
import type { RequestContext } from '../../http/context.ts'
import { unknownRouteMessage } from '../../http/route-hints.ts'
import type { JsonObject } from '../../json.ts'
import { sendJson } from '../../http/reply.ts'
import type { Router } from '../../http/router.ts'
import type { OpenCall } from '../../inference/caller.ts'
import type { AdmissionStrategy, Corridor } from '../../inference/corridor.ts'
import { liveExchange } from '../../inference/live.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from '../../inference/endpoints.ts'
import { checkModelScope } from '../../inference/scopes.ts'
import type { QueueService } from '../../queue/service.ts'
import { prefersAsync } from '../../queue/routes.ts'
import { countPromptTokens } from '../../limits/estimate.ts'
import type { RuntimeSource } from '../../runtime/snapshot.ts'
import { anthropicErrorOf } from './errors.ts'
import { modelInfoOf, modelPageOf } from './models-out.ts'
import { mirrorRateLimitHeaders } from './ratelimit-headers.ts'
import { AnthropicReplySink } from './reply-sink.ts'
import { chatRequestOf } from './request-in.ts'

export interface AnthropicRouteDeps {
  readonly config: Pick<Config, 'server' | 'queue'>
  readonly runtime: RuntimeSource
  readonly corridor: Corridor
  /** How a message is admitted: /v2's (the limiter once; over the limit is the caller's 429). */
  readonly admission: AdmissionStrategy
  readonly openCall: OpenCall
  /** The queue: the routes' /queue twins (none without it). */
  readonly queue?: QueueService
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

  const inbound = (body: JsonObject, registry: BackendRegistry): JsonObject =>
    chatRequestOf(body, 'create', { thinking: canThink(registry, body) })

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
        { route: 'anthropic.messages', inbound },
      ),
    ),
  )

  const { queue } = deps
  const bodyRate = bodyRateOf(deps.config.server)
  if (queue !== undefined) {
    const bodyLimitReason = `Asynchronous requests are kept until they run: at most ${deps.config.queue.maxBodyBytes} bytes (queue.maxBodyBytes).`
    router.on('POST', '/queue/v1/messages', (ctx, params) =>
      answering(ctx, () =>
        prefersAsync(ctx.req)
          ? corridor.enter(ctx, CHAT, params, NO_QUERY(), (call) => queue.accept(ctx, call, 'anthropic'), {
              route: 'queue.anthropic.messages.async',
              inbound,
              bodyLimitBytes: deps.config.queue.maxBodyBytes,
              bodyLimitReason,
            })
          : corridor.enter(
              ctx,
              CHAT,
              params,
              NO_QUERY(),
              async (call) => {
                const sink = new AnthropicReplySink(ctx.res, ctx.id)
                await corridor.run(call, { ...liveExchange(ctx), sink }, queue.waitInLine(ctx.signal))
              },
              { route: 'queue.anthropic.messages', inbound, waitsInLine: true },
            ),
      ),
    )
  }

  // An SDK whose base URL is the queue's asks for these there too: they do not wait, and answer as above.
  for (const prefix of queue === undefined ? [''] : ['', '/queue']) {
    // The models the key may use, in Anthropic's shape, for a caller that speaks it (its SDKs
    // always send anthropic-version). Any other caller is where an OpenAI SDK with a /v1 base
    // URL lands: it gets the 404 that points it at /v2, as every other inference path under /v1.
    router.on('GET', `${prefix}/v1/models`, async (ctx, _params, query) => {
      if (ctx.req.headers['anthropic-version'] === undefined) throw notUnderV1(ctx)
      await answering(ctx, async () => {
        const principal = await deps.openCall(ctx, 'anthropic.models.list', 'models.list')
        sendJson(ctx.res, 200, modelPageOf(deps.runtime.current.catalogue.list(principal, 'chat').data, query))
      })
    })
    router.on('GET', `${prefix}/v1/models/*`, async (ctx, params) => {
      const id = params['*'] ?? ''
      if (ctx.req.headers['anthropic-version'] === undefined) throw notUnderV1(ctx)
      await answering(ctx, async () => {
        const principal = await deps.openCall(ctx, 'anthropic.models.get', 'models.get')
        sendJson(ctx.res, 200, modelInfoOf(deps.runtime.current.catalogue.get(principal, id)))
      })
    })

    router.on('POST', `${prefix}/v1/messages/count_tokens`, (ctx) =>
      answering(ctx, async () => {
        const principal = await deps.openCall(ctx, 'anthropic.count_tokens', 'chat.completions')
        // At the body rate every route keeps: a body that stops arriving ends the request (408), not holds it.
        const body = await readJsonBody(ctx.req, deps.config.server.jsonBodyLimitBytes, bodyRate)
        const chat = chatRequestOf(body.value, 'count_tokens', {
          thinking: canThink(deps.runtime.current.registry, body.value),
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
}

/** The 404 of an inference path under /v1 for a caller that does not speak Anthropic: it names the /v2 path. */
function notUnderV1(ctx: RequestContext): GatewayError {
  return gatewayError('unknown_route', {
    message: unknownRouteMessage(ctx.req.method ?? 'GET', ctx.req.url ?? '/v1/models', () => true),
  })
}

/**
 * Backend types that take extended thinking as request-in.ts carries it, and answer with signed
 * thinking blocks: anthropic, bedrock (Converse carries Claude's thinking as
 * additionalModelRequestFields.thinking and answers reasoningContent with its signature), and the mock.
 */
const THINKING_BACKENDS: ReadonlySet<string> = new Set(['anthropic', 'bedrock', 'mock'])

/** Whether every deployment of the body's model can think (so a failover never lands where thinking is lost). */
function canThink(registry: BackendRegistry, body: JsonObject): boolean {
  const route = typeof body.model === 'string' ? registry.model(body.model) : undefined
  return (
    route !== undefined &&
    route.deployments.length > 0 &&
    route.deployments.every((d) => THINKING_BACKENDS.has(d.adapter.type))
  )
}

/**
 * A route shared with OpenAI's callers (a stored request's poll, list and cancel), answered
 * in Anthropic's shape for a caller that speaks it (its SDKs always send anthropic-version),
 * as before for any other.
 */
export function answerInCallersShape(ctx: RequestContext, route: () => Promise<void>): Promise<void> {
  return ctx.req.headers['anthropic-version'] === undefined ? route() : answering(ctx, route)
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

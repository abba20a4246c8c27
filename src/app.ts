// buildApp(deps) → the request handler of the public listener. It never listens itself:
// main.ts does, and tests drive it the same way.
import type { ClientCalls } from './priority/client-calls.ts'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AccountService } from './accounts/service.ts'
import type { CircuitBreaker } from './proxy/circuit-breaker.ts'
import { registerTokenRoutes } from './jwt/routes.ts'
import type { TokenService } from './jwt/service.ts'
import { registerAdminRoutes } from './admin/routes.ts'
import type { ResponseCache } from './cache/index.ts'
import type { BudgetBook } from './budgets/book.ts'
import { auditedRouter } from './audit/audited-routes.ts'
import type { AuditLog } from './audit/log.ts'
import { auditSubjects } from './audit/subjects.ts'
import type { AdminAuthenticator } from './auth/admin.ts'
import type { AccessTokenVerifier } from './auth/identity.ts'
import type { ApiKeyAuthenticator } from './auth/api-key.ts'
import type { Config } from './config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from './errors.ts'
import { recordRequestEnd } from './http/access-log.ts'
import { createContext, type RequestContext } from './http/context.ts'
import { endRequestSpan, startRequestSpan } from './http/request-span.ts'
import { discardUnreadBody } from './http/body.ts'
import { sendError, sendJson } from './http/reply.ts'
import { requestIdOf } from './http/request-id.ts'
import { registerProbeRoutes } from './http/probes.ts'
import { registerFrontDoor } from './http/front-door.ts'
import { unknownRouteMessage } from './http/route-hints.ts'
import { RouteTable, type Params, type RouteEntry, type Router } from './http/router.ts'
import { AZURE_ENDPOINTS, withoutApiVersion } from './inference/azure-endpoints.ts'
import { PROXIED_ENDPOINTS } from './inference/endpoints.ts'
import { V1_ENDPOINTS } from './inference/v1-endpoints.ts'
import type { Corridor } from './inference/corridor.ts'
import type { Guardrails } from './guardrails/create.ts'
import { limiterStrategy, liveExchange } from './inference/live.ts'
import type { EndpointSpec } from './inference/endpoints.ts'
import { openCallOf, type OpenCall } from './inference/caller.ts'
import type { Meter } from './keys/meter.ts'
import type { KeyService } from './keys/service.ts'
import type { Limiter } from './limits/port.ts'
import type { Logger } from './observability/logger.ts'
import type { Metrics } from './observability/metrics.ts'
import { createOutageLog } from './observability/outage-log.ts'
import { NO_TRACING, type Tracing } from './observability/tracing.ts'
import type { OpenApiDocument } from './openapi/document.ts'
import { registerReferenceRoutes } from './openapi/routes.ts'
import type * as PortalRoutes from './portal/routes.ts'
import { cookieValue, type PortalSessions } from './portal/sessions.ts'
import { registerQueueRoutes } from './queue/routes.ts'
import { answerInCallersShape, registerAnthropicRoutes } from './protocols/anthropic/routes.ts'
import { registerRagRoutes, unmatchedRagPath } from './rag/gateway.ts'
import { sendRefusal } from './rag/refusal.ts'
import type { QueueService } from './queue/service.ts'
import type { Reloader } from './runtime/reload.ts'
import type { FleetReload } from './runtime/fleet.ts'
import type { RuntimeSource } from './runtime/snapshot.ts'
import type { Stores } from './store/ports.ts'
import type { Webhooks } from './webhooks/create.ts'
import { StoreUnavailableError } from './store/errors.ts'

export interface AppDeps {
  /** The boot's configuration: what a reload cannot change (listeners, store, portal, ...). */
  readonly config: Config
  /**
   * The runtime snapshot in force (runtime/snapshot.ts): plans, models and deployments,
   * backends and their capacity, the RAG services. Each request reads it once.
   */
  readonly runtime: RuntimeSource
  /** POST /admin/reload (this instance) and, with `all`, the whole fleet on its Redis. */
  readonly reloader: Reloader
  readonly fleet: FleetReload
  /** This instance's id (queue leases, journalled streams, reload reports). */
  readonly instance: string
  readonly log: Logger
  readonly metrics: Metrics
  readonly stores: Stores
  readonly limiter: Limiter
  /** The corridor's circuit breaker, shown by GET /admin/backends. */
  readonly breaker?: CircuitBreaker
  /** The budgets in force (/admin/budgets); absent: none are kept. */
  readonly budgets?: BudgetBook
  readonly meter: Meter
  readonly keys: KeyService
  readonly authenticate: ApiKeyAuthenticator
  readonly authenticateAdmin: AdminAuthenticator
  /** The proxied calls' corridor (main.ts builds it: the queue's workers walk it too). */
  readonly corridor: Corridor
  readonly queue: QueueService
  /** RAG gateway accounts (/admin/users, login). */
  readonly accounts: AccountService
  /** RAG gateway access tokens (ours, and an OIDC issuer's when configured) → Identity. */
  readonly accessTokens: AccessTokenVerifier
  /** The RAG gateway's chat prompts checked under `guardrails.rag` (the corridor has its own). */
  readonly guardrails?: Guardrails
  /** RAG gateway login, refresh, logout, JWKS. */
  readonly tokens: TokenService
  /** The key portal's browser sessions (/portal); its routes are served when portal.enabled. */
  readonly portalSessions: PortalSessions
  /**
   * The key portal's routes (portal/routes.ts), which main.ts loads only when portal.enabled:
   * a gateway without the portal never loads its pages. Required when it is on.
   */
  readonly portalRoutes?: typeof PortalRoutes
  /** Webhook endpoints and the deliveries of events (/admin/webhooks). */
  readonly webhooks?: Webhooks
  /** Every change made through /admin (and so the CLI) and /portal is recorded here (audit/). */
  readonly audit: AuditLog
  /** The response cache (src/cache/): DELETE /admin/cache empties it. */
  readonly responseCache?: Pick<ResponseCache, 'purge'>
  /** Traces (observability/tracing.ts); absent: none. */
  readonly tracing?: Tracing
  /** Counts the requests being handled, for the batch runner to yield to (priority/client-calls.ts). */
  readonly clientCalls?: ClientCalls
  /** OpenAI's Batch API (/v2/batches, /v1/batches: batches/create.ts); absent: not served. */
  readonly batches?: { register(router: Router, openCall: OpenCall): void }
}

/** Requests the batch runner does not yield to (priority/client-calls.ts): the Batch API's own, health and metrics. */
const NOT_CLIENT_CALLS = /^\/(?:healthz|readyz|metrics)(?:[/?]|$)|\/batches(?:[/?]|$)/

type Handler = (ctx: RequestContext, params: Params, query: URLSearchParams) => Promise<void>

export interface App {
  handle(req: IncomingMessage, res: ServerResponse): void
  /** Every method and path the router serves (the API reference must cover them all). */
  routes(): readonly RouteEntry[]
  /** After this, new requests get 503 and /readyz reports not ready. */
  beginShutdown(): void
  /**
   * Resolves once no request is being handled: a call whose client has left may still be
   * settling (counting what flowed, metering it, logging it) after its connection closed.
   */
  settled(): Promise<void>
  /** Resolves once the requests being handled now have ended (later ones are not waited for). */
  settledNow(): Promise<void>
}

export function buildApp(deps: AppDeps): App {
  const { config, metrics } = deps
  const tracing = deps.tracing ?? NO_TRACING
  const router = new RouteTable<Handler>()
  const { corridor } = deps
  // /v2 and /v1: one admission; over the limit is the client's 429.
  const v2Admission = limiterStrategy(deps.limiter)
  const inference = (ctx: RequestContext, spec: EndpointSpec, params: Params, query: URLSearchParams): Promise<void> =>
    corridor.enter(ctx, spec, params, query, async (call) => {
      await corridor.run(call, liveExchange(ctx), v2Admission)
    })
  // The opening of the API-key routes that are not proxied calls: the model lists, the queue's stored requests.
  const openCall = openCallOf({ authenticate: deps.authenticate, limiter: deps.limiter, runtime: deps.runtime })
  const { runtime } = deps
  let draining = false
  const handling = new Set<Promise<unknown>>()
  // A store outage fails every request that needs the store: one warning for it, not an
  // error with a stack per request (each request's line still says store_unavailable).
  const storeOutage = createOutageLog('API')

  registerProbeRoutes(router, {
    stores: deps.stores,
    limiter: deps.limiter,
    queue: deps.queue,
    metrics,
    draining: () => draining,
  })
  registerFrontDoor(router, { portal: config.portal.enabled })

  // Inference, under /v2 (the model lists under /queue too).
  const v2 = '/v2'
  for (const prefix of [v2, '/queue']) {
    router.on('GET', `${prefix}/models`, async (ctx) => {
      const principal = await openCall(ctx, 'models.list', 'models.list')
      sendJson(ctx.res, 200, runtime.current.catalogue.list(principal))
    })
    router.on('GET', `${prefix}/models/*`, async (ctx, params) => {
      const principal = await openCall(ctx, 'models.get', 'models.get')
      sendJson(ctx.res, 200, runtime.current.catalogue.get(principal, params['*'] ?? ''))
    })
  }
  router.on('GET', `${v2}/audio/models`, async (ctx) => {
    const principal = await openCall(ctx, 'audio.models', 'audio.models')
    sendJson(ctx.res, 200, runtime.current.catalogue.list(principal, 'audio'))
  })
  for (const spec of PROXIED_ENDPOINTS) {
    router.on(spec.method, `${v2}${spec.route}`, (ctx, params, query) => inference(ctx, spec, params, query))
  }
  // Azure OpenAI's paths to the same endpoints (/v2/openai/deployments/{deployment}/...).
  for (const spec of AZURE_ENDPOINTS) {
    router.on(spec.method, `${v2}${spec.route}`, (ctx, params, query) =>
      inference(ctx, spec, params, withoutApiVersion(query)),
    )
  }

  // Vector stores and files, under /v1: the same corridor, the same file store as /v2.
  for (const spec of V1_ENDPOINTS) {
    router.on(spec.method, `/v1${spec.route}`, (ctx, params, query) => inference(ctx, spec, params, query))
  }

  // Anthropic's Messages API (/v1/messages): the same corridor as a chat completion, translated at its edges.
  registerAnthropicRoutes(router, { config, runtime, corridor, admission: v2Admission, openCall, queue: deps.queue })

  // The queue: the /v2 calls that may wait for capacity, and stored requests.
  registerQueueRoutes(router, { config, corridor, queue: deps.queue, openCall, answer: answerInCallersShape })
  deps.batches?.register(router, openCall)

  // What changes state under /admin and /portal is registered through the audit's seam:
  // each such route is declared in audit/declarations.ts, or the gateway does not start.
  const audited = auditedRouter(router, {
    audit: deps.audit,
    subjects: auditSubjects({
      keys: deps.keys,
      accounts: deps.accounts,
      queue: deps.queue,
      budgets: deps.budgets,
      webhooks: deps.webhooks?.store,
      config: () => deps.runtime.current,
    }),
    authenticateAdmin: deps.authenticateAdmin,
    portalUser: async (req) => {
      const signedIn = await deps.portalSessions.resume(cookieValue(req))
      return signedIn === null ? null : { id: signedIn.account.id, name: signedIn.account.username }
    },
    trustProxyHops: config.server.trustProxyHops,
  })

  // Admin API (the key portal).
  registerAdminRoutes(audited, deps)

  // RAG gateway login and tokens (/api/v1/auth/*, /.well-known/jwks.json).
  registerTokenRoutes(router, deps)

  // The RAG gateway: /<service>/<route…> to the seven RAG services.
  registerRagRoutes(router, {
    config,
    runtime,
    accessTokens: deps.accessTokens,
    limiter: deps.limiter,
    metrics,
    ...(deps.guardrails === undefined ? {} : { guardrails: deps.guardrails }),
  })

  // The key portal in a browser (/portal).
  const portal = config.portal.enabled ? deps.portalRoutes : undefined
  if (config.portal.enabled && portal === undefined) throw new Error('portal.enabled, but no portal routes were given')
  if (portal !== undefined) {
    portal.registerPortalRoutes(audited, {
      config,
      runtime,
      keys: deps.keys,
      accounts: deps.accounts,
      sessions: deps.portalSessions,
      limiter: deps.limiter,
      meter: deps.meter,
      usage: deps.stores.usage,
      audit: deps.audit,
    })
  }

  // The API reference: /openapi.json, /redoc. The document is built on first request, and
  // its catalogue (every operation's schemas and prose) loaded then: not memory at rest.
  let document: Promise<OpenApiDocument> | undefined
  registerReferenceRoutes(
    router,
    () => (document ??= import('./openapi/catalogue.ts').then((m) => m.apiDocument({ portal: config.portal.enabled }))),
  )

  return {
    beginShutdown() {
      draining = true
    },
    routes: () => router.routes(),
    async settled() {
      while (handling.size > 0) await Promise.allSettled([...handling])
    },
    async settledNow() {
      await Promise.allSettled([...handling])
    },
    handle(req, res) {
      // An absolute-form target (`POST http://host/v2/...`), which a server must accept
      // (RFC 9112 §3.2.2): routed by its path and query, as the origin form would be.
      const absolute = /^https?:\/\/[^/?#]*(.*)$/is.exec(req.url ?? '')
      if (absolute !== null) req.url = (absolute[1] ?? '').startsWith('/') ? absolute[1] : `/${absolute[1] ?? ''}`
      const id = requestIdOf(req, config.server.trustRequestId)
      res.setHeader('x-request-id', id)
      const ctx = createContext(req, res, id, deps.log.child({ reqId: id }), startRequestSpan(tracing, req))
      metrics.inflight.inc({ endpoint: 'all' })
      // A batch's own status polls and health checks or scrapes are not calls it should yield to.
      const calls = NOT_CLIENT_CALLS.test(req.url ?? '') ? undefined : deps.clientCalls
      calls?.begin()
      const closed = new Promise<number>((done) => res.once('close', () => done(performance.now())))
      // A body nobody read (a GET that carried one, a reply sent before reading): Node
      // discards what still arrives, at whatever pace; this bounds that in time and bytes.
      res.once('finish', () => discardUnreadBody(req, res))
      const handled = dispatch(ctx).catch((err: unknown) => fail(ctx, err))
      // Logged once both the reply is closed and the handler is done: a client that
      // leaves mid-stream is logged with the tokens counted after it left.
      const done = Promise.all([closed, handled]).then(([closedAt]) => {
        metrics.inflight.dec({ endpoint: 'all' })
        calls?.end()
        recordRequestEnd(ctx, metrics, closedAt)
        endRequestSpan(ctx)
      })
      handling.add(done)
      void done.finally(() => handling.delete(done))
    },
  }

  async function dispatch(ctx: RequestContext): Promise<void> {
    const { req } = ctx
    if (draining && req.url !== '/healthz') {
      ctx.res.setHeader('connection', 'close')
      throw gatewayError('shutting_down')
    }
    // HTTP/1.1 requires it (RFC 9112 §3.2); Node's own refusal would have no body.
    if (req.httpVersion === '1.1' && req.headers.host === undefined)
      throw gatewayError('bad_http', { message: 'An HTTP/1.1 request must carry a Host header.' })
    const expect = req.headers.expect
    if (expect !== undefined && expect.trim().toLowerCase() !== '100-continue') throw gatewayError('expectation_failed')
    const match = router.match(req.method ?? 'GET', req.url ?? '/')
    if (!match.found) {
      if (portal?.isPortalPath(req.url ?? '/') === true)
        return portal.portalUnmatched(ctx, match.allow, deps.portalSessions)
      if (match.allow.length > 0) {
        throw gatewayError('method_not_allowed', { headers: { allow: match.allow.join(', ') } })
      }
      const ragRefusal = unmatchedRagPath(req.url ?? '/')
      if (ragRefusal !== null) return sendRefusal(ctx, ragRefusal)
      throw gatewayError('unknown_route', {
        message: unknownRouteMessage(
          req.method ?? 'GET',
          req.url ?? '/',
          (method, url) => router.match(method, url).found,
        ),
      })
    }
    await match.route(ctx, match.params, match.query)
  }

  function fail(ctx: RequestContext, err: unknown): void {
    const error = toGatewayError(err)
    if (err instanceof StoreUnavailableError) storeOutage.failed(ctx.log, err)
    else if (!(err instanceof GatewayError)) ctx.log.error({ err }, 'unhandled error')
    // A body refused before it was all read: let the client finish sending it, so it
    // reads this answer rather than a connection reset. Not a body that was too slow:
    // that connection closes after the answer.
    if (error.errorName !== 'request_timeout') discardUnreadBody(ctx.req, ctx.res)
    sendError(ctx, error)
  }
}

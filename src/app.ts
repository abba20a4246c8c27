// buildApp(deps) → the request handler of the public listener. It never listens itself:
// main.ts does, and tests drive it the same way.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { registerAdminRoutes } from './admin/routes.ts'
import type { AdminAuthenticator } from './auth/admin.ts'
import type { ApiKeyAuthenticator } from './auth/api-key.ts'
import type { BackendRegistry } from './backends/registry.ts'
import type { Config } from './config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from './errors.ts'
import { recordRequestEnd } from './http/access-log.ts'
import { createContext, type RequestContext } from './http/context.ts'
import { discardUnreadBody } from './http/body.ts'
import { sendError, sendJson } from './http/reply.ts'
import { requestIdOf } from './http/request-id.ts'
import { Router, type Params } from './http/router.ts'
import { PROXIED_ENDPOINTS } from './inference/endpoints.ts'
import { createInferenceHandler } from './inference/handler.ts'
import { createModelCatalogue } from './inference/models.ts'
import { checkEndpointScope } from './inference/scopes.ts'
import type { Meter } from './keys/meter.ts'
import type { Principal } from './keys/record.ts'
import { resolveLimits } from './limits/plans.ts'
import type { KeyService } from './keys/service.ts'
import type { Limiter } from './limits/port.ts'
import type { Logger } from './observability/logger.ts'
import type { Metrics } from './observability/metrics.ts'
import type { Stores } from './store/ports.ts'

export interface AppDeps {
  readonly config: Config
  readonly log: Logger
  readonly metrics: Metrics
  readonly stores: Stores
  readonly registry: BackendRegistry
  readonly limiter: Limiter
  readonly meter: Meter
  readonly keys: KeyService
  readonly authenticate: ApiKeyAuthenticator
  readonly authenticateAdmin: AdminAuthenticator
  /** Where multipart uploads are spooled while they are forwarded. */
  readonly spoolDir: string
  /** Unix seconds reported as the models' `created`. */
  readonly startedAt: number
}

type Handler = (ctx: RequestContext, params: Params, query: URLSearchParams) => Promise<void>

export interface App {
  handle(req: IncomingMessage, res: ServerResponse): void
  /** After this, new requests get 503 and /readyz reports not ready. */
  beginShutdown(): void
}

export function buildApp(deps: AppDeps): App {
  const { config, metrics } = deps
  const router = new Router<Handler>()
  const inference = createInferenceHandler({ ...deps, ownership: deps.stores.ownership })
  const catalogue = createModelCatalogue(deps.registry, deps.startedAt)
  let draining = false

  // Probes.
  router.on('GET', '/healthz', async (ctx) => { ctx.route = 'healthz'; sendJson(ctx.res, 200, { status: 'ok' }) })
  router.on('GET', '/readyz', async (ctx) => {
    ctx.route = 'readyz'
    const store = await deps.stores.ping()
    metrics.storeUp.set(store ? 1 : 0)
    const ready = store && !draining
    // The limiter's state is reported, not gating: during a Redis outage every instance
    // enforces limits on its own, and taking them all out of rotation would help nobody.
    const limiter = deps.limiter.health?.()
    sendJson(ctx.res, ready ? 200 : 503, {
      status: ready ? 'ready' : 'not_ready',
      store: store ? 'up' : 'down',
      limiter: limiter?.mode ?? 'none',
      limiter_healthy: limiter?.healthy ?? true,
      draining,
    })
  })

  // Inference, under /v2.
  const v2 = '/v2'
  router.on('GET', `${v2}/models`, async (ctx) => {
    ctx.route = 'models.list'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'models.list')
    await applyLimitHeaders(ctx, principal)
    sendJson(ctx.res, 200, catalogue.list(principal))
  })
  router.on('GET', `${v2}/models/*`, async (ctx, params) => {
    ctx.route = 'models.get'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'models.get')
    await applyLimitHeaders(ctx, principal)
    sendJson(ctx.res, 200, catalogue.get(principal, params['*'] ?? ''))
  })
  router.on('GET', `${v2}/audio/models`, async (ctx) => {
    ctx.route = 'audio.models'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'audio.models')
    await applyLimitHeaders(ctx, principal)
    sendJson(ctx.res, 200, catalogue.list(principal, 'audio'))
  })
  for (const spec of PROXIED_ENDPOINTS) {
    router.on(spec.method, `${v2}${spec.route}`, (ctx, params, query) => inference(ctx, spec, params, query))
  }

  // Admin API (the key portal).
  registerAdminRoutes(router, deps)

  return {
    beginShutdown() { draining = true },
    handle(req, res) {
      const id = requestIdOf(req, config.server.trustRequestId)
      res.setHeader('x-request-id', id)
      const ctx = createContext(req, res, id, deps.log.child({ reqId: id }))
      metrics.inflight.inc({ endpoint: 'all' })
      const closed = new Promise<number>((done) => res.once('close', () => done(performance.now())))
      const handled = dispatch(ctx).catch((err: unknown) => fail(ctx, err))
      // Logged once both the reply is closed and the handler is done: a client that
      // leaves mid-stream is logged with the tokens counted after it left.
      void Promise.all([closed, handled]).then(([closedAt]) => {
        metrics.inflight.dec({ endpoint: 'all' })
        recordRequestEnd(ctx, metrics, closedAt)
      })
    },
  }

  async function dispatch(ctx: RequestContext): Promise<void> {
    const { req } = ctx
    if (draining && req.url !== '/healthz') {
      ctx.res.setHeader('connection', 'close')
      throw gatewayError('shutting_down')
    }
    const match = router.match(req.method ?? 'GET', req.url ?? '/')
    if (!match.found) {
      if (match.allow.length > 0) {
        throw gatewayError('method_not_allowed', { headers: { allow: match.allow.join(', ') } })
      }
      throw gatewayError('unknown_route', { message: 'Unknown request URL. Check the path and the method.' })
    }
    await match.route(ctx, match.params, match.query)
  }

  /** Where the key stands on its tier's default limits, for replies not charged to a model. */
  async function applyLimitHeaders(ctx: RequestContext, principal: Principal): Promise<void> {
    const { tier, model, limits } = resolveLimits(config.plans, principal.key, '*')
    const headers = await deps.limiter.peek({ keyId: principal.keyId, tier, model, limits }).catch(() => ({}))
    for (const [name, value] of Object.entries(headers)) ctx.res.setHeader(name, value)
  }

  function fail(ctx: RequestContext, err: unknown): void {
    const error = toGatewayError(err)
    ctx.errorCode = error.code
    if (!(err instanceof GatewayError)) ctx.log.error({ err }, 'unhandled error')
    // A body refused before it was all read: let the client finish sending it, so it
    // reads this answer rather than a connection reset.
    discardUnreadBody(ctx.req, ctx.res)
    sendError(ctx.res, error)
  }
}

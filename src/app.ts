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
import { sendError, sendJson } from './http/reply.ts'
import { requestIdOf } from './http/request-id.ts'
import { Router, type Params } from './http/router.ts'
import { PROXIED_ENDPOINTS } from './inference/endpoints.ts'
import { createInferenceHandler } from './inference/handler.ts'
import { createModelCatalogue } from './inference/models.ts'
import { checkEndpointScope } from './inference/scopes.ts'
import type { Meter } from './keys/meter.ts'
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
    sendJson(ctx.res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', store: store ? 'up' : 'down', draining })
  })

  // Inference, under /v2.
  const v2 = '/v2'
  router.on('GET', `${v2}/models`, async (ctx) => {
    ctx.route = 'models.list'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'models.list')
    sendJson(ctx.res, 200, catalogue.list(principal))
  })
  router.on('GET', `${v2}/models/*`, async (ctx, params) => {
    ctx.route = 'models.get'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'models.get')
    sendJson(ctx.res, 200, catalogue.get(principal, params['*'] ?? ''))
  })
  router.on('GET', `${v2}/audio/models`, async (ctx) => {
    ctx.route = 'audio.models'
    const principal = await deps.authenticate(ctx.req)
    ctx.keyId = principal.keyId
    checkEndpointScope(principal, 'audio.models')
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

  function fail(ctx: RequestContext, err: unknown): void {
    const error = toGatewayError(err)
    ctx.errorCode = error.code
    if (!(err instanceof GatewayError)) ctx.log.error({ err }, 'unhandled error')
    // A body we refused before reading it all: do not keep the connection for the rest.
    if (!ctx.req.complete && !ctx.res.headersSent) ctx.res.setHeader('connection', 'close')
    sendError(ctx.res, error)
  }
}

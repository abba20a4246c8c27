// The RAG gateway's login endpoints (INTERFACE.md §6), answered as FastAPI does:
//   POST /api/v1/auth/user      {username, password} → {access_token, token_type, expires_in, refresh_token}
//   POST /api/v1/auth/refresh   {refresh_token}      → a new pair (the old refresh token is spent)
//   POST /api/v1/auth/logout    Bearer access token  → 204, the session is revoked everywhere
//   GET  /api/v1/auth/me        Bearer access token  → who the token says you are
//   GET  /.well-known/jwks.json                      → the public signing keys
// Errors are {"detail": "..."}: 401 with WWW-Authenticate: Bearer, 422 with FastAPI's list
// of problems for a bad body, 429 when an address's failed logins are throttled.
import type { IncomingMessage } from 'node:http'
import { z } from 'zod'
import { Jwks, Me, TokenPair } from '../api/users.ts'
import { bearerToken } from '../auth/bearer.ts'
import type { AccessTokenVerifier } from '../auth/identity.ts'
import type { Config } from '../config/schema.ts'
import { ERRORS, gatewayError, GatewayError, toGatewayError } from '../errors.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { discardUnreadBody, readJsonBody } from '../http/body.ts'
import { clientAddress } from '../http/client-address.ts'
import type { RequestContext } from '../http/context.ts'
import { sendJson } from '../http/reply.ts'
import type { RouteHandler, Router } from '../http/router.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createOutageLog, type OutageLog } from '../observability/outage-log.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import { sendRefusal } from '../rag/refusal.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import type { TokenService } from './service.ts'

export interface TokenRouteDeps {
  readonly config: Pick<Config, 'server'>
  readonly tokens: TokenService
  readonly accessTokens: AccessTokenVerifier
  readonly metrics: Pick<Metrics, 'logins'>
}

export const loginSchema = z.object({
  username: z.string().min(1).max(256),
  password: z.string().min(1).max(1024),
})

export const refreshSchema = z.object({ refresh_token: z.string().min(1).max(512) })

interface DetailItem {
  type: string
  loc: Array<string | number>
  msg: string
}

/** A body FastAPI would refuse with 422 and a list of what is wrong. */
class UnprocessableBody extends Error {
  readonly detail: DetailItem[]
  constructor(detail: DetailItem[]) {
    super('unprocessable body')
    this.detail = detail
  }
}

async function readBody<S extends z.ZodType>(
  ctx: RequestContext,
  schema: S,
  deps: TokenRouteDeps,
): Promise<z.infer<S>> {
  let value: unknown
  try {
    value = (await readJsonBody(ctx.req, deps.config.server.jsonBodyLimitBytes, bodyRateOf(deps.config.server))).value
  } catch (err) {
    if (err instanceof GatewayError && (err.errorName === 'invalid_json' || err.errorName === 'invalid_body')) {
      throw new UnprocessableBody([{ type: 'json_invalid', loc: ['body'], msg: 'JSON decode error' }])
    }
    throw err
  }
  const parsed = schema.safeParse(value)
  if (parsed.success) return parsed.data
  // Never the input itself: it may be a password.
  throw new UnprocessableBody(
    parsed.error.issues.map((issue) => ({
      type: issue.code === 'invalid_type' && issue.input === undefined ? 'missing' : issue.code,
      loc: ['body', ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))],
      msg: issue.code === 'invalid_type' && issue.input === undefined ? 'Field required' : issue.message,
    })),
  )
}

function bearerOf(req: IncomingMessage): string {
  const token = bearerToken(req)
  if (token === null) throw gatewayError('missing_access_token', { cause: new Error('no bearer token') })
  return token
}

/** Runs a route and answers its errors in FastAPI's shape. */
function detailed(route: string, outage: OutageLog, handler: RouteHandler): RouteHandler {
  return async (ctx, params, query) => {
    ctx.route = route
    try {
      await handler(ctx, params, query)
    } catch (err) {
      if (err instanceof UnprocessableBody) {
        ctx.errorName = 'unprocessable_body'
        discardUnreadBody(ctx.req, ctx.res)
        sendJson(ctx.res, ERRORS.unprocessable_body.status, { detail: err.detail })
        return
      }
      const error = toGatewayError(err)
      // A store that does not answer is an outage to report, not a bug: a 503 and a warning.
      if (err instanceof StoreUnavailableError) outage.failed(ctx.log, err)
      else if (!(err instanceof GatewayError)) ctx.log.error({ err }, 'unhandled error')
      else if (error.status === 401 && error.cause instanceof Error)
        ctx.log.info({ reason: error.cause.message }, 'RAG token refused')
      if (error.errorName !== 'request_timeout') discardUnreadBody(ctx.req, ctx.res)
      sendRefusal(ctx, error, { 'cache-control': 'no-store' })
    }
  }
}

export function registerTokenRoutes(router: Router, deps: TokenRouteDeps): void {
  const { tokens, accessTokens } = deps
  const noStore = { 'cache-control': 'no-store', pragma: 'no-cache' }
  const outage = createOutageLog('RAG login')

  router.on(
    'POST',
    '/api/v1/auth/user',
    detailed('rag.auth.login', outage, async (ctx) => {
      let body
      try {
        body = await readBody(ctx, loginSchema, deps)
      } catch (err) {
        if (err instanceof UnprocessableBody) deps.metrics.logins.inc({ outcome: 'invalid_body' })
        throw err
      }
      const pair = await tokens.login(
        body.username,
        body.password,
        clientAddress(ctx.req, deps.config.server.trustProxyHops),
      )
      sendJson(ctx.res, 200, pair, noStore)
    }),
  )

  router.on(
    'POST',
    '/api/v1/auth/refresh',
    detailed('rag.auth.refresh', outage, async (ctx) => {
      const body = await readBody(ctx, refreshSchema, deps)
      sendJson(ctx.res, 200, await tokens.refresh(body.refresh_token), noStore)
    }),
  )

  router.on(
    'POST',
    '/api/v1/auth/logout',
    detailed('rag.auth.logout', outage, async (ctx) => {
      await tokens.logout(bearerOf(ctx.req))
      ctx.res.statusCode = 204
      ctx.res.end()
    }),
  )

  router.on(
    'GET',
    '/api/v1/auth/me',
    detailed('rag.auth.me', outage, async (ctx) => {
      const identity = await accessTokens.verify(bearerOf(ctx.req))
      sendJson(
        ctx.res,
        200,
        {
          user_id: identity.userId,
          username: identity.username,
          roles: identity.roles,
          groups: identity.groups,
          tenant: identity.tenant,
          source: identity.source,
        },
        noStore,
      )
    }),
  )

  router.on(
    'GET',
    '/.well-known/jwks.json',
    detailed('rag.auth.jwks', outage, async (ctx) => {
      // Short: a key made by a rotation signs at once, and verifiers elsewhere must find it.
      sendJson(ctx.res, 200, await tokens.jwks(), { 'cache-control': 'public, max-age=60' })
    }),
  )
}

const TAG = 'RAG gateway: login'

export const TOKEN_OPERATIONS: readonly OperationDoc[] = [
  {
    security: 'none',
    method: 'post',
    path: '/api/v1/auth/user',
    operationId: 'ragLogin',
    tag: TAG,
    summary: 'Log in with a username and password',
    description:
      'Failed logins are throttled per client address, for one username and for all (429 with retry-after); a username failing from many addresses is slowed down (each attempt waits, up to `ragAuth.loginThrottle.maxSlowdownMs`), never locked. Errors are FastAPI\'s `{"detail": …}`; a bad body is a 422.',
    body: { contentType: 'application/json', schema: loginSchema },
    responses: {
      200: { description: 'A token pair', schema: TokenPair },
      401: { description: 'Incorrect username or password' },
      422: { description: 'The body is not {username, password}' },
      429: { description: 'Too many failed logins' },
    },
  },
  {
    security: 'none',
    method: 'post',
    path: '/api/v1/auth/refresh',
    operationId: 'ragRefresh',
    tag: TAG,
    summary: 'Trade a refresh token for a new pair',
    description:
      'A refresh token works once. Used again within `ragAuth.refreshReuseSeconds` (5 s by default) while its successor is unused (two tabs refreshing at once), it answers the same new pair; any other use of a spent one revokes its whole session.',
    body: { contentType: 'application/json', schema: refreshSchema },
    responses: {
      200: { description: 'A new token pair', schema: TokenPair },
      401: { description: 'Unknown, spent, revoked or expired refresh token' },
      422: { description: 'The body is not {refresh_token}' },
    },
  },
  {
    security: 'session',
    method: 'post',
    path: '/api/v1/auth/logout',
    operationId: 'ragLogout',
    tag: TAG,
    summary: 'End the session',
    description:
      "Every instance refuses the session's access tokens within `ragAuth.revocationCacheMs` (0.5 s by default); its refresh token is dead.",
    responses: { 204: { description: 'Logged out' } },
  },
  {
    security: 'session',
    method: 'get',
    path: '/api/v1/auth/me',
    operationId: 'ragMe',
    tag: TAG,
    summary: 'Who the access token is for',
    responses: { 200: { description: 'The verified identity', schema: Me } },
  },
  {
    security: 'none',
    method: 'get',
    path: '/.well-known/jwks.json',
    operationId: 'ragJwks',
    tag: TAG,
    summary: 'The public keys that sign access tokens',
    responses: { 200: { description: 'A JWK set (Ed25519)', schema: Jwks } },
  },
]

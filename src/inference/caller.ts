// Who is calling with an API key, and where its limits stand. Every API-key route opens
// the same way: the route named for logs and metrics, the key authenticated, and its id on
// the request's line. A route that is not a proxied call (the model lists, the queue's
// stored requests) then checks the key's endpoint scope and tells the client its limits on
// the tier's defaults; a proxied call goes on down the corridor (corridor.ts), which
// charges a model's limits and says where they stand even when it refuses.
import type { ApiKeyAuthenticator } from '../auth/api-key.ts'
import type { Config, Endpoint } from '../config/schema.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { RequestContext } from '../http/context.ts'
import type { Principal } from '../keys/record.ts'
import { resolveLimits, type ResolvedLimits } from '../limits/plans.ts'
import type { Limiter, RateLimitHeaders } from '../limits/port.ts'
import type { ReplySink } from '../proxy/reply-sink.ts'
import { checkEndpointScope } from './scopes.ts'

export interface CallerDeps {
  readonly authenticate: ApiKeyAuthenticator
  readonly limiter: Limiter
  /** The plans in force, read once per call. */
  readonly runtime: RuntimeSource<{ readonly config: Pick<Config, 'plans'> }>
}

/**
 * Opens a route that is not a proxied call: authenticate → scope (when the route is an
 * endpoint a key may be limited to) → the key's limit headers on its tier's defaults.
 */
export type OpenCall = (ctx: RequestContext, route: string, scope?: Endpoint) => Promise<Principal>

export function openCallOf(deps: CallerDeps): OpenCall {
  return async (ctx, route, scope) => {
    const { plans } = deps.runtime.current.config
    const principal = await identify(ctx, deps.authenticate, route)
    if (scope !== undefined) checkEndpointScope(principal, scope)
    await showLimits(ctx.res, deps.limiter, principal.keyId, resolveLimits(plans, principal.key, '*'))
    return principal
  }
}

/** The route named, the key authenticated (or the request refused), and its id noted. */
export async function identify(
  ctx: RequestContext,
  authenticate: ApiKeyAuthenticator,
  route: string,
): Promise<Principal> {
  ctx.route = route
  const principal = await authenticate(ctx.req)
  ctx.keyId = principal.keyId
  return principal
}

/** Where the key stands on `limits`, as x-ratelimit-* headers (none when the limiter cannot say). */
export async function showLimits(
  sink: Pick<ReplySink, 'setHeader'>,
  limiter: Limiter,
  keyId: string,
  limits: ResolvedLimits,
): Promise<void> {
  const headers = await limiter
    .peek({ keyId, tier: limits.tier, model: limits.model, limits: limits.limits })
    .catch(() => ({}))
  setHeaders(sink, headers)
}

export function setHeaders(sink: Pick<ReplySink, 'setHeader'>, headers: RateLimitHeaders): void {
  for (const [name, value] of Object.entries(headers)) sink.setHeader(name, value)
}

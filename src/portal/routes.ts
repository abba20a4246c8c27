// The key portal at /portal: server-rendered pages for signed-in users (docs/portal.md).
// Each room of it registers its routes here; PORTAL_OPERATIONS lists them for the API
// reference (every route the gateway serves is documented).
import { asset, ASSET_NAMES, type AssetName } from './assets.ts'
import type { Router } from '../http/router.ts'
import { createGuards, failPage, viewerOf, type PortalDeps } from './guard.ts'
import { securityHeaders } from './http.ts'
import { registerAdminPortalRoutes } from './routes-admin.ts'
import { registerAuditPortalRoutes } from './routes-audit.ts'
import { registerKeyRoutes } from './routes-keys.ts'
import { registerSessionRoutes } from './routes-session.ts'
import { registerUsageRoutes } from './routes-usage.ts'
import { cookieValue, type PortalSessions, type SignedIn } from './sessions.ts'
import { gatewayError } from '../errors.ts'
import type { RequestContext } from '../http/context.ts'

export type { PortalDeps } from './guard.ts'

export function registerPortalRoutes(router: Router, deps: PortalDeps): void {
  const guards = createGuards(deps)
  registerSessionRoutes(router, deps, guards)
  registerKeyRoutes(router, deps, guards)
  registerUsageRoutes(router, deps, guards)
  registerAdminPortalRoutes(router, deps, guards)
  registerAuditPortalRoutes(router, deps, guards)

  router.on('GET', '/portal/assets/:name', async (ctx, params, query) => {
    ctx.route = 'portal.asset'
    try {
      const name = params.name ?? ''
      if (!(ASSET_NAMES as readonly string[]).includes(name)) throw gatewayError('resource_not_found')
      const file = asset(name as AssetName)
      securityHeaders(ctx.res)
      ctx.res.setHeader('content-type', file.contentType)
      ctx.res.setHeader(
        'cache-control',
        query.get('v') === file.version ? 'public, max-age=31536000, immutable' : 'no-cache',
      )
      ctx.res.setHeader('content-length', file.bytes.length)
      ctx.res.statusCode = 200
      ctx.res.end(file.bytes)
    } catch (err) {
      failPage(ctx, err)
    }
  })
}

/** Whether a URL no route matched (or not with this method) is the portal's: a browser there gets a page, not the API's JSON. */
export function isPortalPath(url: string): boolean {
  const path = url.split('?', 1)[0] ?? ''
  return path === '/portal' || path.startsWith('/portal/')
}

/**
 * The portal's 404 page for a URL under /portal that no route matches (a mistyped link, an
 * id too long for the router), or its 405 page for one another method serves (a form's
 * address opened as a link).
 */
export async function portalUnmatched(
  ctx: RequestContext,
  allow: readonly string[],
  sessions: PortalSessions,
): Promise<void> {
  const error =
    allow.length > 0
      ? gatewayError('method_not_allowed', { headers: { allow: allow.join(', ') } })
      : gatewayError('unknown_route')
  // A signed-in user keeps the navigation (and sign-out) on it: a mistyped link is no dead end.
  let signedIn: SignedIn | null = null
  try {
    signedIn = await sessions.resume(cookieValue(ctx.req))
  } catch (err) {
    ctx.log.warn({ err }, 'portal: no session for the not-found page')
  }
  failPage(ctx, error, signedIn === null ? undefined : viewerOf(signedIn))
}

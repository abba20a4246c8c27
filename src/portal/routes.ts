// The key portal at /portal: server-rendered pages for signed-in users (docs/portal.md).
// Each room of it registers its routes here; PORTAL_OPERATIONS lists them for the API
// reference (every route the gateway serves is documented).
import type { OperationDoc } from '../openapi/operation.ts'
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

const TAG = 'Portal'
const PAGE = { 200: { description: 'An HTML page', contentType: 'text/html' } }
const FORM_DONE = { 303: { description: 'Done: on to the next page' } }
const DESCRIPTION =
  "A page of the key portal for a browser, signed in with a session cookie (HttpOnly, SameSite=Strict); without one it redirects (303) to /portal/sign-in. Forms carry the session's CSRF token."
const op = (
  method: 'get' | 'post',
  path: string,
  operationId: string,
  summary: string,
  responses: OperationDoc['responses'],
  pathParams?: Record<string, string>,
): OperationDoc => ({
  method,
  path,
  operationId,
  summary,
  tag: TAG,
  security: 'none',
  description: DESCRIPTION,
  responses,
  ...(pathParams === undefined ? {} : { pathParams }),
})
const KEY = { id: "The key's id (key_…); another user's key is not found." }

export const PORTAL_OPERATIONS: readonly OperationDoc[] = [
  op('get', '/portal', 'portalHome', 'The portal: on to the keys, or to sign in', { 303: { description: 'Redirect' } }),
  op('get', '/portal/sign-in', 'portalSignInPage', 'The sign-in page', PAGE),
  op('post', '/portal/sign-in', 'portalSignIn', 'Sign in with a user account (form); sets the session cookie', {
    ...FORM_DONE,
    401: { description: 'Wrong username or password (the page again)', contentType: 'text/html' },
  }),
  op(
    'post',
    '/portal/sign-out',
    'portalSignOut',
    'Sign out: the session ends; on to the sign-in page, which says so',
    FORM_DONE,
  ),
  op('get', '/portal/keys', 'portalKeys', 'My keys, a page at a time', PAGE),
  op('post', '/portal/keys', 'portalCreateKey', 'Create a key; on to the page that shows its secret once', {
    303: { description: 'Made: on to /portal/keys/{id}/secret' },
  }),
  op('get', '/portal/keys/{id}', 'portalKey', 'One key: its plan and what is left per model', PAGE, KEY),
  op(
    'get',
    '/portal/keys/{id}/secret',
    'portalKeySecret',
    'The secret a create or rotate just made, shown once to the session that made it; opened again, a page saying it is gone',
    PAGE,
    KEY,
  ),
  op(
    'post',
    '/portal/keys/{id}/rotate',
    'portalRotateKey',
    'Rotate a key with a grace for the old secret; on to the page that shows the new secret once',
    { 303: { description: 'Rotated: on to /portal/keys/{id}/secret' } },
    KEY,
  ),
  op('post', '/portal/keys/{id}/revoke', 'portalRevokeKey', 'Revoke a key (the form confirms it)', FORM_DONE, KEY),
  op('get', '/portal/usage', 'portalUsage', 'Usage per day and model, in total or of one key, over a range', PAGE),
  op('get', '/portal/usage.csv', 'portalUsageCsv', 'The same usage as CSV', {
    200: { description: 'CSV', contentType: 'text/csv' },
  }),
  op('get', '/portal/admin/keys', 'portalAdminKeys', 'Admin: every key, filtered by owner, tier, status', PAGE),
  op('post', '/portal/admin/keys/{id}/tier', 'portalAdminKeyTier', "Admin: change a key's tier", FORM_DONE, KEY),
  op('get', '/portal/admin/users', 'portalAdminUsers', 'Admin: every user', PAGE),
  op(
    'get',
    '/portal/admin/audit',
    'portalAdminAudit',
    'Admin: the audit log of changes, filtered by who, action, object and dates',
    PAGE,
  ),
  op('post', '/portal/admin/users', 'portalAdminCreateUser', 'Admin: create a user', FORM_DONE),
  op(
    'post',
    '/portal/admin/users/{username}/disable',
    'portalAdminDisableUser',
    'Admin: disable a user (their sessions end)',
    FORM_DONE,
    { username: 'The user' },
  ),
  op(
    'post',
    '/portal/admin/users/{username}/enable',
    'portalAdminEnableUser',
    'Admin: enable a user again',
    FORM_DONE,
    { username: 'The user' },
  ),
  op(
    'get',
    '/portal/assets/{name}',
    'portalAsset',
    "The portal's stylesheet and script",
    { 200: { description: 'CSS or JavaScript', contentType: 'text/css' } },
    { name: 'portal.css or portal.js' },
  ),
]

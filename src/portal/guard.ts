// What every portal route shares: its dependencies, the signed-in user (or a redirect to
// sign in), the checks on a state-changing form, and refusals answered as pages.
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { AccountService } from '../accounts/service.ts'
import type { AuditLog } from '../audit/log.ts'
import type { Config } from '../config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from '../errors.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import type { Params, RouteHandler } from '../http/router.ts'
import type { Meter } from '../keys/meter.ts'
import type { KeyRecord } from '../keys/record.ts'
import type { KeyService } from '../keys/service.ts'
import type { Limiter } from '../limits/port.ts'
import type { UsageStore } from '../store/ports.ts'
import { checkCsrf, checkSameOrigin, readForm, redirect, sendHtml } from './http.ts'
import { ADMIN_ROLE, type Viewer } from './layout.ts'
import { errorPage } from './pages/error.ts'
import { cookieValue, type PortalSessions, type SignedIn } from './sessions.ts'

export interface PortalDeps {
  /** The boot's configuration: server.* and portal.* (a reload cannot change them). */
  readonly config: Config
  /** The plans and models in force (a reload may change them): read once per page. */
  readonly runtime: RuntimeSource<{ readonly config: Pick<Config, 'plans' | 'models'> }>
  readonly keys: KeyService
  readonly accounts: AccountService
  readonly sessions: PortalSessions
  readonly limiter: Limiter
  readonly meter: Meter
  readonly usage: UsageStore
  /** The audit log the admin's audit page reads. */
  readonly audit: AuditLog
}

export interface Me extends SignedIn {
  readonly viewer: Viewer
  /** The session's cookie value: it seals what a form hands to the next page (handoff.ts). */
  readonly cookie: string
}

export function viewerOf(signedIn: SignedIn): Viewer {
  return {
    username: signedIn.account.username,
    isAdmin: signedIn.account.roles.includes(ADMIN_ROLE),
    csrfToken: signedIn.session.csrfToken,
  }
}

/** Answers a refusal or failure as a page in the portal's frame. */
export function failPage(ctx: RequestContext, err: unknown, viewer?: Viewer): void {
  const error = toGatewayError(err)
  ctx.errorName = error.errorName
  if (!(err instanceof GatewayError)) ctx.log.error({ err }, 'portal: unhandled error')
  if (ctx.res.headersSent) {
    if (!ctx.res.writableEnded) ctx.res.end()
    return
  }
  for (const [name, value] of Object.entries(error.headers)) ctx.res.setHeader(name, value)
  sendHtml(ctx.res, error.status, errorPage(error, viewer))
}

type SignedInHandler = (ctx: RequestContext, me: Me, params: Params, query: URLSearchParams) => Promise<void>
type FormHandler = (ctx: RequestContext, me: Me, form: URLSearchParams, params: Params) => Promise<void>

export function createGuards(deps: PortalDeps) {
  const resume = async (ctx: RequestContext): Promise<Me | null> => {
    const cookie = cookieValue(ctx.req)
    const signedIn = await deps.sessions.resume(cookie)
    return signedIn === null || cookie === undefined ? null : { ...signedIn, viewer: viewerOf(signedIn), cookie }
  }
  const guarded =
    (
      route: string,
      admin: boolean,
      fn: (ctx: RequestContext, me: Me, params: Params, query: URLSearchParams) => Promise<void>,
      before?: (ctx: RequestContext) => void,
    ): RouteHandler =>
    async (ctx, params, query) => {
      ctx.route = route
      let me: Me | null = null
      try {
        before?.(ctx)
        me = await resume(ctx)
        if (me === null) return redirect(ctx.res, '/portal/sign-in')
        // Not an admin: the admin pages do not exist for them.
        if (admin && !me.viewer.isAdmin) throw gatewayError('resource_not_found')
        await fn(ctx, me, params, query)
      } catch (err) {
        failPage(ctx, err, me?.viewer)
      }
    }
  return {
    resume,
    /** A page for a signed-in user (admin: for admins only). */
    page: (route: string, fn: SignedInHandler, options: { admin?: boolean } = {}): RouteHandler =>
      guarded(route, options.admin ?? false, fn),
    /** A state-changing form: same origin, signed in, then the session's CSRF token. */
    form: (route: string, fn: FormHandler, options: { admin?: boolean } = {}): RouteHandler =>
      guarded(
        route,
        options.admin ?? false,
        async (ctx, me, params) => {
          const form = await readForm(ctx.req, bodyRateOf(deps.config.server))
          checkCsrf(form, me.session.csrfToken)
          await fn(ctx, me, form, params)
        },
        (ctx) => checkSameOrigin(ctx.req, deps.config),
      ),
    /**
     * A key the signed-in user may see: their own, or any for an admin. Another user's key
     * is not found, exactly like a key that does not exist.
     */
    async keyOf(me: Me, id: string): Promise<KeyRecord> {
      const record = await deps.keys.get(id)
      if (record === null || (record.owner !== me.account.id && !me.viewer.isAdmin)) {
        throw gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
      }
      return record
    },
  }
}

export type Guards = ReturnType<typeof createGuards>

// Sign in, sign out, and /portal itself.
import { USERNAME } from '../accounts/service.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import type { RequestContext } from '../http/context.ts'
import { clientAddress } from '../http/client-address.ts'
import { checkSameOrigin, clearSessionCookie, isHttps, readForm, redirect, sendHtml, setSessionCookie } from './http.ts'
import type { Router } from '../http/router.ts'
import { failPage, type Guards, type PortalDeps } from './guard.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { signInPage } from './pages/sign-in.ts'

export function registerSessionRoutes(router: Router, deps: PortalDeps, guards: Guards): void {
  const { config } = deps

  router.on('GET', '/portal', async (ctx) => {
    ctx.route = 'portal.home'
    try {
      redirect(ctx.res, (await guards.resume(ctx)) === null ? '/portal/sign-in' : '/portal/keys')
    } catch (err) {
      failPage(ctx, err)
    }
  })

  router.on('GET', '/portal/sign-in', async (ctx, _params, query) => {
    ctx.route = 'portal.sign_in'
    try {
      if ((await guards.resume(ctx)) !== null) return redirect(ctx.res, '/portal/keys')
      // Where sign-out lands: it says it worked (the query carries nothing but that).
      sendHtml(ctx.res, 200, signInPage(query.has('signed-out') ? { signedOut: true } : {}))
    } catch (err) {
      failPage(ctx, err)
    }
  })

  router.on('POST', '/portal/sign-in', async (ctx) => {
    ctx.route = 'portal.sign_in'
    try {
      // No session yet to bind a token to: a cross-site sign-in (login CSRF) is refused by its origin.
      checkSameOrigin(ctx.req, config)
      const form = await readForm(ctx.req, bodyRateOf(config.server))
      const username = (form.get('username') ?? '').trim().slice(0, 256)
      const password = (form.get('password') ?? '').slice(0, 1024)
      // The form is filled in again with what can be a username only: anything else (spaces,
      // '=', a whole second field run in) is often the password typed into the wrong box.
      const shown = USERNAME.test(username) ? username : ''
      if (username === '' || password === '') return signInAgain(ctx, gatewayError('portal_sign_in_incomplete'), shown)
      const address = clientAddress(ctx.req, config.server.trustProxyHops)
      let result
      try {
        result = await deps.sessions.signIn(username, password, address)
      } catch (err) {
        if (err instanceof GatewayError && err.errorName === 'login_throttled') return signInAgain(ctx, err, shown)
        throw err
      }
      if (result === null) return signInAgain(ctx, gatewayError('portal_sign_in_failed'), shown)
      setSessionCookie(
        ctx.res,
        result.token,
        deps.sessions.cookieMaxAge(result.signedIn.session),
        isHttps(ctx.req, config),
      )
      redirect(ctx.res, '/portal/keys')
    } catch (err) {
      failPage(ctx, err)
    }
  })

  router.on(
    'POST',
    '/portal/sign-out',
    guards.form('portal.sign_out', async (ctx, me) => {
      await deps.sessions.signOut(me.session)
      clearSessionCookie(ctx.res, isHttps(ctx.req, config))
      redirect(ctx.res, '/portal/sign-in?signed-out')
    }),
  )
}

/** The sign-in form again, with the refusal's message on it (and its status and headers). */
function signInAgain(ctx: RequestContext, error: GatewayError, username: string): void {
  ctx.errorName = error.errorName
  for (const [name, value] of Object.entries(error.headers)) ctx.res.setHeader(name, value)
  sendHtml(ctx.res, error.status, signInPage({ error: error.message, username }))
}

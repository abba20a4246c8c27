// The portal's side of HTTP: its security headers, HTML and redirect replies, the session
// cookie, url-encoded form bodies, and the checks that a state-changing request came from
// the portal's own pages (Origin / Sec-Fetch-Site, then the session's CSRF token).
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Config } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import { readBodyChunks, type BodyRate } from '../http/body-rate.ts'
import { mediaTypeOf } from '../http/body.ts'
import { clientScheme } from '../http/client-address.ts'
import type { Html } from './html.ts'
import { COOKIE_NAME, sameSecret } from './sessions.ts'

/** No inline script or style, nothing from elsewhere, never in a frame. */
export const PORTAL_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

/** A form is a few fields; anything larger is not one of ours. */
const FORM_LIMIT_BYTES = 64 * 1024

export function securityHeaders(res: ServerResponse): void {
  res.setHeader('content-security-policy', PORTAL_CSP)
  res.setHeader('x-content-type-options', 'nosniff')
  res.setHeader('x-frame-options', 'DENY')
  res.setHeader('referrer-policy', 'same-origin')
  res.setHeader('cross-origin-opener-policy', 'same-origin')
  res.setHeader('cross-origin-resource-policy', 'same-origin')
  res.setHeader('permissions-policy', 'camera=(), microphone=(), geolocation=()')
}

export function sendHtml(res: ServerResponse, status: number, page: Html): void {
  const body = Buffer.from(`<!doctype html>\n${page.text}`, 'utf8')
  securityHeaders(res)
  // Pages show keys and usage: never cached, by the browser or anything between.
  res.setHeader('cache-control', 'no-store')
  res.setHeader('content-type', 'text/html; charset=utf-8')
  res.setHeader('content-length', body.length)
  res.statusCode = status
  res.end(body)
}

/** 303: the browser follows with a GET (post/redirect/get). */
export function redirect(res: ServerResponse, location: string): void {
  securityHeaders(res)
  res.setHeader('cache-control', 'no-store')
  res.setHeader('location', location)
  res.statusCode = 303
  res.end()
}

/** True when the browser reached us over TLS, directly or (trusted) through proxies. */
export function isHttps(req: IncomingMessage, config: Pick<Config, 'server' | 'portal'>): boolean {
  if (config.portal.secureCookie === 'always') return true
  if (config.portal.secureCookie === 'never') return false
  return clientScheme(req, config.server.trustProxyHops) === 'https'
}

/** The base URL an SDK on the user's side calls: this gateway's /v2, as the browser reached it. */
export function apiBaseUrl(req: IncomingMessage, config: Pick<Config, 'server' | 'portal'>): string {
  return `${isHttps(req, config) ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}/v2`
}

export function setSessionCookie(res: ServerResponse, token: string, maxAgeSeconds: number, secure: boolean): void {
  res.setHeader(
    'set-cookie',
    `${COOKIE_NAME}=${token}; Path=/portal; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
  )
}

export function clearSessionCookie(res: ServerResponse, secure: boolean): void {
  res.setHeader(
    'set-cookie',
    `${COOKIE_NAME}=; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
  )
}

/**
 * Refuses a state-changing request another site made the browser send: a Sec-Fetch-Site
 * other than same-origin (or none: typed by the user), or an Origin that is not this host.
 */
export function checkSameOrigin(req: IncomingMessage, config: Pick<Config, 'server' | 'portal'>): void {
  const site = req.headers['sec-fetch-site']
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw forged('cross-site request')
  const origin = req.headers.origin
  if (origin === undefined) return
  const host = req.headers.host ?? ''
  const expected = `${isHttps(req, config) ? 'https' : 'http'}://${host}`
  if (origin !== expected) throw forged('foreign origin')
}

/** The form's _csrf must be the session's token. */
export function checkCsrf(form: URLSearchParams, csrfToken: string): void {
  const sent = form.get('_csrf')
  if (sent === null || !sameSecret(sent, csrfToken)) throw forged('missing or wrong CSRF token')
}

function forged(why: string) {
  return gatewayError('portal_forbidden', { cause: new Error(why) })
}

/** An application/x-www-form-urlencoded body, at most 64 KiB. */
export async function readForm(req: IncomingMessage, rate: BodyRate): Promise<URLSearchParams> {
  if (mediaTypeOf(req) !== 'application/x-www-form-urlencoded') {
    throw gatewayError('unsupported_media_type', { message: 'Send the form as application/x-www-form-urlencoded.' })
  }
  const chunks: Buffer[] = []
  let size = 0
  await readBodyChunks(req, rate, (chunk) => {
    size += chunk.length
    if (size > FORM_LIMIT_BYTES) throw gatewayError('body_too_large', { message: 'The form is too large.' })
    chunks.push(chunk)
  })
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}

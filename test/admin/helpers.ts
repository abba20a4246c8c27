// Shared by the admin tests: calling the admin API, the one check that every admin route
// refuses a missing or wrong credential, and polling for "within a second".
import type { Test } from 'tap'
import { request, type RawResponse } from '../helpers/http.ts'

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE'

export function adminCall(url: string, token: string | null) {
  return (method: Method, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<RawResponse> =>
    request(`${url}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    })
}

/** Every admin route, with an id that exists when the route needs one. */
export function adminRoutes(id: string): Array<[Method, string, unknown?]> {
  return [
    ['POST', '/admin/keys', {}],
    ['GET', '/admin/keys'],
    ['GET', `/admin/keys/${id}`],
    ['PATCH', `/admin/keys/${id}`, { name: 'x' }],
    ['POST', `/admin/keys/${id}/rotate`, {}],
    ['DELETE', `/admin/keys/${id}`],
    ['GET', `/admin/keys/${id}/usage`],
    ['GET', '/admin/usage'],
    ['GET', '/admin/tiers'],
    ['GET', '/admin/backends'],
    ['GET', '/admin/queue'],
    ['GET', `/admin/queue/requests/${id}`],
    ['DELETE', `/admin/queue/requests/${id}`],
  ]
}

export function isError(t: Test, res: RawResponse, status: number, code: string | null, what: string): void {
  t.equal(res.status, status, `${what}: status ${status}`)
  let body: { error?: { code?: unknown; message?: unknown } } = {}
  try {
    body = res.json()
  } catch {
    t.fail(`${what}: body is not JSON: ${res.text.slice(0, 100)}`)
  }
  t.equal(body.error?.code, code, `${what}: code ${code}`)
  t.type(body.error?.message, 'string', `${what}: message`)
}

/**
 * No credential, a wrong one, the right one in the wrong scheme, an API key in its place:
 * 401 on every route, and nothing changed.
 */
export async function refusesWithoutAdmin(
  t: Test,
  url: string,
  adminToken: string,
  id: string,
  apiKey: string,
): Promise<void> {
  const wrongs: Array<[string, Record<string, string>]> = [
    ['no credential', {}],
    ['wrong token', { authorization: `Bearer ${adminToken.slice(0, -1)}${adminToken.endsWith('x') ? 'y' : 'x'}` }],
    ['token prefix only', { authorization: `Bearer ${adminToken.slice(0, 8)}` }],
    ['basic scheme', { authorization: `Basic ${Buffer.from(`admin:${adminToken}`).toString('base64')}` }],
    ['token without scheme', { authorization: adminToken }],
    ['an API key', { authorization: `Bearer ${apiKey}` }],
    ['token in another header', { 'x-admin-token': adminToken }],
  ]
  for (const [method, path, body] of adminRoutes(id)) {
    for (const [what, headers] of wrongs) {
      const res = await adminCall(url, null)(method, path, body, headers)
      isError(t, res, 401, 'invalid_admin_token', `${method} ${path}, ${what}`)
      t.notMatch(res.text, adminToken, 'the token is not echoed')
    }
  }
}

/** Polls until check() holds or `ms` pass; returns whether it held. */
export async function within(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() >= end) return false
    await new Promise((r) => setTimeout(r, 20))
  }
}

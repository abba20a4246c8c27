// Portal tests: users made through the admin API, and a signed-in "browser" over raw fetch
// (cookie and CSRF token carried by hand) for what a real browser would never send.
import type { RunningTollgate } from '../helpers/gateway.ts'

export async function createUser(
  gw: Pick<RunningTollgate, 'url' | 'adminToken'>,
  username: string,
  password: string,
  roles: string[] = [],
): Promise<{ id: string }> {
  const res = await fetch(`${gw.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password, roles }),
  })
  if (res.status !== 201) throw new Error(`create user ${username}: ${res.status} ${await res.text()}`)
  return (await res.json()) as { id: string }
}

export function csrfOf(page: string): string {
  const token = /name="_csrf" value="([^"]+)"/.exec(page)?.[1]
  if (token === undefined) throw new Error('no CSRF token on the page')
  return token
}

export interface FetchSession {
  readonly cookie: string
  readonly csrf: string
  get(path: string): Promise<Response>
  post(path: string, fields: Record<string, string>, headers?: Record<string, string>): Promise<Response>
}

export function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString()
}

/** The sign-in form posted as a browser posts it, redirects not followed: the raw reply. */
export function postSignIn(
  url: string,
  username: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}/portal/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: form({ username, password }),
  })
}

export async function signInByFetch(
  url: string,
  username: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<FetchSession> {
  const res = await postSignIn(url, username, password, headers)
  if (res.status !== 303) throw new Error(`sign-in ${username}: ${res.status}`)
  const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
  const get = (path: string): Promise<Response> => fetch(`${url}${path}`, { redirect: 'manual', headers: { cookie } })
  const csrf = csrfOf(await (await get('/portal/keys')).text())
  return {
    cookie,
    csrf,
    get,
    post: (path, fields, extra = {}) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...extra },
        body: form(fields),
      }),
  }
}

/** The secret on a "shown once" page. */
export function secretOf(page: string): string {
  const secret = /id="secret" readonly value="([^"]+)"/.exec(page)?.[1]
  if (secret === undefined) throw new Error('no secret on the page')
  return secret
}

export function keyIdOf(page: string): string {
  const id = /\/portal\/keys\/(key_[0-9a-f]{24})/.exec(page)?.[1]
  if (id === undefined) throw new Error('no key link on the page')
  return id
}

/**
 * Creates a key as the portal's form does: the POST answers 303 to the key's secret page
 * (post/redirect/get), whose one GET shows the secret. Also returns that page and the redirect.
 */
export async function createKeyByFetch(
  s: FetchSession,
  name: string,
  extra: Record<string, string> = {},
): Promise<{ id: string; secret: string; location: string; page: string }> {
  const res = await s.post('/portal/keys', { _csrf: s.csrf, name, ...extra })
  await res.arrayBuffer()
  const location = res.headers.get('location') ?? ''
  if (res.status !== 303 || !/^\/portal\/keys\/key_[0-9a-f]{24}\/secret$/.test(location))
    throw new Error(`create key: ${res.status} ${location}`)
  const shown = await s.get(location)
  const page = await shown.text()
  if (shown.status !== 200) throw new Error(`secret page: ${shown.status}`)
  return { id: keyIdOf(page), secret: secretOf(page), location, page }
}

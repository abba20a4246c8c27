// What the portal fuzz (test/fuzz/portal.test.ts) found: requests a browser would not make
// but anyone can, each refused with a page of the portal, never a 500.
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { createUser, signInByFetch, type FetchSession } from './helpers.ts'

let gw: RunningTollgate
let alice: FetchSession
t.before(async () => {
  gw = await startTollgate()
  await createUser(gw, 'alice', 'alice-password')
  alice = await signInByFetch(gw.url, 'alice', 'alice-password')
})
t.teardown(() => gw?.stop())

t.test('usage over days that have the shape of a date but do not exist: a 400 page, not a 500', async (t) => {
  for (const query of [
    'from=2025-02-30',
    'to=2025-13-01',
    'from=0000-00-00&to=2025-01-01',
    'from=2025-01-01&to=2025-02-29',
  ]) {
    for (const path of ['/portal/usage', '/portal/usage.csv']) {
      const res = await alice.get(`${path}?${query}`)
      t.equal(res.status, 400, `${path}?${query}`)
      t.match(res.headers.get('content-type'), /^text\/html/)
      t.match(await res.text(), /must be a date \(YYYY-MM-DD\)/)
    }
  }
  t.equal((await alice.get('/portal/usage?from=2024-02-29&to=2024-03-01')).status, 200, 'a leap day is a day')
})

t.test("a URL under /portal that no route matches is the portal's 404 page, not the API's JSON", async (t) => {
  // An id longer than the router takes (256), a mistyped page, a method-less path below a page.
  for (const path of [
    `/portal/keys/${'a'.repeat(300)}`,
    '/portal/nope',
    '/portal/keys/key_x/nope',
    `/portal/assets/${'a'.repeat(300)}?v=1`,
  ]) {
    const res = await alice.get(path)
    t.equal(res.status, 404, path)
    t.match(res.headers.get('content-type'), /^text\/html/, `${path}: a page`)
    t.match(res.headers.get('content-security-policy'), /default-src 'self'/, `${path}: with the portal's headers`)
    t.match(await res.text(), /There is nothing here/)
  }
  const post = await alice.post(`/portal/admin/users/${'a'.repeat(300)}/disable`, { _csrf: alice.csrf })
  t.equal(post.status, 404, 'a form posted to one too')
  t.match(post.headers.get('content-type'), /^text\/html/)
  const api = await fetch(`${gw.url}/portally`)
  t.match(api.headers.get('content-type'), /json/, "a path that only starts like it keeps the API's 404")
})

t.test(
  'a failed sign-in fills the username in again, but never text that cannot be one (a password in the wrong box)',
  async (t) => {
    const signIn = (body: string): Promise<Response> =>
      fetch(`${gw.url}/portal/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      })
    const wrong = await signIn('username=alice&password=nope-nope')
    t.equal(wrong.status, 401)
    t.match(await wrong.text(), /name="username"[^>]*value="alice"/, 'a username is shown again')
    // A form whose separator is a newline is one field: the username runs on into the password.
    for (const body of [
      'username=\npassword=alice-password',
      'username=my%20secret%20phrase&password=x',
      'username=alice-password%3D1',
    ]) {
      const res = await signIn(body)
      const page = await res.text()
      t.equal(res.status, body.includes('&') ? 401 : 400, body)
      t.notMatch(page, /alice-password|secret phrase/, `${body}: not shown`)
      t.match(page, /name="username"[^>]*value=""/)
    }
  },
)

t.test("a portal URL asked with a method it does not serve is the portal's 405 page, with Allow", async (t) => {
  for (const [method, path, allow] of [
    ['GET', '/portal/sign-out', /POST/],
    ['GET', '/portal/keys/key_x/revoke', /POST/],
    ['PUT', '/portal/keys', /GET.*POST|POST.*GET/],
    ['DELETE', '/portal/keys/key_x', /GET/],
  ] as const) {
    const res = await fetch(`${gw.url}${path}`, { method, redirect: 'manual', headers: { cookie: alice.cookie } })
    t.equal(res.status, 405, `${method} ${path}`)
    t.match(res.headers.get('allow'), allow)
    t.match(res.headers.get('content-type'), /^text\/html/, `${method} ${path}: a page`)
    await res.arrayBuffer()
  }
  t.match(
    (await fetch(`${gw.url}/v2/models`, { method: 'PUT' })).headers.get('content-type'),
    /json/,
    "the API's 405 stays JSON",
  )
})

// Identity to backends: what a client claims about itself never reaches a backend; the
// gateway's identity headers (configurable names) do; credentials and cookies do not,
// unless the verified token is forwarded on purpose.
import t from 'tap'
import { rawRequest, startRagHarness } from './harness.ts'
import { readText } from '../helpers/http.ts'

interface Echo {
  readonly headers: Record<string, string>
  readonly url: string
}

const FORGED = {
  'x-tollgate-user-id': 'root',
  'x-tollgate-user-roles': 'admin',
  'x-tollgate-tenant': 'other-tenant',
  'x-tollgate-anything': 'forged',
  'x-forwarded-user': 'root',
  'x-remote-user': 'root',
  'x-user-id': 'root',
  'x-auth-request-user': 'root',
  'x-forwarded-for': '10.9.9.9',
  'x-forwarded-proto': 'https',
  forwarded: 'for=10.9.9.9',
  cookie: 'refresh_token=rt_secret; session=abc',
  'proxy-authorization': 'Basic cm9vdDpyb290',
  'x-custom-header': 'kept',
  connection: 'keep-alive, x-drop-me',
  'x-drop-me': 'hop-by-hop',
}

t.test('client identity headers never reach a backend; the gateway sets its own', async (t) => {
  const h = await startRagHarness(t)
  const headers = await h.auth({ sub: 'u-42', name: 'Zoë Ä', roles: ['user'], groups: ['a,b', 'c'], tenant: 'acme' })
  const reply = await rawRequest(h.url, '/user-manager/api/v1/echo/x?q=1', { headers: { ...headers, ...FORGED } })
  t.equal(reply.status, 200)
  const echo = JSON.parse(reply.body) as Echo
  const seen = echo.headers
  t.equal(seen['x-tollgate-user-id'], 'u-42')
  t.equal(seen['x-tollgate-user-name'], 'Zo%C3%AB%20%C3%84', 'values are percent-encoded UTF-8')
  t.equal(seen['x-tollgate-user-roles'], 'user')
  t.equal(seen['x-tollgate-user-groups'], 'a%2Cb,c', 'a comma inside an item is encoded')
  t.equal(seen['x-tollgate-tenant'], 'acme')
  t.notOk('x-tollgate-anything' in seen, 'any x-tollgate-* header from the client is dropped')
  for (const name of [
    'x-forwarded-user',
    'x-remote-user',
    'x-user-id',
    'x-auth-request-user',
    'cookie',
    'authorization',
    'proxy-authorization',
    'forwarded',
    'x-drop-me',
  ]) {
    t.notOk(name in seen, `${name} not passed on`)
  }
  t.equal(seen['x-forwarded-for'], '127.0.0.1', 'the client address as the gateway saw it, not the forged one')
  t.equal(seen['x-forwarded-prefix'], '/user-manager')
  t.equal(
    seen['x-forwarded-proto'],
    'http',
    'the scheme the gateway was reached by, not the claimed one (no trusted proxy)',
  )
  t.equal(seen['x-custom-header'], 'kept', 'other headers pass')
  t.ok(seen['x-request-id']?.startsWith('req_'), 'the request id')
  t.equal(echo.url, '/user-manager/api/v1/echo/x?q=1')

  // On a public route there is no identity: forged headers are still dropped.
  const anon = await rawRequest(h.url, '/user-manager/openapi.json', { headers: FORGED })
  t.equal(anon.status, 200)
  const seenAnon = (await fetch(`${h.url}/user-manager/api/v1/echo`, { headers })).status
  t.equal(seenAnon, 200)
})

t.test('behind a trusted proxy, its X-Forwarded-For and X-Forwarded-Proto are what the backend hears', async (t) => {
  const h = await startRagHarness(t, {
    config: (doc) => {
      ;(doc.server as Record<string, unknown>).trustProxyHops = 1
    },
  })
  const headers = await h.auth()
  const via = async (extra: Record<string, string>): Promise<Record<string, string>> =>
    (
      JSON.parse(
        (await rawRequest(h.url, '/user-manager/api/v1/echo', { headers: { ...headers, ...extra } })).body,
      ) as Echo
    ).headers
  const tls = await via({ 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' })
  t.equal(tls['x-forwarded-proto'], 'https', 'the proxy terminated TLS')
  t.equal(tls['x-forwarded-for'], '203.0.113.7', 'the client the proxy saw')
  t.equal((await via({ 'x-forwarded-proto': 'gopher' }))['x-forwarded-proto'], 'http', 'anything but https is http')
})

t.test('configured header names; the verified token forwarded when asked', async (t) => {
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as Record<string, unknown>
      rag.identityHeaders = {
        userId: 'x-user',
        username: 'x-user-name',
        roles: 'x-roles',
        groups: 'x-groups',
        tenant: 'x-tenant',
      }
      rag.forwardToken = true
    },
  })
  const headers = await h.auth({ sub: 'u-1', roles: ['admin'], tenant: 't1' })
  const echo = (await (
    await fetch(`${h.url}/config-manager/api/v1/echo`, {
      headers: { ...headers, 'x-user': 'forged', 'x-roles': 'forged' },
    })
  ).json()) as Echo
  t.equal(echo.headers['x-user'], 'u-1', 'a forged value of a configured name is replaced')
  t.equal(echo.headers['x-roles'], 'admin')
  t.equal(echo.headers['x-tenant'], 't1')
  t.equal(echo.headers.authorization, headers.authorization, 'the verified token, as configured')
  t.notOk('x-tollgate-user-id' in echo.headers)
})

t.test('request bodies keep their framing: chunked stays chunked, even on DELETE', async (t) => {
  const h = await startRagHarness(t)
  const headers = await h.auth({ sub: 'u-1', roles: ['admin'] })
  const { request } = await import('node:http')
  for (const method of ['POST', 'DELETE']) {
    const echo = await new Promise<{ received_bytes: number; headers: Record<string, string> }>((done, fail) => {
      const req = request(
        `${h.url}/ingest-master/api/v1/echo`,
        { method, headers: { ...headers, 'transfer-encoding': 'chunked' } },
        readText((reply) => done(JSON.parse(reply.body) as never)),
      )
      req.once('error', fail)
      req.write('first part, ')
      setTimeout(() => req.end('second part'), 20)
    })
    t.equal(echo.received_bytes, 23, `${method}: the whole body arrived`)
    t.equal(echo.headers['transfer-encoding'], 'chunked', `${method}: chunked`)
  }
})

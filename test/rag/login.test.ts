// The RAG gateway as a user meets it: `tollgate serve`, an account made through the admin
// API, a login with username and password, and with the access token it gives: sessions
// listed, a chat streamed through query-pipelines, files uploaded and ingested. Once on
// the built-in mock (the default configuration), once on mock backends running as
// processes of their own. Then the refresh token is rotated and the session logged out.
import t, { type Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { ragFlow } from './flow.ts'
import { startMockProcess } from './harness.ts'

interface Login {
  readonly access_token: string
  readonly token_type: string
  readonly expires_in: number
  readonly refresh_token: string
}

async function login(gw: RunningTollgate, username: string, password: string): Promise<Response> {
  return fetch(`${gw.url}/api/v1/auth/user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  })
}

async function walk(t: Test, gw: RunningTollgate): Promise<void> {
  const created = await fetch(`${gw.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      username: 'grace',
      password: 'correct horse battery staple',
      roles: ['user', 'editor'],
      groups: ['research'],
      tenant: 'acme',
    }),
  })
  t.equal(created.status, 201, 'the admin made an account')
  const user = (await created.json()) as { id: string; username: string }
  t.notOk(JSON.stringify(user).includes('correct horse'), 'the reply holds no password')

  const wrong = await login(gw, 'grace', 'not the password')
  t.equal(wrong.status, 401, 'a wrong password is refused')
  t.same(await wrong.json(), { detail: 'Incorrect username or password' }, "in FastAPI's shape")

  const res = await login(gw, 'grace', 'correct horse battery staple')
  t.equal(res.status, 200, 'logged in')
  const tokens = (await res.json()) as Login
  t.equal(tokens.token_type, 'bearer')
  t.ok(
    tokens.expires_in > 0 && tokens.access_token.split('.').length === 3 && tokens.refresh_token.length > 20,
    'an access token (a JWT), its lifetime and a refresh token',
  )

  await ragFlow(
    t,
    gw.url,
    { authorization: `Bearer ${tokens.access_token}` },
    {
      userId: user.id,
      username: 'grace',
      roles: 'user,editor',
      groups: 'research',
      tenant: 'acme',
    },
  )

  const refreshed = await fetch(`${gw.url}/api/v1/auth/refresh`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ refresh_token: tokens.refresh_token }),
  })
  t.equal(refreshed.status, 200, 'the refresh token gives a new pair')
  const next = (await refreshed.json()) as Login
  t.not(next.refresh_token, tokens.refresh_token, 'and a new refresh token')
  const sessions = (token: string): Promise<Response> =>
    fetch(`${gw.url}/chat-session-manager/api/v1/sessions/`, { headers: { authorization: `Bearer ${token}` } })
  t.equal((await sessions(next.access_token)).status, 200, 'the new access token works')

  const out = await fetch(`${gw.url}/api/v1/auth/logout`, {
    method: 'POST',
    headers: { authorization: `Bearer ${next.access_token}`, 'content-type': 'application/json' },
    body: '{}',
  })
  t.equal(out.status, 204, 'logged out')
  const after = await sessions(next.access_token)
  t.equal(after.status, 401, 'after the logout the access token is refused')
  t.equal(after.headers.get('www-authenticate'), 'Bearer')
}

t.test('on the built-in mock, with the default configuration', async (t) => {
  const gw = await startTollgate({})
  t.teardown(() => gw.stop())
  await walk(t, gw)
})

t.test('on mock backends running as processes of their own', async (t) => {
  const services = ['chat-session-manager', 'query-pipeline', 'file-manager', 'ingest-master'] as const
  const processes = await Promise.all(
    services.map((s) => startMockProcess(t, s, s === 'query-pipeline' ? ['--token-delay-ms', '40'] : [])),
  )
  const gw = await startTollgate({
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      services.forEach((s, i) => {
        rag.services[s] = { ...rag.services[s], baseUrl: processes[i]?.url }
      })
    },
  })
  t.teardown(() => gw.stop())
  await walk(t, gw)
})

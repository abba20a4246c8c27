// Login, refresh and logout over raw HTTP against a running (embedded) gateway: the reply
// shapes, FastAPI's errors, the same answer for an unknown user and a wrong password, the
// login counters. (The brute-force throttle: login-throttle.test.ts.)
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { call, createUser, login, me, type Pair } from './helpers.ts'

const gw = await startTollgate({
  config: (doc) => {
    doc.ragAuth = {
      loginThrottle: { maxFailuresPerUserAddress: 1000, maxFailuresPerUsername: 1000, maxFailuresPerAddress: 1000 },
    }
  },
})
t.teardown(async () => {
  await gw.stop()
})
await createUser(gw, {
  username: 'ursula',
  password: 'ursula password',
  roles: ['user'],
  groups: ['g1'],
  tenant: 'acme',
})

const loginReply = (body: unknown, headers: Record<string, string> = {}) =>
  call(gw.url, 'POST', '/api/v1/auth/user', { body, headers })

t.test('login answers a bearer token pair, not to be cached', async (t) => {
  const reply = await loginReply({ username: 'ursula', password: 'ursula password' })
  t.equal(reply.status, 200)
  t.match(reply.json, { token_type: 'bearer', expires_in: 900 })
  t.match(reply.json.access_token, /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/)
  t.match(reply.json.refresh_token, /^rt_[\w-]{43}\.usr_[0-9a-f]{24}$/)
  t.equal(reply.headers.get('cache-control'), 'no-store')
  const who = await me(gw.url, String(reply.json.access_token))
  t.strictSame(who.json, {
    user_id: who.json.user_id,
    username: 'ursula',
    roles: ['user'],
    groups: ['g1'],
    tenant: 'acme',
    source: 'local',
  })
})

t.test("a bad login body is a 422 with FastAPI's list of problems, never echoing the password", async (t) => {
  const missing = await loginReply({ username: 'ursula' })
  t.equal(missing.status, 422)
  t.strictSame(missing.json, { detail: [{ type: 'missing', loc: ['body', 'password'], msg: 'Field required' }] })
  const wrongType = await loginReply({ username: 7, password: 'secret-in-body' })
  t.equal(wrongType.status, 422)
  t.match(wrongType.json, { detail: [{ loc: ['body', 'username'] }] })
  t.notMatch(wrongType.text, /secret-in-body/)
  const notJson = await loginReply('{"username": "ursula", "password": ')
  t.equal(notJson.status, 422)
  t.match(notJson.json, { detail: [{ type: 'json_invalid' }] })
  const array = await loginReply([])
  t.equal(array.status, 422)
  const form = await call(gw.url, 'POST', '/api/v1/auth/user', {
    body: 'username=ursula&password=x',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  })
  t.equal(form.status, 415)
  t.type(form.json.detail, 'string', 'other refusals are {"detail": "..."} too')
})

t.test('any string is a username to refuse: a lone surrogate, a very long one, control characters', async (t) => {
  for (const username of ['\ud800A', 'x'.repeat(256), 'a\u0000b', '../../etc/passwd', '%E0%A4%A']) {
    const reply = await loginReply({ username, password: 'whatever it is' })
    t.equal(reply.status, 401, JSON.stringify(username).slice(0, 40))
    t.strictSame(reply.json, { detail: 'Incorrect username or password' })
  }
})

t.test('an unknown user and a wrong password get the same answer in about the same time', async (t) => {
  const attempt = async (
    username: string,
  ): Promise<{ ms: number; status: number; text: string; auth: string | null }> => {
    const start = performance.now()
    const reply = await loginReply({ username, password: 'not the password' })
    return {
      ms: performance.now() - start,
      status: reply.status,
      text: reply.text,
      auth: reply.headers.get('www-authenticate'),
    }
  }
  const wrong: number[] = []
  const unknown: number[] = []
  for (let i = 0; i < 7; i++) {
    const a = await attempt('ursula')
    const b = await attempt(`nobody-${i}`)
    t.equal(a.status, 401)
    t.equal(b.status, 401)
    t.equal(a.text, b.text, 'the same body')
    t.equal(a.text, '{"detail":"Incorrect username or password"}')
    t.equal(a.auth, 'Bearer')
    t.equal(b.auth, 'Bearer')
    wrong.push(a.ms)
    unknown.push(b.ms)
  }
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0
  const [mw, mu] = [median(wrong), median(unknown)]
  t.comment(`median login time: wrong password ${mw.toFixed(1)} ms, unknown user ${mu.toFixed(1)} ms`)
  t.ok(mw > 5 && mu > 5, 'both spend a password hash')
  t.ok(mu / mw > 0.33 && mu / mw < 3, `within a factor of 3 (${(mu / mw).toFixed(2)})`)
})

t.test('refresh rotates on every use; each new pair works; logout ends it', async (t) => {
  let pair: Pair = await login(gw.url, 'ursula', 'ursula password')
  const seen = new Set([pair.refresh_token])
  for (let i = 0; i < 3; i++) {
    const reply = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } })
    t.equal(reply.status, 200)
    pair = reply.json as unknown as Pair
    t.notOk(seen.has(pair.refresh_token), 'a fresh refresh token')
    seen.add(pair.refresh_token)
    t.equal((await me(gw.url, pair.access_token)).status, 200)
  }
  t.equal((await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: {} })).status, 422)
  t.equal((await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: 'rt_made_up' } })).status, 401)
  t.equal((await call(gw.url, 'POST', '/api/v1/auth/logout', { token: pair.access_token })).status, 204)
  t.equal((await me(gw.url, pair.access_token)).status, 401)
  const noToken = await call(gw.url, 'GET', '/api/v1/auth/me')
  t.equal(noToken.status, 401)
  t.strictSame(noToken.json, { detail: 'Not authenticated' })
  t.equal(noToken.headers.get('www-authenticate'), 'Bearer')
})

t.test('logins and refreshes are counted by outcome', async (t) => {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  const value = (name: string, outcome: string): number =>
    Number(new RegExp(`^${name}\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? -1)
  t.ok(value('tollgate_rag_logins_total', 'success') >= 2)
  t.ok(value('tollgate_rag_logins_total', 'invalid_credentials') >= 14)
  t.ok(value('tollgate_rag_logins_total', 'invalid_body') >= 4)
  t.ok(value('tollgate_rag_token_refreshes_total', 'rotated') >= 3)
  t.ok(value('tollgate_rag_token_refreshes_total', 'invalid') >= 1)
})

// Redis down: the gateway still starts, and the login side answers 503 in FastAPI's shape
// (never a 500, never a crash); a token it cannot check is not let through.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { closedPort, startTollgate } from '../helpers/gateway.ts'
import { b64url, call, me } from './helpers.ts'

const port = await closedPort()
const gw = await startTollgate({
  env: { REDIS_URL: `redis://127.0.0.1:${port}`, TOLLGATE_KEY_SECRET: `down-${randomBytes(16).toString('hex')}` },
})
t.teardown(async () => {
  await gw.stop()
})

t.test('login, refresh, JWKS: 503 with a detail; a token is never accepted unchecked', async (t) => {
  const login = await call(gw.url, 'POST', '/api/v1/auth/user', {
    body: { username: 'alice', password: 'alice password' },
  })
  t.equal(login.status, 503)
  t.type(login.json.detail, 'string')
  const refresh = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: 'rt_x' } })
  t.equal(refresh.status, 503)
  t.type(refresh.json.detail, 'string')
  const jwks = await call(gw.url, 'GET', '/.well-known/jwks.json')
  t.equal(jwks.status, 503)
  t.type(jwks.json.detail, 'string')
  const forged = `${b64url({ alg: 'EdDSA', kid: 'k', typ: 'at+jwt' })}.${b64url({ iss: 'tollgate', sub: 'usr_x' })}.${b64url('sig')}`
  const who = await me(gw.url, forged)
  t.equal(who.status, 503, 'a token that cannot be checked is not accepted, and not called bad either')
  t.type(who.json.detail, 'string')
  t.equal((await fetch(`${gw.url}/healthz`)).status, 200, 'the gateway is alive')
  t.notMatch(gw.output(), /"level":50.*unhandled/, 'no unhandled error logged')
})

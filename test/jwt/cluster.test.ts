// Two gateway processes on one Redis: a token issued by one works on the other; after a
// logout on one, the other refuses the token within a second; a signing-key rotation
// leaves the tokens signed before it valid on both until they expire.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { REDIS_URL, redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { call, createUser, decodePart, login, me, within } from './helpers.ts'

const ns = await redisNamespace(t)
const KEY_SECRET = `cluster-${randomBytes(16).toString('hex')}`
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`
const ROTATION_SECONDS = 3
const ACCESS_TTL_SECONDS = 8

async function gateway(): Promise<RunningTollgate> {
  const gw = await startTollgate({
    adminToken: ADMIN_TOKEN,
    config: (doc) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = ns.prefix
      // Every reuse a theft: this test is about how fast a revocation reaches the other instance.
      doc.ragAuth = {
        signingKeyRotationSeconds: ROTATION_SECONDS,
        accessTokenTtlSeconds: ACCESS_TTL_SECONDS,
        refreshReuseSeconds: 0,
      }
    },
    env: { REDIS_URL, TOLLGATE_KEY_SECRET: KEY_SECRET },
  })
  t.teardown(async () => {
    await gw.stop()
  })
  return gw
}

if (!ns.up) {
  t.fail(redisMissing())
} else {
  const a = await gateway()
  const b = await gateway()
  await createUser(a, { username: 'roamer', password: 'roamer password', roles: ['user'] })

  t.test('a token issued by A works on B; a user made on A logs in on B', async (t) => {
    const fromA = await login(a.url, 'roamer', 'roamer password')
    t.equal((await me(b.url, fromA.access_token)).status, 200)
    const fromB = await login(b.url, 'roamer', 'roamer password')
    t.equal((await me(a.url, fromB.access_token)).status, 200)
    // A refresh token from A is spent on B.
    const refreshed = await call(b.url, 'POST', '/api/v1/auth/refresh', {
      body: { refresh_token: fromA.refresh_token },
    })
    t.equal(refreshed.status, 200)
    t.equal(
      (await call(a.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: fromA.refresh_token } })).status,
      401,
      'and reused on A: refused',
    )
    const ms = await within(5000, async () => (await me(b.url, String(refreshed.json.access_token))).status === 401)
    t.ok(ms >= 0 && ms < 1000, `the reuse on A revoked the session for B within 1 s (${ms.toFixed(0)} ms)`)
  })

  t.test('after a logout on A, B refuses the token within 1 s', async (t) => {
    for (let round = 0; round < 3; round++) {
      const pair = await login(a.url, 'roamer', 'roamer password')
      // B has read the session and user: several calls, the later ones from its cache.
      for (let i = 0; i < 3; i++) t.equal((await me(b.url, pair.access_token)).status, 200)
      const started = performance.now()
      t.equal((await call(a.url, 'POST', '/api/v1/auth/logout', { token: pair.access_token })).status, 204)
      const ms = await within(5000, async () => (await me(b.url, pair.access_token)).status === 401)
      const total = performance.now() - started
      t.comment(`round ${round}: B refused the token ${ms.toFixed(0)} ms after A answered the logout`)
      t.ok(ms >= 0 && total < 1000, `refused by B within 1 s (${total.toFixed(0)} ms from the logout request)`)
    }
  })

  t.test('a disabled user is refused by B within 1 s', async (t) => {
    await createUser(a, { username: 'to-disable', password: 'to-disable password' })
    const pair = await login(b.url, 'to-disable', 'to-disable password')
    t.equal((await me(b.url, pair.access_token)).status, 200)
    t.equal(
      (await call(a.url, 'PATCH', '/admin/users/to-disable', { token: ADMIN_TOKEN, body: { disabled: true } })).status,
      200,
    )
    const ms = await within(5000, async () => (await me(b.url, pair.access_token)).status === 401)
    t.ok(ms >= 0 && ms < 1000, `refused within 1 s (${ms.toFixed(0)} ms)`)
  })

  t.test('signing keys rotate; earlier tokens stay valid on both instances until they expire', async (t) => {
    const early = await login(a.url, 'roamer', 'roamer password')
    const earlyKid = decodePart(early.access_token, 0).kid
    let later = early
    const ms = await within((ROTATION_SECONDS + 5) * 1000, async () => {
      later = await login(b.url, 'roamer', 'roamer password')
      return decodePart(later.access_token, 0).kid !== earlyKid
    })
    t.ok(ms >= 0, `a new signing key within the rotation interval (${ms.toFixed(0)} ms)`)
    const laterKid = decodePart(later.access_token, 0).kid
    t.not(laterKid, earlyKid)
    for (const gw of [a, b]) {
      t.equal((await me(gw.url, early.access_token)).status, 200, 'the early token still works')
      t.equal((await me(gw.url, later.access_token)).status, 200, 'the later one too')
      const jwks = await call(gw.url, 'GET', '/.well-known/jwks.json')
      const kids = (jwks.json.keys as Array<{ kid: string }>).map((k) => k.kid)
      t.ok(kids.includes(String(earlyKid)) && kids.includes(String(laterKid)), 'both keys are published')
    }
    // Until it expires: then it is refused, though its key may still be published.
    const exp = Number(decodePart(early.access_token, 1).exp)
    const wait = exp * 1000 - Date.now() + 1200
    if (wait > 0) await new Promise((done) => setTimeout(done, wait))
    t.equal((await me(a.url, early.access_token)).status, 401, 'expired now')
    t.equal((await me(b.url, early.access_token)).status, 401)
  })
}

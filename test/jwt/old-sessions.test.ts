// Sessions a Tollgate made before ids named their user (issue #25): their refresh tokens and
// session ids name no user, and they live under `{tg}`. After the upgrade they go on working
// there until they end (refresh, /me, logout), while new logins land on the user's slot.
import { createHash, randomBytes } from 'node:crypto'
import t from 'tap'
import { redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { authGateway, call, createUser, login, me } from './helpers.ts'

const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`
const ns = await redisNamespace(t)

if (!ns.up) {
  t.fail(redisMissing())
} else {
  t.test('a session of the {tg} layout refreshes, reads and ends where it is', async (t) => {
    const gw = await authGateway(t, {
      adminToken: ADMIN_TOKEN,
      config: () => {},
      redis: { prefix: ns.prefix, secret: randomBytes(24).toString('hex') },
    })
    const user = await createUser(gw, { username: 'olga', password: 'olga password 1' })
    const fresh = await login(gw.url, 'olga', 'olga password 1')
    t.match(fresh.refresh_token, new RegExp(`\\.${user.id}$`), 'a new login names its user')
    t.ok(
      (await ns.keys()).some((key) => key.startsWith(`${ns.prefix}{o:${user.id}}:sess:`)),
      "and its session is on the user's slot",
    )

    // As a Tollgate before #25 left one: the session and its live refresh token in {tg}.
    const id = `ses_${randomBytes(16).toString('hex')}`
    const token = `rt_${randomBytes(32).toString('base64url')}`
    const now = Date.now()
    const until = now + 3_600_000
    const tg = `${ns.prefix}{tg}:`
    await ns.redis.set(
      `${tg}sess:${id}`,
      JSON.stringify({
        id,
        userId: user.id,
        username: 'olga',
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(until).toISOString(),
        revokedAt: null,
      }),
      'PXAT',
      until,
    )
    const hash = createHash('sha256').update(token).digest('hex')
    await ns.redis.set(`${tg}rt:${hash}`, `${id}|live`, 'PXAT', until)

    const refreshed = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: token } })
    t.equal(refreshed.status, 200, 'the old refresh token works')
    const next = String(refreshed.json.refresh_token)
    t.match(next, /^rt_[\w-]{43}$/, 'its successor stays on its slot: it names no user')
    const access = String(refreshed.json.access_token)
    t.equal((await me(gw.url, access)).status, 200, 'its access token reads the session')
    const again = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: next } })
    t.equal(again.status, 200, 'and the successor refreshes in turn')
    const reused = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: token } })
    t.equal(reused.status, 401, 'a spent one still revokes it')
    t.equal((await me(gw.url, String(again.json.access_token))).status, 401, 'the session is over')
  })
}

// The portal against what an attacker tries, over raw HTTP: another user's keys and usage,
// forged cross-site form posts, password guessing, and the cookie and headers a browser
// relies on. On the embedded store, and on Redis (sessions shared in the store, expiring
// when idle and at their absolute end, Secure behind a TLS-terminating proxy).
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { chatWith } from '../helpers/http.ts'
import { createKeyByFetch, createUser, postSignIn, secretOf, signInByFetch, type FetchSession } from './helpers.ts'

let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate({
    config: (doc) => {
      doc.ragAuth = {
        loginThrottle: {
          maxFailuresPerUserAddress: 3,
          maxFailuresPerAddress: 1000,
          windowSeconds: 60,
          blockSeconds: 60,
        },
      }
    },
  })
  await createUser(gw, 'alice', 'alice-password')
  await createUser(gw, 'bob', 'bob-password')
})
t.teardown(() => gw?.stop())

async function keysOf(owner: string): Promise<Array<{ id: string; status: string }>> {
  const res = await fetch(`${gw.url}/admin/keys?owner=${owner}`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  return ((await res.json()) as { data: Array<{ id: string; status: string }> }).data
}

const createKey = createKeyByFetch

t.test(
  'sign-in: a wrong password is refused; the cookie is HttpOnly, SameSite=Strict, not Secure over plain HTTP',
  async (t) => {
    const wrong = await postSignIn(gw.url, 'alice', 'nope-nope')
    t.equal(wrong.status, 401)
    t.equal(wrong.headers.get('set-cookie'), null, 'no cookie')
    t.match(await wrong.text(), /Wrong username or password/)
    const unknown = await postSignIn(gw.url, 'nobody', 'nope-nope')
    t.equal(unknown.status, 401, 'an unknown user gets the same answer')

    const ok = await postSignIn(gw.url, 'alice', 'alice-password')
    t.equal(ok.status, 303)
    t.equal(ok.headers.get('location'), '/portal/keys')
    const cookie = ok.headers.get('set-cookie') ?? ''
    t.match(
      cookie,
      /^tollgate_portal=[\w-]{43}\.usr_[0-9a-f]{24}; Path=\/portal; Max-Age=43200; HttpOnly; SameSite=Strict$/,
      "the cookie names its user: its session is on the user's slot",
    )
    t.notMatch(cookie, /Secure/)
  },
)

t.test(
  'security headers on every page: strict CSP without inline script, no framing, nosniff, referrer policy',
  async (t) => {
    const s = await signInByFetch(gw.url, 'alice', 'alice-password')
    for (const path of ['/portal/sign-in', '/portal/keys', '/portal/usage']) {
      const res = path === '/portal/sign-in' ? await fetch(`${gw.url}${path}`) : await s.get(path)
      t.equal(res.status, 200, path)
      const csp = res.headers.get('content-security-policy') ?? ''
      t.match(csp, /default-src 'self'/, `${path}: default-src 'self'`)
      t.match(csp, /frame-ancestors 'none'/, `${path}: frame-ancestors 'none'`)
      t.notMatch(csp, /unsafe-inline|unsafe-eval/, `${path}: nothing unsafe`)
      t.equal(res.headers.get('x-content-type-options'), 'nosniff')
      t.equal(res.headers.get('referrer-policy'), 'same-origin')
      t.equal(res.headers.get('cache-control'), 'no-store')
      const page = await res.text()
      t.notMatch(
        page,
        /<script>|<script [^>]*>[^<]|\son[a-z]+="|style="/i,
        `${path}: no inline script, handler or style`,
      )
      t.notMatch(page, /https?:\/\/(?!www\.w3\.org)/, `${path}: nothing from another host`)
    }
  },
)

t.test("a user never sees another user's keys or usage", async (t) => {
  const alice = await signInByFetch(gw.url, 'alice', 'alice-password')
  const bob = await signInByFetch(gw.url, 'bob', 'bob-password')
  const key = await createKey(alice, 'alice-private')
  const bobsOwn = await createKey(bob, 'bob-own')

  const bobList = await (await bob.get('/portal/keys')).text()
  t.notMatch(bobList, key.id, "not in bob's list")
  t.notMatch(bobList, 'alice-private')
  t.match(bobList, bobsOwn.id)
  t.equal((await bob.get(`/portal/keys/${key.id}`)).status, 404, 'the direct URL is not found')
  t.equal((await bob.get(`/portal/usage?key=${key.id}`)).status, 404, 'nor its usage')
  t.equal((await bob.get(`/portal/usage.csv?key=${key.id}`)).status, 404, 'nor its CSV')
  t.notMatch(await (await bob.get('/portal/usage')).text(), key.id, "not in bob's usage")
  t.equal(
    (await bob.post(`/portal/keys/${key.id}/rotate`, { _csrf: bob.csrf, grace_preset: '0' })).status,
    404,
    'bob cannot rotate it',
  )
  t.equal(
    (await bob.post(`/portal/keys/${key.id}/revoke`, { _csrf: bob.csrf, confirm: 'yes' })).status,
    404,
    'nor revoke it',
  )
  const still = (await keysOf(await ownerIdOf('alice'))).find((k) => k.id === key.id)
  t.equal(still?.status, 'active', "alice's key is untouched")
  // The admin pages do not exist for a user without the admin role.
  t.equal((await bob.get('/portal/admin/keys')).status, 404)
  t.equal(
    (
      await bob.post('/portal/admin/users', {
        _csrf: bob.csrf,
        username: 'mallory',
        password: 'mallory-password',
        admin: 'yes',
      })
    ).status,
    404,
  )
  // And an API key works only as itself: alice's secret is not bob's.
  t.equal((await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key.secret}` } })).status, 200)
})

async function ownerIdOf(username: string): Promise<string> {
  const res = await fetch(`${gw.url}/admin/users/${username}`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  return ((await res.json()) as { id: string }).id
}

t.test('forged cross-site form posts are refused and change nothing', async (t) => {
  const alice = await signInByFetch(gw.url, 'alice', 'alice-password')
  const bob = await signInByFetch(gw.url, 'bob', 'bob-password')
  const owner = await ownerIdOf('alice')
  const before = (await keysOf(owner)).length
  const attempts: Array<[string, Record<string, string>, Record<string, string>]> = [
    ['no CSRF token', { name: 'forged' }, {}],
    ['a wrong CSRF token', { _csrf: 'x'.repeat(43), name: 'forged' }, {}],
    ["another session's CSRF token", { _csrf: bob.csrf, name: 'forged' }, {}],
    ['a foreign Origin', { _csrf: alice.csrf, name: 'forged' }, { origin: 'https://evil.example' }],
    ['Sec-Fetch-Site: cross-site', { _csrf: alice.csrf, name: 'forged' }, { 'sec-fetch-site': 'cross-site' }],
  ]
  for (const [what, fields, headers] of attempts) {
    const res = await alice.post('/portal/keys', fields, headers)
    t.equal(res.status, 403, `${what}: 403`)
    t.match(await res.text(), /did not come from the portal/)
  }
  t.equal((await keysOf(owner)).length, before, 'no key was made')
  const key = await createKey(alice, 'target')
  t.equal((await alice.post(`/portal/keys/${key.id}/revoke`, { confirm: 'yes' })).status, 403, 'revoke without a token')
  t.equal(
    (
      await alice.post(
        `/portal/keys/${key.id}/revoke`,
        { _csrf: alice.csrf, confirm: 'yes' },
        { origin: 'http://evil.example' },
      )
    ).status,
    403,
    'revoke from another origin',
  )
  t.equal((await keysOf(owner)).find((k) => k.id === key.id)?.status, 'active', 'still active')
  t.equal((await alice.post('/portal/sign-out', {})).status, 403, 'sign-out without a token')
  t.equal((await alice.get('/portal/keys')).status, 200, 'still signed in')
  // A cross-site sign-in (login CSRF) is refused by its origin.
  const login = await postSignIn(gw.url, 'alice', 'alice-password', { origin: 'https://evil.example' })
  t.equal(login.status, 403)
  t.equal(login.headers.get('set-cookie'), null)
  // The same-origin, tokened post works (the refusals above were not for another reason).
  t.equal(
    (
      await alice.post(
        '/portal/keys',
        { _csrf: alice.csrf, name: 'real' },
        { origin: gw.url, 'sec-fetch-site': 'same-origin' },
      )
    ).status,
    303,
  )
})

t.test('failed sign-ins are throttled like failed logins, with the same counter', async (t) => {
  await createUser(gw, 'carol', 'carol-password')
  const attempt = (password: string) => postSignIn(gw.url, 'carol', password)
  for (let i = 0; i < 3; i++) t.equal((await attempt('wrong-password')).status, 401, `failure ${i + 1}`)
  const blocked = await attempt('carol-password')
  t.equal(blocked.status, 429, 'blocked, even with the right password')
  t.ok(Number(blocked.headers.get('retry-after')) > 0, 'retry-after')
  t.match(await blocked.text(), /Too many failed login attempts/)
  // The RAG login counts the same failures: it is blocked too.
  const rag = await fetch(`${gw.url}/api/v1/auth/user`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'carol', password: 'carol-password' }),
  })
  t.equal(rag.status, 429)
})

t.test(
  'every form that makes or changes something answers 303 (post/redirect/get): a reload re-sends nothing',
  async (t) => {
    await createUser(gw, 'root', 'root-password', ['admin'])
    const alice = await signInByFetch(gw.url, 'alice', 'alice-password')
    const root = await signInByFetch(gw.url, 'root', 'root-password')
    const made = await alice.post('/portal/keys', { _csrf: alice.csrf, name: 'prg' })
    t.equal(made.status, 303, 'create key')
    const id = /^\/portal\/keys\/(key_[0-9a-f]{24})\/secret$/.exec(made.headers.get('location') ?? '')?.[1] ?? ''
    t.ok(id, "on to the key's secret page, the secret not in the URL")
    t.equal((await alice.get(`/portal/keys/${id}/secret`)).status, 200)
    const forms: Array<[string, FetchSession, string, Record<string, string>, RegExp]> = [
      ['rotate', alice, `/portal/keys/${id}/rotate`, { grace_preset: '0' }, new RegExp(`^/portal/keys/${id}/secret$`)],
      ['revoke', alice, `/portal/keys/${id}/revoke`, { confirm: 'yes' }, new RegExp(`^/portal/keys/${id}$`)],
      [
        'admin: set a tier',
        root,
        `/portal/admin/keys/${(await createKeyByFetch(alice, 'tiered')).id}/tier`,
        { tier: 'Basic' },
        /^\/portal\/admin\/keys$/,
      ],
      [
        'admin: create a user',
        root,
        '/portal/admin/users',
        { username: 'prg-user', password: 'prg-user-password' },
        /^\/portal\/admin\/users\?created=prg-user$/,
      ],
      ['admin: disable a user', root, '/portal/admin/users/prg-user/disable', {}, /^\/portal\/admin\/users$/],
      ['admin: enable a user', root, '/portal/admin/users/prg-user/enable', {}, /^\/portal\/admin\/users$/],
      ['sign out', root, '/portal/sign-out', {}, /^\/portal\/sign-in\?signed-out$/],
    ]
    for (const [what, who, path, fields, location] of forms) {
      const res = await who.post(path, { _csrf: who.csrf, ...fields })
      t.equal(res.status, 303, `${what}: 303`)
      t.match(res.headers.get('location'), location, `${what}: on to a page a reload only reads`)
      await res.arrayBuffer()
    }
    const signIn = await postSignIn(gw.url, 'alice', 'alice-password')
    t.equal(signIn.status, 303, 'sign in: 303')
  },
)

t.test('a made secret is shown once, to the session that made it, and to no one else', async (t) => {
  const alice = await signInByFetch(gw.url, 'alice', 'alice-password')
  const aliceElsewhere = await signInByFetch(gw.url, 'alice', 'alice-password')
  await createUser(gw, 'root2', 'root2-password', ['admin'])
  const admin = await signInByFetch(gw.url, 'root2', 'root2-password')
  const res = await alice.post('/portal/keys', { _csrf: alice.csrf, name: 'once' })
  const location = res.headers.get('location') ?? ''
  // Others first: another session of the same user, an admin (who may see the key), bob (who may not).
  const other = await aliceElsewhere.get(location)
  t.equal(other.status, 200)
  const otherPage = await other.text()
  t.match(otherPage, /was shown once and is not kept/, 'another session of the same user: not its secret')
  t.notMatch(otherPage, /id="secret"/)
  t.notMatch(await (await admin.get(location)).text(), /id="secret"/, "an admin's session: nothing either")
  const bob = await signInByFetch(gw.url, 'bob', 'bob-password')
  t.equal((await bob.get(location)).status, 404, 'another user: not found')
  // The session that made it still gets it, once.
  const first = await alice.get(location)
  const page = await first.text()
  t.equal(first.status, 200)
  t.equal(first.headers.get('cache-control'), 'no-store', 'never cached')
  const secret = secretOf(page)
  t.match(secret, /^tg1_/, "the maker's session gets the secret")
  const again = await (await alice.get(location)).text()
  t.notMatch(again, secret, 'once: the second read has it no more')
  t.match(again, /rotate the key/, 'and says how to get a new one')
  t.equal(
    (await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${secret}` } })).status,
    200,
    'the secret shown works',
  )
})

t.test('sign-out ends the session; so does disabling the user', async (t) => {
  const alice = await signInByFetch(gw.url, 'alice', 'alice-password')
  const out = await alice.post('/portal/sign-out', { _csrf: alice.csrf })
  t.equal(out.status, 303)
  t.match(out.headers.get('set-cookie'), /Max-Age=0/)
  const after = await alice.get('/portal/keys')
  t.equal(after.status, 303, 'the old cookie is no longer a session')
  t.equal(after.headers.get('location'), '/portal/sign-in')

  await createUser(gw, 'dave', 'dave-password')
  const dave = await signInByFetch(gw.url, 'dave', 'dave-password')
  await fetch(`${gw.url}/admin/users/dave`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ disabled: true }),
  })
  t.equal((await dave.get('/portal/keys')).status, 303, 'a disabled user is signed out')
})

t.test('on Redis: sessions in the store, idle and absolute expiry, Secure behind a TLS proxy', async (t) => {
  const { namespace: prefix, admin: redis } = testNamespace(t, 'portal', 'tgtest-portal')
  const rgw = await startTollgate({
    env: { TOLLGATE_KEY_SECRET: randomBytes(24).toString('hex') },
    config: (doc) => {
      doc.store = { ...(doc.store as object), redisUrl: REDIS_URL, keyPrefix: prefix }
      doc.server = { ...(doc.server as object), trustProxyHops: 1 }
      doc.portal = { sessionIdleSeconds: 2, sessionAbsoluteSeconds: 5 }
    },
  })
  t.teardown(() => rgw.stop())
  await createUser(rgw, 'erin', 'erin-password')
  const tls = { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.9' }
  const signIn = await postSignIn(rgw.url, 'erin', 'erin-password', tls)
  t.equal(signIn.status, 303)
  t.match(
    signIn.headers.get('set-cookie'),
    /; Max-Age=5; HttpOnly; SameSite=Strict; Secure$/,
    'Secure when the proxy says https',
  )
  const sessionKeys = await redis.keys(`${prefix}{o:usr_*}:portal:session:*`)
  t.equal(sessionKeys.length, 1, "the session is in Redis, on its user's slot")
  t.same(await redis.keys(`${prefix}{tg}:portal:*`), [], 'nothing of it in {tg}')
  t.notMatch(
    sessionKeys[0] ?? '',
    (signIn.headers.get('set-cookie') ?? '').split(';')[0]?.split('=')[1] ?? '',
    'under a hash, not the cookie value',
  )

  const erin = await signInByFetch(rgw.url, 'erin', 'erin-password')
  const { id: keyId } = await createKeyByFetch(erin, 'on-redis')
  t.equal((await erin.get(`/portal/keys/${keyId}`)).status, 200, 'a key made on Redis')
  const made = await erin.post('/portal/keys', { _csrf: erin.csrf, name: 'used' })
  const location = made.headers.get('location') ?? ''
  const [handoffKey] = await redis.keys(`${prefix}{o:usr_*}:portal:handoff:*`)
  const sealed = await redis.get(handoffKey ?? '')
  const secret = secretOf(await (await erin.get(location)).text())
  t.ok(
    sealed !== null && !sealed.includes(secret) && !sealed.includes(secret.slice(4, 20)),
    'the hand-off in Redis is sealed: no secret in it',
  )
  t.equal(await redis.pttl(handoffKey ?? ''), -2, 'and gone once read')
  t.notMatch(await (await erin.get(location)).text(), secret, 'its secret page, opened again, no longer has it')
  t.same(await redis.keys(`${prefix}{o:usr_*}:portal:handoff:*`), [], 'no hand-off left in Redis once taken')
  const call = await chatWith(rgw.url, secret, 'gpt-oss-120b', 5)
  t.equal(call.status, 200)
  await call.text()
  t.match(await (await erin.get('/portal/usage')).text(), /data-total="requests">1</, 'usage read from Redis')
  t.match(await (await erin.get('/portal/usage.csv')).text(), /,used,gpt-oss-120b,1,/, 'and its CSV')
  // Idle: 2 s without a request ends it.
  await new Promise((done) => setTimeout(done, 2600))
  t.equal((await erin.get('/portal/keys')).status, 303, 'idle session ended')

  // Absolute: used every 800 ms it still ends 5 s after sign-in.
  const busy = await signInByFetch(rgw.url, 'erin', 'erin-password')
  const started = Date.now()
  let endedAt = 0
  while (Date.now() - started < 9000) {
    await new Promise((done) => setTimeout(done, 800))
    if ((await busy.get('/portal/keys')).status === 303) {
      endedAt = Date.now() - started
      break
    }
  }
  t.ok(endedAt >= 4000 && endedAt < 9000, `ended at its absolute end while in use (${endedAt} ms after sign-in)`)
})

// Two gateway processes on one Redis: a key revoked, narrowed or rotated through one is
// treated the same way by the other within a second, although the other had the key in
// its cache. Plus the admin credential rules when Redis is configured.
//
// Redis at REDIS_URL (default 127.0.0.1:6379) is shared: the gateways use a random key
// prefix, deleted at the end. Without Redis these tests fail; they never skip.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { REDIS_URL, redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { adminCall, isError, within } from './helpers.ts'

const ns = await redisNamespace(t)
const KEY_SECRET = `cluster-secret-${randomBytes(16).toString('hex')}`
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`

const redisConfig = (doc: Record<string, unknown>): void => {
  ;(doc.store as Record<string, unknown>).keyPrefix = ns.prefix
}

async function gateway(env: Record<string, string> = {}): Promise<RunningTollgate> {
  const gw = await startTollgate({
    config: redisConfig,
    adminToken: ADMIN_TOKEN,
    env: { REDIS_URL, TOLLGATE_KEY_SECRET: KEY_SECRET, ...env },
  })
  t.teardown(async () => {
    await gw.stop()
  })
  return gw
}

const chat = (gw: RunningTollgate, key: string, model = 'gpt-4o'): Promise<RawResponse> =>
  request(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  })
const status = async (gw: RunningTollgate, key: string, model?: string): Promise<number> =>
  (await chat(gw, key, model)).status

if (!ns.up) {
  t.fail(redisMissing())
} else {
  const a = await gateway()
  const b = await gateway()
  const adminA = adminCall(a.url, ADMIN_TOKEN)
  const adminB = adminCall(b.url, ADMIN_TOKEN)
  const create = async (body: Record<string, unknown> = {}): Promise<{ id: string; key: string }> => {
    const res = await adminA('POST', '/admin/keys', { tier: 'Standard4000', ...body })
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`)
    return res.json()
  }

  t.test('both instances share the keys: created on one, listed and usable on the other', async (t) => {
    const k = await create({ name: 'shared' })
    t.equal(await status(b, k.key), 200, 'usable on b')
    t.equal((await adminB('GET', `/admin/keys/${k.id}`)).json<{ name: string }>().name, 'shared', 'readable on b')
    t.ok((await ns.keys()).length > 0, 'state lives under the test prefix')
  })

  t.test('revoked through one instance: refused by the other within a second', async (t) => {
    const k = await create()
    // b has the key in its cache: several calls, the last ones served from memory.
    for (let i = 0; i < 3; i++) t.equal(await status(b, k.key), 200, `b accepts the key (${i})`)
    t.equal((await adminA('DELETE', `/admin/keys/${k.id}`)).status, 200)
    t.equal(await status(a, k.key), 401, 'a refuses at once')
    let last: RawResponse | undefined
    t.ok(await within(1000, async () => (last = await chat(b, k.key)).status === 401), 'b refuses within a second')
    if (last) isError(t, last, 401, 'invalid_api_key', 'b: revoked')

    // And the other way round.
    const k2 = await create()
    t.equal(await status(a, k2.key), 200)
    t.equal((await adminB('DELETE', `/admin/keys/${k2.id}`)).status, 200)
    t.ok(
      await within(1000, async () => (await status(a, k2.key)) === 401),
      'a refuses a key revoked through b within a second',
    )
  })

  t.test('narrowed through one instance: the other enforces the new scope within a second', async (t) => {
    const k = await create()
    t.equal(await status(b, k.key, 'claude-sonnet-4'), 200)
    t.equal((await adminA('PATCH', `/admin/keys/${k.id}`, { models: ['gpt-4o'] })).status, 200)
    t.ok(
      await within(1000, async () => (await status(b, k.key, 'claude-sonnet-4')) === 403),
      'b refuses the removed model within a second',
    )
    t.equal(await status(b, k.key, 'gpt-4o'), 200, 'the remaining model still works on b')
  })

  t.test('rotated: the old secret works on both during the grace and on neither after it', async (t) => {
    const k = await create()
    t.equal(await status(a, k.key), 200)
    t.equal(await status(b, k.key), 200)
    const res = await adminB('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: 2 })
    t.equal(res.status, 200)
    const rotated = res.json<{ key: string; rotation_grace_until: string }>()
    t.equal(await status(a, rotated.key), 200, 'new secret on a')
    t.equal(await status(b, rotated.key), 200, 'new secret on b')
    t.equal(await status(a, k.key), 200, 'old secret on a during the grace')
    t.equal(await status(b, k.key), 200, 'old secret on b during the grace')
    t.ok(Date.now() < Date.parse(rotated.rotation_grace_until), 'those checks ran inside the grace')
    t.ok(
      await within(4000, async () => (await status(a, k.key)) === 401 && (await status(b, k.key)) === 401),
      'old secret refused on both after the grace',
    )
    t.equal(await status(a, rotated.key), 200)
    t.equal(await status(b, rotated.key), 200)

    // Without grace: the old secret is refused by the other instance within a second.
    const again = (await adminA('POST', `/admin/keys/${k.id}/rotate`, {})).json<{ key: string }>()
    t.ok(
      await within(1000, async () => (await status(b, rotated.key)) === 401),
      'b refuses the replaced secret within a second',
    )
    t.equal(await status(b, again.key), 200)
  })

  t.test('a mistyped key is refused by both instances', async (t) => {
    const k = await create()
    const typo = k.key.slice(0, 10) + (k.key[10] === 'a' ? 'b' : 'a') + k.key.slice(11)
    for (const gw of [a, b]) isError(t, await chat(gw, typo), 401, 'invalid_api_key', 'mistyped')
  })

  t.test('with Redis and no TOLLGATE_ADMIN_TOKEN the admin API is disabled, with a clear message', async (t) => {
    const c = await startTollgate({
      config: redisConfig,
      env: { REDIS_URL, TOLLGATE_KEY_SECRET: KEY_SECRET, TOLLGATE_ADMIN_TOKEN: '' },
    })
    t.teardown(async () => {
      await c.stop()
    })
    const res = await request(`${c.url}/admin/keys`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    isError(t, res, 403, 'admin_disabled', 'admin API')
    t.match(res.json().error.message, /TOLLGATE_ADMIN_TOKEN/)
    t.ok(
      c.logs().some((l) => typeof l.msg === 'string' && /admin API is disabled/.test(l.msg)),
      'the start log says so',
    )
    t.notMatch(c.output(), /Admin token for this run/, 'no token is generated with Redis')
    const k = await create()
    t.equal(await status(c, k.key), 200, 'inference still works on that instance')
  })

  t.test('with Redis and no TOLLGATE_KEY_SECRET the gateway refuses to start', async (t) => {
    await t.rejects(
      startTollgate({ config: redisConfig, env: { REDIS_URL, TOLLGATE_KEY_SECRET: '' } }),
      /TOLLGATE_KEY_SECRET/,
    )
  })
}

t.test('embedded, no TOLLGATE_ADMIN_TOKEN: one is generated, printed once, and works', async (t) => {
  const gw = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  t.teardown(async () => {
    await gw.stop()
  })
  const printed = /an admin token was made and kept in \S+:\s+(tgadm_\S+)/.exec(gw.output())?.[1]
  t.ok(printed, 'printed at start')
  const token = printed ?? ''
  t.equal(gw.output().split(token).length - 1, 1, 'printed exactly once')
  t.notOk(
    gw.logs().some((l) => JSON.stringify(l).includes(token)),
    'not in any JSON log line',
  )
  const res = await request(`${gw.url}/admin/keys`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(res.status, 200, 'the printed token is the admin credential')
  isError(
    t,
    await request(`${gw.url}/admin/keys`, { headers: { authorization: `Bearer ${gw.adminToken}` } }),
    401,
    'invalid_admin_token',
    'any other token is not',
  )
})

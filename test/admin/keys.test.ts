// /admin/keys on a running gateway: what works, what is refused, and what an attacker
// tries. Secrets and hashes must appear in no reply but create's and rotate's, and in no
// log line (the whole captured output is searched).
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createKeyHasher } from '../../src/keys/format.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { adminCall, isError, refusesWithoutAdmin } from './helpers.ts'

const KEY_SECRET = `test-key-secret-${randomBytes(16).toString('hex')}`
const hash = createKeyHasher(KEY_SECRET)
const CHAT = 'gpt-4o'
const OTHER_CHAT = 'claude-sonnet-4'

let gw: RunningTollgate
let admin: ReturnType<typeof adminCall>
/** Every secret and hash the tests see, to search replies and logs for. */
const secrets: string[] = []
const replies: string[] = []

t.before(async () => {
  gw = await startTollgate({ env: { TOLLGATE_KEY_SECRET: KEY_SECRET } })
  const call = adminCall(gw.url, gw.adminToken)
  admin = async (...args) => {
    const res = await call(...args)
    replies.push(res.text)
    return res
  }
})
t.teardown(async () => {
  await gw.stop()
})

type KeyReply = Record<string, unknown> & { id: string; key: string; status: string }

async function create(body: Record<string, unknown> = {}): Promise<KeyReply> {
  const res = await admin('POST', '/admin/keys', { tier: 'Standard4000', ...body })
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`)
  const created = res.json<KeyReply>()
  secrets.push(created.key, hash(created.key))
  return created
}

const chat = (key: string, model = CHAT): Promise<RawResponse> =>
  request(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  })
const models = (key: string): Promise<RawResponse> =>
  request(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}` } })

t.test('create: 201 with the secret once, the record, and the key works at once', async (t) => {
  const res = await admin('POST', '/admin/keys', {
    name: 'ci pipeline',
    owner: 'team-a',
    tier: 'Standard4000',
    models: [CHAT],
    endpoints: ['chat.completions', 'models.list'],
    expires_at: '2999-01-01T00:00:00Z',
    limits: { '*': { rpm: 1000 } },
  })
  t.equal(res.status, 201)
  t.equal(res.headers.get('cache-control'), 'no-store', 'no cache keeps a reply with a secret')
  const body = res.json<KeyReply>()
  secrets.push(body.key, hash(body.key))
  t.match(body, {
    id: /^key_[0-9a-f]{24}$/,
    object: 'api_key',
    key: /^tg1_[0-9A-Za-z]{49}$/,
    name: 'ci pipeline',
    owner: 'team-a',
    tier: 'Standard4000',
    models: [CHAT],
    endpoints: ['chat.completions', 'models.list'],
    status: 'active',
    expires_at: '2999-01-01T00:00:00.000Z',
    limits: { '*': { rpm: 1000 } },
    revoked_at: null,
    rotation_grace_until: null,
  })
  t.equal(body.prefix, body.key.slice(0, 12), 'the prefix is the start of the secret')
  t.match(body.created_at, /^\d{4}-\d\d-\d\dT/)
  t.notOk('hash' in body, 'no hash in the reply')
  t.equal((await chat(body.key)).status, 200, 'the new key works')

  const bare = await create({ tier: undefined })
  t.equal(bare.tier, 'Basic', 'a key without a tier is on the default tier')
  t.same([bare.models, bare.endpoints, bare.owner, bare.expires_at], [null, null, null, null])
})

t.test('create refuses bad bodies with 400 (415, 413) naming the field, and stores nothing', async (t) => {
  const before = (await admin('GET', '/admin/keys')).json<{ data: unknown[] }>().data.length
  const cases: Array<[string, unknown, string]> = [
    ['unknown tier', { tier: 'Platinum' }, 'tier'],
    ['expiry in the past', { expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
    ['expiry not a time', { expires_at: 'next tuesday' }, 'expires_at'],
    ['expiry without offset', { expires_at: '2999-01-01T00:00:00' }, 'expires_at'],
    ['unknown model', { models: ['gpt-99'] }, 'models.0'],
    ['unknown endpoint', { endpoints: ['admin'] }, 'endpoints.0'],
    ['models not a list', { models: CHAT }, 'models'],
    ['negative limit', { limits: { '*': { rpm: -1 } } }, 'limits.*.rpm'],
    ['unknown limit dimension', { limits: { '*': { rph: 5 } } }, 'limits.*'],
    ['empty name', { name: '  ' }, 'name'],
  ]
  for (const [what, body, param] of cases) {
    const res = await admin('POST', '/admin/keys', body)
    isError(t, res, 400, 'invalid_body', what)
    t.equal(res.json().error.param, param, `${what}: param`)
  }
  const unknown = await admin('POST', '/admin/keys', { name: 'x', is_admin: true })
  isError(t, unknown, 400, 'invalid_body', 'unknown field')
  t.match(unknown.json().error.message, /Unknown field\(s\): is_admin/)
  const hostile = await admin('POST', '/admin/keys', { '<script>alert(1)</script>': 1 })
  isError(t, hostile, 400, 'invalid_body', 'hostile field name')
  t.notMatch(hostile.text, '<script>', 'not reflected')
  isError(t, await admin('POST', '/admin/keys', '{"name": '), 400, 'invalid_json', 'broken JSON')
  isError(t, await admin('POST', '/admin/keys', '[]'), 400, 'invalid_body', 'JSON array')
  isError(
    t,
    await admin('POST', '/admin/keys', '{}', { 'content-type': 'text/plain' }),
    415,
    'unsupported_media_type',
    'not JSON',
  )
  isError(
    t,
    await admin('POST', '/admin/keys', JSON.stringify({ name: 'x'.repeat(5 * 1024 * 1024) })),
    413,
    'request_too_large',
    'huge body',
  )
  t.equal((await admin('GET', '/admin/keys')).json<{ data: unknown[] }>().data.length, before, 'nothing was created')
})

t.test('list: every key, filtered by owner, tier and status, never a secret', async (t) => {
  const owner = `owner-${randomBytes(4).toString('hex')}`
  const a = await create({ owner, tier: 'Standard4000' })
  const b = await create({ owner, tier: 'Basic' })
  const c = await create({ owner, tier: 'Standard4000' })
  await admin('DELETE', `/admin/keys/${c.id}`)
  const ids = async (query: string): Promise<string[]> => {
    const res = await admin('GET', `/admin/keys${query}`)
    t.equal(res.status, 200, `list ${query}`)
    return res.json<{ data: Array<{ id: string }> }>().data.map((k) => k.id)
  }
  t.same(await ids(`?owner=${owner}`), [a.id, b.id, c.id], 'oldest first')
  t.same(await ids(`?owner=${owner}&tier=Basic`), [b.id])
  t.same(await ids(`?owner=${owner}&status=active`), [a.id, b.id])
  t.same(await ids(`?owner=${owner}&status=revoked`), [c.id])
  t.same(await ids(`?owner=${owner}&status=expired`), [])
  t.same(await ids('?owner=nobody-has-this'), [])
  const all = await admin('GET', '/admin/keys')
  t.equal(all.json<{ object: string }>().object, 'list')
  for (const field of ['"key"', '"hash"', 'previousHash', 'previous_hash'])
    t.notMatch(all.text, field, `no ${field} field in a list`)
  isError(t, await admin('GET', '/admin/keys?status=deleted'), 400, 'invalid_body', 'unknown status')
  isError(t, await admin('GET', '/admin/keys?ownr=x'), 400, 'invalid_body', 'misspelt filter')
  isError(t, await admin('GET', '/admin/keys?owner=a&owner=b'), 400, 'invalid_body', 'repeated filter')
})

t.test('read: one key; unknown or malformed ids are 404', async (t) => {
  const k = await create({ name: 'read me' })
  const res = await admin('GET', `/admin/keys/${k.id}`)
  t.equal(res.status, 200)
  t.match(res.json(), { id: k.id, name: 'read me', prefix: k.prefix, status: 'active' })
  t.notMatch(res.text, k.key)
  for (const id of ['key_000000000000000000000000', 'key_nope', '..%2F..%2Fetc', 'x'.repeat(200)]) {
    isError(t, await admin('GET', `/admin/keys/${id}`), 404, 'not_found', `GET ${id.slice(0, 20)}`)
    isError(t, await admin('PATCH', `/admin/keys/${id}`, { name: 'x' }), 404, 'not_found', `PATCH ${id.slice(0, 20)}`)
    isError(t, await admin('POST', `/admin/keys/${id}/rotate`, {}), 404, 'not_found', `rotate ${id.slice(0, 20)}`)
    isError(t, await admin('DELETE', `/admin/keys/${id}`), 404, 'not_found', `DELETE ${id.slice(0, 20)}`)
    isError(t, await admin('GET', `/admin/keys/${id}/usage`), 404, 'not_found', `usage ${id.slice(0, 20)}`)
  }
})

t.test('update: changes apply to the next request; bad changes are 400', async (t) => {
  const k = await create({ models: [CHAT] })
  t.equal((await chat(k.key, OTHER_CHAT)).status, 403, 'outside its models at first')
  const res = await admin('PATCH', `/admin/keys/${k.id}`, {
    models: [CHAT, OTHER_CHAT],
    name: 'widened',
    expires_at: '2998-01-01T00:00:00Z',
  })
  t.equal(res.status, 200)
  t.match(res.json(), {
    models: [CHAT, OTHER_CHAT],
    name: 'widened',
    expires_at: '2998-01-01T00:00:00.000Z',
    prefix: k.prefix,
  })
  t.equal((await chat(k.key, OTHER_CHAT)).status, 200, 'the widened scope applies at once')
  const narrowed = await admin('PATCH', `/admin/keys/${k.id}`, { endpoints: ['embeddings'] })
  t.equal(narrowed.status, 200)
  isError(t, await chat(k.key), 403, 'endpoint_not_allowed', 'the narrowed scope applies at once')
  const reset = await admin('PATCH', `/admin/keys/${k.id}`, {
    endpoints: null,
    models: null,
    expires_at: null,
    tier: null,
  })
  t.match(reset.json(), { endpoints: null, models: null, expires_at: null, tier: 'Basic' })
  t.equal((await chat(k.key)).status, 200)

  isError(t, await admin('PATCH', `/admin/keys/${k.id}`, { tier: 'Gold' }), 400, 'invalid_body', 'unknown tier')
  isError(
    t,
    await admin('PATCH', `/admin/keys/${k.id}`, { expires_at: '2000-01-01T00:00:00Z' }),
    400,
    'invalid_body',
    'past expiry',
  )
  isError(
    t,
    await admin('PATCH', `/admin/keys/${k.id}`, { owner: 'someone-else' }),
    400,
    'invalid_body',
    'owner cannot change',
  )
  isError(
    t,
    await admin('PATCH', `/admin/keys/${k.id}`, { status: 'active' }),
    400,
    'invalid_body',
    'status is not a field',
  )
  isError(t, await admin('PATCH', `/admin/keys/${k.id}`, { hash: 'abc' }), 400, 'invalid_body', 'hash is not a field')
})

t.test('rotate: a new secret; the old one during the grace only; never both secrets in a reply', async (t) => {
  const k = await create()
  const res = await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: 3600 })
  t.equal(res.status, 200)
  t.equal(res.headers.get('cache-control'), 'no-store')
  const rotated = res.json<KeyReply & { rotation_grace_until: string }>()
  secrets.push(rotated.key, hash(rotated.key))
  t.not(rotated.key, k.key)
  t.equal(rotated.id, k.id, 'same key id')
  t.equal(rotated.prefix, rotated.key.slice(0, 12))
  t.ok(Date.parse(rotated.rotation_grace_until) > Date.now() + 3500_000, 'grace about an hour')
  t.notMatch(res.text, k.key, 'the old secret is not in the reply')
  t.equal((await chat(rotated.key)).status, 200, 'new secret works')
  t.equal((await chat(k.key)).status, 200, 'old secret works during the grace')

  // No body at all: grace 0, the previous secret stops at once.
  const again = await request(`${gw.url}/admin/keys/${k.id}/rotate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  t.equal(again.status, 200)
  const third = again.json<KeyReply>()
  secrets.push(third.key, hash(third.key))
  t.equal(third.rotation_grace_until, null)
  isError(t, await chat(rotated.key), 401, 'invalid_api_key', 'rotated without grace: refused at once')
  isError(t, await chat(k.key), 401, 'invalid_api_key', 'the first secret is long gone')
  t.equal((await chat(third.key)).status, 200)

  isError(
    t,
    await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: -1 }),
    400,
    'invalid_body',
    'negative grace',
  )
  isError(
    t,
    await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: 10 * 365 * 86400 }),
    400,
    'invalid_body',
    'grace over the maximum',
  )
  isError(
    t,
    await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: '60' }),
    400,
    'invalid_body',
    'grace as a string',
  )
  isError(t, await admin('POST', `/admin/keys/${k.id}/rotate`, { grace: 60 }), 400, 'invalid_body', 'unknown field')
  t.equal((await chat(third.key)).status, 200, 'refused rotations changed nothing')
})

t.test("revoked during a rotation's grace: the old secret is refused as the current one is", async (t) => {
  const k = await create()
  const graced = (await admin('POST', `/admin/keys/${k.id}/rotate`, { grace_seconds: 3600 })).json<KeyReply>()
  secrets.push(graced.key, hash(graced.key))
  t.equal((await chat(k.key)).status, 200, 'the old secret works during the grace')
  t.equal((await admin('DELETE', `/admin/keys/${k.id}`)).status, 200)
  const current = (await chat(graced.key)).json<{ error: { message: string; code: string } }>()
  const previous = (await chat(k.key)).json<{ error: { message: string; code: string } }>()
  t.equal(current.error.message, 'This API key has been revoked.')
  t.same(previous.error, current.error, 'the same error for both secrets')
})

t.test('revoke: refused at once, idempotent, final', async (t) => {
  const k = await create()
  t.equal((await chat(k.key)).status, 200)
  const res = await admin('DELETE', `/admin/keys/${k.id}`)
  t.equal(res.status, 200)
  t.match(res.json(), { id: k.id, status: 'revoked', revoked_at: /^\d{4}-/ })
  const refused = await chat(k.key)
  isError(t, refused, 401, 'invalid_api_key', 'revoked key')
  t.match(refused.json().error.message, /revoked/)
  isError(t, await models(k.key), 401, 'invalid_api_key', 'revoked key on /v2/models')
  const again = await admin('DELETE', `/admin/keys/${k.id}`)
  t.equal(again.status, 200)
  t.equal(
    again.json<{ revoked_at: string }>().revoked_at,
    res.json<{ revoked_at: string }>().revoked_at,
    'revoking twice keeps the first time',
  )
  isError(
    t,
    await admin('POST', `/admin/keys/${k.id}/rotate`, {}),
    400,
    'invalid_body',
    'a revoked key cannot be rotated back to life',
  )
  isError(
    t,
    await admin('PATCH', `/admin/keys/${k.id}`, { name: 'x' }),
    400,
    'invalid_body',
    'a revoked key cannot be changed',
  )
  isError(t, await chat(k.key), 401, 'invalid_api_key', 'still revoked')
})

t.test('tiers: the plans in force', async (t) => {
  const res = await admin('GET', '/admin/tiers')
  t.equal(res.status, 200)
  const body = res.json<{
    default_tier: string
    data: Array<{ name: string; is_default: boolean; models: Record<string, { input_price?: number }> }>
  }>()
  t.equal(body.default_tier, 'Basic')
  t.same(body.data.map((d) => d.name).sort(), ['Basic', 'Standard1000', 'Standard2000', 'Standard3000', 'Standard4000'])
  t.equal(body.data.find((d) => d.is_default)?.name, 'Basic')
  t.equal(body.data.find((d) => d.name === 'Standard4000')?.models[CHAT]?.input_price, 3.25)
  const caps = (name: string): unknown =>
    (body.data.find((d) => d.name === name) as { storage_caps?: unknown } | undefined)?.storage_caps
  t.same(
    caps('Basic'),
    { queuedRequests: 1000, queuedBytes: 67_108_864, files: 1000, fileBytes: 1_073_741_824 },
    'the defaults',
  )
  t.same(
    caps('Standard4000'),
    { queuedRequests: 8000, queuedBytes: 536_870_912, files: 8000, fileBytes: 8_589_934_592 },
    "the tier's own",
  )
})

t.test('attacker: wrong or missing admin credentials are 401 on every route and change nothing', async (t) => {
  const k = await create({ name: 'target' })
  await refusesWithoutAdmin(t, gw.url, gw.adminToken, k.id, k.key)
  const after = (await admin('GET', `/admin/keys/${k.id}`)).json<KeyReply>()
  t.match(after, { status: 'active', name: 'target' }, 'the key is untouched')
  t.equal((await chat(k.key)).status, 200)
  isError(t, await chat(gw.adminToken), 401, 'invalid_api_key', 'the admin token is not an API key')
})

t.test('attacker: a mistyped key or one from another secret is refused, and never echoed', async (t) => {
  const k = await create()
  const last = k.key.at(-1) === 'A' ? 'B' : 'A'
  const typo = k.key.slice(0, -1) + last
  const res = await chat(typo)
  isError(t, res, 401, 'invalid_api_key', 'mistyped key')
  t.notMatch(res.text, typo.slice(4, 16))
  const foreign = await chat('tg1_' + 'x'.repeat(49))
  isError(t, foreign, 401, 'invalid_api_key', 'random well-shaped key')
})

t.test(
  'secrets and hashes are absent from every reply but their own create/rotate, and from every log line',
  async (t) => {
    // One more read of everything, so the final state of every key is among the replies.
    await admin('GET', '/admin/keys')
    t.ok(secrets.length >= 20, `searching for ${secrets.length} secrets and hashes`)
    for (const reply of replies) {
      // create and rotate replies carry their own new secret (and nothing else).
      const own = /"key":"(tg1_[0-9A-Za-z]+)"/.exec(reply)?.[1]
      for (const secret of secrets) {
        if (secret === own) continue
        if (reply.includes(secret)) t.fail(`a reply contains a secret or hash: ${reply.slice(0, 120)}`)
      }
    }
    const output = gw.output()
    t.ok(output.includes('admin: key created'), 'the audit lines are there')
    const leaked = secrets.filter((s) => output.includes(s) || output.includes(s.slice(4, 24)))
    t.same(leaked, [], 'no secret, hash or part of a secret in the logs')
    t.notMatch(output, gw.adminToken, 'nor the admin token')
    const lines = gw.logs().filter((l) => l.route === 'admin.keys.create')
    t.ok(
      lines.length > 0 && lines.every((l) => typeof l.keyId === 'string' || l.status !== 201),
      'request lines name the key id',
    )
  },
)

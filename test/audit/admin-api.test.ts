// The audit log of a running gateway, on each store, driven as an operator drives it: changes
// through the admin API and the `tollgate` CLI, then GET /admin/audit. Each change is exactly
// one record with its before and after; refused and failed calls leave none; no record, and
// no byte of the store, holds a key, the admin token or a password used.
import { createHash, randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { KEY_FIELDS, USER_FIELDS } from '../../src/audit/subjects.ts'
import { runTollgate } from '../helpers/cli.ts'
import { onSharedRedis, startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { testNamespace } from '../helpers/redis.ts'

interface Entry {
  object: string
  id: string
  created_at: string
  actor: { type: string; id: string; name?: string }
  via: string
  action: string
  object_type: string
  object_id: string
  before: Record<string, unknown> | null
  after: Record<string, unknown> | null
  address: string
  request_id: string
}
interface Page {
  object: string
  data: Entry[]
  first_id: string | null
  last_id: string | null
  has_more: boolean
}

/** The CLI's output; a failed run fails the test with its error. */
async function cli(args: string[], env: Record<string, string>): Promise<string> {
  const run = await runTollgate(args, env)
  if (run.code !== 0) throw new Error(`tollgate ${args.join(' ')} exited ${run.code}: ${run.stderr}`)
  return run.stdout
}

const space = testNamespace(t, 'audit-e2e', 'tollgate-audit-e2e')

for (const store of ['embedded', 'redis'] as const) {
  t.test(`${store}: the admin API and the CLI, recorded`, async (t) => {
    const { prefix } = space.fresh()
    const gw: RunningTollgate = await startTollgate(store === 'redis' ? onSharedRedis(prefix) : {})
    t.teardown(() => gw.stop())
    const auth = { authorization: `Bearer ${gw.adminToken}` }
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = auth) => {
      const res = await fetch(`${gw.url}${path}`, {
        method,
        headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      return { status: res.status, json: (await res.json()) as Record<string, unknown> }
    }
    const audit = async (query = ''): Promise<Page> => {
      const res = await call('GET', `/admin/audit${query}`)
      t.equal(res.status, 200, `GET /admin/audit${query}`)
      return res.json as unknown as Page
    }
    const secrets: string[] = [gw.adminToken]
    const fingerprint = `admin:${createHash('sha256').update(gw.adminToken).digest('hex').slice(0, 16)}`

    // The changes, each through the admin API.
    const made = await call('POST', '/admin/keys', { name: 'audit-a', models: ['gpt-oss-120b'] })
    t.equal(made.status, 201)
    const keyId = String(made.json.id)
    secrets.push(String(made.json.key))
    t.equal((await call('PATCH', `/admin/keys/${keyId}`, { name: 'audit-b' })).status, 200)
    const rotated = await call('POST', `/admin/keys/${keyId}/rotate`, { grace_seconds: 600 })
    t.equal(rotated.status, 200)
    secrets.push(String(rotated.json.key))
    t.equal((await call('DELETE', `/admin/keys/${keyId}`)).status, 200)
    const passwords = [`pw-${randomBytes(12).toString('hex')}`, `pw-${randomBytes(12).toString('hex')}`]
    secrets.push(...passwords)
    t.equal((await call('POST', '/admin/users', { username: 'audrey', password: passwords[0] })).status, 201)
    t.equal((await call('PATCH', '/admin/users/audrey', { password: passwords[1], roles: ['auditor'] })).status, 200)
    t.equal((await call('DELETE', '/admin/users/audrey')).status, 200)
    // What changes nothing leaves no record: a refused credential, an unknown key, a bad body, a read.
    t.equal((await call('POST', '/admin/keys', { name: 'x' }, { authorization: 'Bearer wrong' })).status, 401)
    t.equal((await call('PATCH', '/admin/keys/key_000000000000000000000000', { name: 'x' })).status, 404)
    t.equal((await call('POST', '/admin/users', { username: 'bad name!', password: 'short' })).status, 400)
    t.equal((await call('GET', `/admin/keys/${keyId}`)).status, 200)
    // And one through the CLI.
    const viaCli = JSON.parse(
      await cli(['keys', 'create', '--name', 'from-cli', '--json'], {
        TOLLGATE_URL: gw.url,
        TOLLGATE_ADMIN_TOKEN: gw.adminToken,
      }),
    ) as { id: string; key: string }
    secrets.push(viaCli.key)

    const page = await audit('?limit=100')
    t.same(
      page.data.map((e) => [e.action, e.object_type, e.object_id, e.via]),
      [
        ['key.create', 'key', viaCli.id, 'cli'],
        ['user.delete', 'user', 'audrey', 'api'],
        ['user.update', 'user', 'audrey', 'api'],
        ['user.create', 'user', 'audrey', 'api'],
        ['key.revoke', 'key', keyId, 'api'],
        ['key.rotate', 'key', keyId, 'api'],
        ['key.update', 'key', keyId, 'api'],
        ['key.create', 'key', keyId, 'api'],
      ],
      'exactly one record per change, newest first',
    )
    t.equal(page.has_more, false)
    t.equal(page.first_id, page.data[0]?.id)
    t.equal(page.last_id, page.data.at(-1)?.id)
    for (const e of page.data) {
      t.same(e.actor, { type: 'admin', id: fingerprint }, `${e.action}: the admin token, by its fingerprint`)
      t.equal(e.address, '127.0.0.1')
      t.match(e.request_id, /\S/)
      t.equal(e.object, 'audit_entry')
      const fields = e.object_type === 'key' ? KEY_FIELDS : USER_FIELDS
      for (const side of [e.before, e.after])
        if (side !== null)
          t.same(
            Object.keys(side).filter((f) => !(fields as readonly string[]).includes(f)),
            [],
            `${e.action}: allow-listed fields only`,
          )
    }
    const byAction = (action: string, id = keyId): Entry =>
      page.data.find((e) => e.action === action && e.object_id === id) as Entry
    const create = byAction('key.create')
    t.equal(create.before, null, 'a create has no before')
    t.match(create.after, { id: keyId, name: 'audit-a', status: 'active', models: ['gpt-oss-120b'] })
    t.match(byAction('key.update'), { before: { name: 'audit-a' }, after: { name: 'audit-b' } })
    const rotate = byAction('key.rotate')
    t.equal(rotate.before?.rotation_grace_until, null)
    t.match(rotate.after?.rotation_grace_until, /^\d{4}-/, 'the rotation shows as its grace')
    t.match(byAction('key.revoke'), { before: { status: 'active' }, after: { status: 'revoked' } })
    const userCreate = byAction('user.create', 'audrey')
    t.equal(userCreate.before, null)
    t.match(userCreate.after, { username: 'audrey', roles: [], disabled: false })
    const userUpdate = byAction('user.update', 'audrey')
    t.match(userUpdate, { before: { roles: [] }, after: { roles: ['auditor'] } })
    t.not(
      userUpdate.before?.sessions_valid_from,
      userUpdate.after?.sessions_valid_from,
      'a new password shows, as the sessions it ended',
    )
    t.match(byAction('user.delete', 'audrey'), { before: { username: 'audrey' }, after: null })

    // No secret anywhere: the whole reply, and every byte the store holds.
    const text = JSON.stringify(page)
    for (const s of secrets) t.notOk(text.includes(s), 'no key, token or password in the records')
    t.notOk(
      /"(key|prefix|hash|password|password_hash|passwordHash|key_hash)":/.test(text),
      'no secret-bearing field name either',
    )
    let stored: string
    if (store === 'embedded') {
      const files = readdirSync(gw.dataDir).filter((f) => f.startsWith('audit.db'))
      t.ok(files.includes('audit.db'), 'audit.db is a file of its own')
      stored = files.map((f) => readFileSync(join(gw.dataDir, f)).toString('latin1')).join('')
    } else {
      stored = JSON.stringify(await space.admin.xrange(`${prefix}{tg}:audit`, '-', '+'))
    }
    t.ok(stored.includes(keyId), 'the store holds the records (the check below looks in the right place)')
    for (const s of secrets) t.notOk(stored.includes(s), 'no secret in the stored bytes')

    // Filters and pages over HTTP.
    const ids = async (query: string): Promise<string[]> => (await audit(query)).data.map((e) => e.id)
    const all = page.data.map((e) => e.id)
    t.same(await ids(`?object_type=key&object_id=${keyId}`), all.slice(4), 'one key: its four changes')
    t.same(await ids('?action=key.revoke'), [all[4]])
    t.same(await ids(`?actor=${fingerprint}`), all, 'by actor')
    t.same(await ids('?actor=admin:0000000000000000'), [], 'another token: nothing')
    const userCreatedAt = userCreate.created_at
    t.same(await ids(`?since=${userCreatedAt}`), all.slice(0, 4), 'since (inclusive)')
    t.same(await ids(`?until=${userCreatedAt}&object_type=user`), [], 'until (exclusive)')
    const pages: string[] = []
    let after = ''
    for (let i = 0; i < 10; i++) {
      const p = await audit(`?limit=3${after}`)
      pages.push(...p.data.map((e) => e.id))
      t.equal(p.has_more, pages.length < all.length, `page ${i + 1}: has_more`)
      if (!p.has_more) break
      after = `&after=${p.last_id ?? ''}`
    }
    t.same(pages, all, 'pages of 3 walk the whole log once, in order')

    // Refusals in the contract's shape.
    for (const [query, param] of [
      ['?after=aud_nope', 'after'],
      ['?since=yesterday', 'since'],
      ['?limit=0', 'limit'],
    ] as const) {
      const res = await call('GET', `/admin/audit${query}`)
      t.equal(res.status, 400, query)
      t.match(res.json, { error: { param } })
    }
    t.equal((await call('GET', '/admin/audit?actr=x')).status, 400, 'a misspelt filter is refused, not ignored')
    t.equal((await call('GET', '/admin/audit', undefined, {})).status, 401, 'no token')
  })
}

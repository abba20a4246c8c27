// /admin/users and `tollgate users …` against a running gateway: the lifecycle, refusals in
// the admin API's shape, and a password that never comes back and never leaves stdin.
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const CLI = resolve(import.meta.dirname, '../../src/cli.ts')

let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate()
})
t.teardown(async () => {
  await gw.stop()
})

async function admin(
  method: string,
  path: string,
  body?: unknown,
  token = gw.adminToken,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>), text }
}

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs the CLI with `stdin` piped in, as `printf '%s\n' "$PW" | tollgate users add …` does. */
function tollgate(args: string[], stdin = ''): Promise<Run> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        TOLLGATE_URL: gw.url,
        TOLLGATE_ADMIN_TOKEN: gw.adminToken,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c
    })
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c
    })
    const timer = setTimeout(() => child.kill(), 30_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      done({ code, stdout, stderr })
    })
    child.stdin.end(stdin)
  })
}

t.test('admin API: create, list, read, patch, delete; never a password or a hash', async (t) => {
  const created = await admin('POST', '/admin/users', {
    username: 'ann',
    password: 'ann secret pw',
    roles: ['admin'],
    groups: ['ops'],
    tenant: 'acme',
  })
  t.equal(created.status, 201)
  t.match(created.json, {
    object: 'user',
    username: 'ann',
    roles: ['admin'],
    groups: ['ops'],
    tenant: 'acme',
    disabled: false,
  })
  t.match(created.json.id, /^usr_[0-9a-f]{24}$/)
  t.notMatch(created.text, /ann secret pw|scrypt|password/)

  t.equal(
    (await admin('POST', '/admin/users', { username: 'ann', password: 'other password' })).status,
    409,
    'a taken username',
  )
  const list = await admin('GET', '/admin/users')
  t.strictSame(
    (list.json.data as Array<{ username: string }>).map((u) => u.username),
    ['ann'],
  )
  t.notMatch(list.text, /scrypt|password/)
  t.equal((await admin('GET', '/admin/users/ann')).json.id, created.json.id)

  const patched = await admin('PATCH', '/admin/users/ann', {
    roles: ['user'],
    disabled: true,
    password: 'a new password',
  })
  t.equal(patched.status, 200)
  t.match(patched.json, { roles: ['user'], groups: ['ops'], tenant: 'acme', disabled: true })
  t.notMatch(patched.text, /a new password|scrypt/)

  const deleted = await admin('DELETE', '/admin/users/ann')
  t.equal(deleted.status, 200)
  t.equal(deleted.json.deleted, true)
  t.equal((await admin('GET', '/admin/users/ann')).status, 404)
  t.equal((await admin('DELETE', '/admin/users/ann')).status, 404)
})

t.test('admin API: refusals in the admin shape, without echoing the password', async (t) => {
  const noAuth = await admin('GET', '/admin/users', undefined, 'wrong')
  t.equal(noAuth.status, 401)
  t.match(noAuth.json, { error: { code: 'invalid_admin_token' } })
  t.equal((await admin('POST', '/admin/users', { username: 'x', password: 'pw' }, 'wrong')).status, 401)

  const short = await admin('POST', '/admin/users', { username: 'bo', password: 'tiny' })
  t.equal(short.status, 400)
  t.match(short.json, { error: { param: 'password', type: 'invalid_request_error' } })
  t.notMatch(short.text, /tiny/)
  const badName = await admin('POST', '/admin/users', { username: '../etc', password: 'long enough pw' })
  t.match(badName.json, { error: { param: 'username' } })
  const unknownField = await admin('PATCH', '/admin/users/nobody', { username: 'renamed' })
  t.equal(unknownField.status, 400)
  t.equal((await admin('PATCH', '/admin/users/nobody', { roles: [] })).status, 404)
})

t.test('CLI: users add reads the password from stdin; list, show, update, remove', async (t) => {
  const add = await tollgate(
    ['users', 'add', 'cli-user', '--role', 'user', '--role', 'editor', '--group', 'g1', '--tenant', 't1'],
    'cli user password\n',
  )
  t.equal(add.code, 0, add.stderr)
  t.match(add.stdout, /Username:\s+cli-user/)
  t.match(add.stdout, /Roles:\s+user,editor/)
  t.notMatch(add.stdout + add.stderr, /cli user password/)

  const list = await tollgate(['users', 'list'])
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^USERNAME\s+ID\s+TENANT\s+ROLES\s+GROUPS\s+DISABLED\s+CREATED$/m)
  t.match(list.stdout, /cli-user\s+usr_[0-9a-f]{24}\s+t1\s+user,editor\s+g1\s+false/)

  const update = await tollgate(
    ['users', 'update', 'cli-user', '--no-roles', '--disable', '--password'],
    'a second password\n',
  )
  t.equal(update.code, 0, update.stderr)
  t.match(update.stdout, /Roles:\s+-/)
  t.match(update.stdout, /Disabled:\s+true/)

  const show = await tollgate(['users', 'show', 'cli-user', '--json'])
  t.match(JSON.parse(show.stdout), { username: 'cli-user', roles: [], disabled: true })

  const remove = await tollgate(['users', 'remove', 'cli-user'])
  t.equal(remove.code, 0, remove.stderr)
  t.equal((await tollgate(['users', 'show', 'cli-user'])).code, 1)
})

t.test('CLI: a password is never an argument; an empty one is refused', async (t) => {
  const extra = await tollgate(['users', 'add', 'pat', 'hunter2hunter2'])
  t.equal(extra.code, 64)
  t.match(extra.stderr, /never an argument/)
  const empty = await tollgate(['users', 'add', 'pat'], '\n')
  t.equal(empty.code, 64)
  t.match(empty.stderr, /no password/)
  t.equal((await admin('GET', '/admin/users/pat')).status, 404)
})

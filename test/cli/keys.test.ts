// `tollgate keys …` against a running gateway, as an operator runs it: tables by default,
// --json for scripts, the secret printed by create and rotate only, clear errors and
// exit codes when something is wrong.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import t from 'tap'
import { durationSeconds, runKeysCommand } from '../../src/cli/keys.ts'
import { formatAmount } from '../../src/keys/money.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const CLI = resolve(import.meta.dirname, '../../src/cli.ts')

interface Run { code: number | null; stdout: string; stderr: string }

function tollgate(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 30_000 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr })
    })
  })
}

let gw: RunningTollgate
let env: Record<string, string>
t.before(async () => {
  gw = await startTollgate()
  env = { TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: gw.adminToken }
})
t.teardown(async () => { await gw.stop() })

t.test('create, list, show, update, rotate, revoke, usage: the whole lifecycle from the command line', async (t) => {
  const created = await tollgate(['keys', 'create', '--name', 'cli key', '--owner', 'cli-team', '--tier', 'Standard4000', '--model', 'gpt-4o,claude-sonnet-4', '--expires-in', '30d'], env)
  t.equal(created.code, 0, created.stderr)
  const secret = /\b(tg1_[0-9A-Za-z]{49})\b/.exec(created.stdout)?.[1] ?? ''
  const id = /\b(key_[0-9a-f]{24})\b/.exec(created.stdout)?.[1] ?? ''
  t.ok(secret, 'the secret is printed')
  t.ok(id, 'the id is printed')
  t.match(created.stdout, /shown once/)
  t.match(created.stdout, /Tier:\s+Standard4000/)
  t.match(created.stdout, /Models:\s+gpt-4o, claude-sonnet-4/)

  const chat = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
  })
  t.equal(chat.status, 200, 'the printed secret works')
  const usage = (await chat.json() as { usage: { prompt_tokens: number; completion_tokens: number } }).usage

  const list = await tollgate(['keys', 'list', '--owner', 'cli-team'], env)
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^ID\s+PREFIX\s+NAME\s+OWNER\s+TIER\s+STATUS\s+EXPIRES\s+CREATED$/m, 'a table header')
  t.match(list.stdout, new RegExp(`${id}\\s+${secret.slice(0, 12)}…\\s+cli key\\s+cli-team\\s+Standard4000\\s+active`))
  t.notMatch(list.stdout, secret, 'no secret in the list')

  const listJson = await tollgate(['keys', 'list', '--owner', 'cli-team', '--json'], env)
  const parsed = JSON.parse(listJson.stdout) as { data: Array<{ id: string }> }
  t.same(parsed.data.map((k) => k.id), [id], '--json prints the API reply')

  const show = await tollgate(['keys', 'show', id], env)
  t.equal(show.code, 0)
  t.match(show.stdout, /Status:\s+active/)
  t.notMatch(show.stdout, secret)

  const update = await tollgate(['keys', 'update', id, '--name', 'renamed', '--all-models'], env)
  t.equal(update.code, 0, update.stderr)
  t.match(update.stdout, /Name:\s+renamed/)
  t.match(update.stdout, /Models:\s+all/)

  const rotate = await tollgate(['keys', 'rotate', id, '--grace', '1h'], env)
  t.equal(rotate.code, 0, rotate.stderr)
  const newSecret = /\b(tg1_[0-9A-Za-z]{49})\b/.exec(rotate.stdout)?.[1] ?? ''
  t.ok(newSecret && newSecret !== secret, 'a new secret is printed')
  t.notMatch(rotate.stdout, secret, 'the old secret is not')
  t.match(rotate.stdout, /previous secret keeps working until/)

  const keyUsage = await tollgate(['keys', 'usage', id], env)
  t.equal(keyUsage.code, 0, keyUsage.stderr)
  t.match(keyUsage.stdout, /DAY\s+MODEL\s+REQUESTS\s+INPUT TOKENS\s+OUTPUT TOKENS\s+COST \(EUR\)/, 'the cost column names the currency')
  const keyUsageJson = JSON.parse((await tollgate(['keys', 'usage', id, '--json'], env)).stdout) as { currency: string; totals: { cost: number } }
  t.equal(keyUsageJson.currency, 'EUR', 'JSON keeps the number and names the currency')
  t.equal(/^TOTAL\s.*\s(\S+)$/m.exec(keyUsage.stdout)?.[1], formatAmount(keyUsageJson.totals.cost), 'the total cost, written as the portal writes it')
  t.match(keyUsage.stdout, new RegExp(`gpt-4o\\s+1\\s+${usage.prompt_tokens}\\s+${usage.completion_tokens}\\s`), 'the call, as the backend reported it')
  t.match(keyUsage.stdout, /^TOTAL\s+1\s/m)
  const byOwner = await tollgate(['keys', 'usage', '--group-by', 'owner', '--json'], env)
  const owners = JSON.parse(byOwner.stdout) as { data: Array<{ owner: string; requests: number }> }
  t.equal(owners.data.find((r) => r.owner === 'cli-team')?.requests, 1)

  const revoke = await tollgate(['keys', 'revoke', id], env)
  t.equal(revoke.code, 0)
  t.match(revoke.stdout, new RegExp(`Revoked ${id}`))
  const after = await tollgate(['keys', 'list', '--status', 'revoked', '--owner', 'cli-team'], env)
  t.match(after.stdout, id)
  t.notMatch(gw.output(), secret, 'the gateway logged no secret')
  t.notMatch(gw.output(), newSecret)
})

t.test('errors: exit 1 with the API message; exit 64 for bad usage; the token never printed', async (t) => {
  const wrong = await tollgate(['keys', 'list'], { ...env, TOLLGATE_ADMIN_TOKEN: 'not-the-token' })
  t.equal(wrong.code, 1)
  t.match(wrong.stderr, /401 invalid_admin_token/)
  t.notMatch(wrong.stderr + wrong.stdout, 'not-the-token')
  const missing = await tollgate(['keys', 'show', 'key_000000000000000000000000'], env)
  t.equal(missing.code, 1)
  t.match(missing.stderr, /404 not_found: No such key/)
  const badTier = await tollgate(['keys', 'create', '--tier', 'Gold'], env)
  t.equal(badTier.code, 1)
  t.match(badTier.stderr, /400 invalid_body: Unknown tier/)
  const noToken = await tollgate(['keys', 'list'], { TOLLGATE_URL: gw.url })
  t.equal(noToken.code, 64)
  t.match(noToken.stderr, /TOLLGATE_ADMIN_TOKEN/)
  const unreachable = await tollgate(['keys', 'list', '--url', 'http://127.0.0.1:9'], env)
  t.equal(unreachable.code, 1)
  t.match(unreachable.stderr, /cannot reach the gateway at http:\/\/127\.0\.0\.1:9/)
  for (const args of [['keys', 'explode'], ['keys', 'show'], ['keys', 'list', '--colour'], ['keys', 'rotate', 'key_x', '--grace', 'soon'], ['keys', 'update', 'key_x'], ['keys', 'create', '--expires-at', 'x', '--expires-in', '1d']]) {
    const run = await tollgate(args, env)
    t.equal(run.code, 64, `${args.join(' ')}: exit 64`)
    t.match(run.stderr, /tollgate keys/)
  }
  const help = await tollgate(['keys', 'help'], {})
  t.equal(help.code, 0)
  t.match(help.stdout, /Usage: tollgate keys/)
  const top = await tollgate(['help'], {})
  t.match(top.stdout, /keys <command>/, 'the top-level help names the keys commands')
})

t.test('in process: durations, flags from env or options, and nothing from the server reaches the terminal raw', async (t) => {
  t.equal(durationSeconds('90', 'x'), 90)
  t.equal(durationSeconds('15m', 'x'), 900)
  t.equal(durationSeconds('12h', 'x'), 43_200)
  t.equal(durationSeconds('7d', 'x'), 604_800)
  t.throws(() => durationSeconds('1y', 'x'))

  const seen: Array<{ url: string; auth: string | null }> = []
  const out: string[] = []
  const fakeFetch: typeof fetch = async (input, init) => {
    seen.push({ url: String(input), auth: new Headers(init?.headers).get('authorization') })
    const evil = { id: 'key_1', prefix: 'tg1_abcdefgh', name: 'evil\u001b]0;pwned\u0007\u001b[2J', owner: null, tier: 'Basic', status: 'active', created_at: 'now', expires_at: null }
    return new Response(JSON.stringify({ object: 'list', data: [evil] }), { status: 200, headers: { 'content-type': 'application/json' } })
  }
  const code = await runKeysCommand(['list', '--url', 'http://gw.example:8080/', '--admin-token', 'flag-token', '--tier', 'Basic'], {
    env: { TOLLGATE_ADMIN_TOKEN: 'env-token', TOLLGATE_URL: 'http://other' }, stdout: (s) => out.push(s), stderr: (s) => out.push(s), fetch: fakeFetch,
  })
  t.equal(code, 0)
  t.same(seen, [{ url: 'http://gw.example:8080/admin/keys?tier=Basic', auth: 'Bearer flag-token' }], 'flags win over the environment')
  t.notOk(out.join('').includes('\u001b') || out.join('').includes('\u0007'), 'escape sequences from a key name are neutralised')
  t.match(out.join(''), /evil\?\]0;pwned\?\?\[2J/)
})

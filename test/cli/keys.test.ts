// `tollgate keys …` against a running gateway, as an operator runs it: tables by default,
// --json for scripts, the secret printed by create and rotate only, clear errors and
// exit codes when something is wrong.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { durationSeconds, runKeysCommand } from '../../src/cli/keys.ts'
import { formatAmount } from '../../src/keys/money.ts'
import { mergeUsageReplies, usageWindows } from '../../src/cli/usage-windows.ts'
import { runTollgate } from '../helpers/cli.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { chatWith } from '../helpers/http.ts'
import { pollUntil } from '../helpers/poll.ts'

const tollgate = runTollgate

let gw: RunningTollgate
let env: Record<string, string>
t.before(async () => {
  gw = await startTollgate()
  env = { TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: gw.adminToken }
})
t.teardown(async () => {
  await gw.stop()
})

t.test('create, list, show, update, rotate, revoke, usage: the whole lifecycle from the command line', async (t) => {
  const created = await tollgate(
    [
      'keys',
      'create',
      '--name',
      'cli key',
      '--owner',
      'cli-team',
      '--tier',
      'Standard4000',
      '--model',
      'gpt-4o,claude-sonnet-4',
      '--expires-in',
      '30d',
    ],
    env,
  )
  t.equal(created.code, 0, created.stderr)
  const secret = /\b(tg1_[0-9A-Za-z]{49})\b/.exec(created.stdout)?.[1] ?? ''
  const id = /\b(key_[0-9a-f]{24})\b/.exec(created.stdout)?.[1] ?? ''
  t.ok(secret, 'the secret is printed')
  t.ok(id, 'the id is printed')
  t.match(created.stdout, /shown once/)
  t.match(created.stdout, /Tier:\s+Standard4000/)
  t.match(created.stdout, /Models:\s+gpt-4o, claude-sonnet-4/)

  const chat = await chatWith(gw.url, secret, 'gpt-4o', 3)
  t.equal(chat.status, 200, 'the printed secret works')
  const usage = ((await chat.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage

  const list = await tollgate(['keys', 'list', '--owner', 'cli-team'], env)
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^ID\s+PREFIX\s+NAME\s+OWNER\s+TIER\s+STATUS\s+EXPIRES\s+CREATED$/m, 'a table header')
  t.match(list.stdout, new RegExp(`${id}\\s+${secret.slice(0, 12)}…\\s+cli key\\s+cli-team\\s+Standard4000\\s+active`))
  t.notMatch(list.stdout, secret, 'no secret in the list')

  const listJson = await tollgate(['keys', 'list', '--owner', 'cli-team', '--json'], env)
  const parsed = JSON.parse(listJson.stdout) as { data: Array<{ id: string }> }
  t.same(
    parsed.data.map((k) => k.id),
    [id],
    '--json prints the API reply',
  )

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
  t.match(
    keyUsage.stdout,
    /DAY\s+MODEL\s+REQUESTS\s+INPUT TOKENS\s+OUTPUT TOKENS\s+COST \(EUR\)/,
    'the cost column names the currency',
  )
  const keyUsageJson = JSON.parse((await tollgate(['keys', 'usage', id, '--json'], env)).stdout) as {
    currency: string
    totals: { cost: number }
  }
  t.equal(keyUsageJson.currency, 'EUR', 'JSON keeps the number and names the currency')
  t.equal(
    /^TOTAL\s+\S+\s+\S+\s+\S+\s+(\S+)\s/m.exec(keyUsage.stdout)?.[1],
    formatAmount(keyUsageJson.totals.cost),
    'the total cost, written as the portal writes it',
  )
  t.match(
    keyUsage.stdout,
    new RegExp(`gpt-4o\\s+1\\s+${usage.prompt_tokens}\\s+${usage.completion_tokens}\\s`),
    'the call, as the backend reported it',
  )
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

t.test("keys usage: the prompt cache's reads and writes apart, in the table and the JSON", async (t) => {
  const { key, id } = await gw.createKey({ name: 'cached' })
  // The mock caches a prompt under its prompt_cache_key: the first call writes it, the
  // second reads it back and writes its new turn.
  const ask = async (messages: unknown[]): Promise<{ prompt_tokens: number; prompt_tokens_details: Cached }> => {
    const res = await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o', messages, max_tokens: 3, prompt_cache_key: 'cli-cache' }),
    })
    t.equal(res.status, 200)
    return ((await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: Cached } }).usage
  }
  type Cached = { cached_tokens?: number; cache_write_tokens?: number }
  const turn = { role: 'user', content: 'What is a prompt cache? '.repeat(20) }
  const first = await ask([turn])
  const second = await ask([turn, { role: 'assistant', content: 'A cache.' }, { role: 'user', content: 'And?' }])
  const read = second.prompt_tokens_details.cached_tokens ?? 0
  const written =
    (first.prompt_tokens_details.cache_write_tokens ?? 0) + (second.prompt_tokens_details.cache_write_tokens ?? 0)
  t.ok(read > 0 && written > read, `the calls read ${read} and wrote ${written} tokens`)

  type Totals = {
    requests: number
    cache_read_tokens: number
    cache_write_tokens: number
    cache_read_cost: number
    cache_write_cost: number
    cost: number
  }
  const polled = await pollUntil(
    async () => JSON.parse((await tollgate(['keys', 'usage', id, '--json'], env)).stdout) as { totals: Totals },
    (u) => u.totals.requests === 2,
    100,
    100,
  )
  const json = polled.value
  t.match(json.totals, { requests: 2, cache_read_tokens: read, cache_write_tokens: written }, "JSON: the API's fields")
  t.ok(
    json.totals.cache_read_cost + json.totals.cache_write_cost <= json.totals.cost,
    `parts of the cost (${json.totals.cache_read_cost} + ${json.totals.cache_write_cost} of ${json.totals.cost})`,
  )

  const table = await tollgate(['keys', 'usage', id], env)
  t.equal(table.code, 0, table.stderr)
  t.match(
    table.stdout,
    /REQUESTS\s+INPUT TOKENS\s+OUTPUT TOKENS\s+COST \(EUR\)\s+CACHE READS\s+CACHE WRITES\s+CACHE READ COST \(EUR\)\s+CACHE WRITE COST \(EUR\)$/m,
    'after the cost, as the portal and the CSV have them',
  )
  const cells = (/^TOTAL\s+(.*)$/m.exec(table.stdout)?.[1] ?? '').split(/\s+/)
  t.same(
    cells.slice(4),
    [
      read.toLocaleString('en-US'),
      written.toLocaleString('en-US'),
      formatAmount(json.totals.cache_read_cost),
      formatAmount(json.totals.cache_write_cost),
    ],
    'the total row: reads, writes and their costs',
  )

  // Asked in windows (a range over a year): the cache's parts are added up too.
  const from = new Date(Date.now() - 800 * 86_400_000).toISOString().slice(0, 10)
  const windowed = JSON.parse((await tollgate(['keys', 'usage', id, '--from', from, '--json'], env)).stdout) as {
    totals: Totals
  }
  t.same(windowed.totals, json.totals, 'the same totals, cache parts included')
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
  // No token in the environment and none stored in the data directory it would read.
  const noToken = await tollgate(['keys', 'list'], {
    TOLLGATE_URL: gw.url,
    TOLLGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'tg-cli-empty-')),
  })
  t.equal(noToken.code, 64)
  t.match(noToken.stderr, /TOLLGATE_ADMIN_TOKEN/)
  const unreachable = await tollgate(['keys', 'list', '--url', 'http://127.0.0.1:9'], env)
  t.equal(unreachable.code, 1)
  t.match(unreachable.stderr, /cannot reach the gateway at http:\/\/127\.0\.0\.1:9/)
  t.match(unreachable.stderr, /--url or TOLLGATE_URL/, 'and says how to name the right one')
  for (const args of [
    ['keys', 'explode'],
    ['keys', 'show'],
    ['keys', 'list', '--colour'],
    ['keys', 'rotate', 'key_x', '--grace', 'soon'],
    ['keys', 'update', 'key_x'],
    ['keys', 'create', '--expires-at', 'x', '--expires-in', '1d'],
  ]) {
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

t.test(
  'in process: durations, flags from env or options, and nothing from the server reaches the terminal raw',
  async (t) => {
    t.throws(
      () => durationSeconds('90', '--expires-in'),
      /--expires-in 90: say the unit: 90d \(days\), 90h, 90m or 90s/,
      'a bare number is refused, not read as seconds',
    )
    t.equal(durationSeconds('45s', 'x'), 45)
    t.equal(durationSeconds('15m', 'x'), 900)
    t.equal(durationSeconds('12h', 'x'), 43_200)
    t.equal(durationSeconds('7d', 'x'), 604_800)
    t.throws(() => durationSeconds('1y', 'x'))

    const seen: Array<{ url: string; auth: string | null }> = []
    const out: string[] = []
    const fakeFetch: typeof fetch = async (input, init) => {
      seen.push({ url: String(input), auth: new Headers(init?.headers).get('authorization') })
      const evil = {
        id: 'key_1',
        prefix: 'tg1_abcdefgh',
        name: 'evil\u001b]0;pwned\u0007\u001b[2J',
        owner: null,
        tier: 'Basic',
        status: 'active',
        created_at: 'now',
        expires_at: null,
      }
      return new Response(JSON.stringify({ object: 'list', data: [evil] }), {
        status: 200,
        headers: { 'content-type': 'application/json' },
      })
    }
    const code = await runKeysCommand(
      ['list', '--url', 'http://gw.example:8080/', '--admin-token', 'flag-token', '--tier', 'Basic'],
      {
        env: { TOLLGATE_ADMIN_TOKEN: 'env-token', TOLLGATE_URL: 'http://other' },
        stdout: (s) => out.push(s),
        stderr: (s) => out.push(s),
        fetch: fakeFetch,
      },
    )
    t.equal(code, 0)
    t.same(
      seen,
      [{ url: 'http://gw.example:8080/admin/keys?tier=Basic', auth: 'Bearer flag-token' }],
      'flags win over the environment',
    )
    t.notOk(
      out.join('').includes('\u001b') || out.join('').includes('\u0007'),
      'escape sequences from a key name are neutralised',
    )
    t.match(out.join(''), /evil\?\]0;pwned\?\?\[2J/)
  },
)

t.test('--expires-in needs a unit, and the expiry it came to is said', async (t) => {
  const bare = await tollgate(['keys', 'create', '--name', 'bare', '--expires-in', '90'], env)
  t.equal(bare.code, 64, 'a bare number: bad usage')
  t.match(bare.stderr, /--expires-in 90: say the unit: 90d \(days\)/)
  t.equal(bare.stdout, '', 'and no key was made')
  const graceBare = await tollgate(['keys', 'rotate', 'key_000000000000000000000000', '--grace', '3600'], env)
  t.equal(graceBare.code, 64, '--grace too')
  t.match(graceBare.stderr, /--grace 3600: say the unit/)

  const before = Date.now()
  const created = await tollgate(['keys', 'create', '--name', 'ninety days', '--expires-in', '90d', '--json'], env)
  t.equal(created.code, 0, created.stderr)
  const key = JSON.parse(created.stdout) as { id: string; expires_at: string }
  const expires = Date.parse(key.expires_at)
  t.ok(
    expires >= before + 90 * 86_400_000 - 1000 && expires <= Date.now() + 90 * 86_400_000 + 1000,
    `90 days from now: ${key.expires_at}`,
  )
  t.match(
    created.stderr,
    `--expires-in 90d: the key expires at ${key.expires_at} (90 days from now)`,
    'the expiry is echoed (on stderr: --json stays JSON)',
  )

  const updated = await tollgate(['keys', 'update', key.id, '--expires-in', '12h'], env)
  t.equal(updated.code, 0, updated.stderr)
  t.match(updated.stderr, /--expires-in 12h: the key expires at \S+Z \(12 hours from now\)/)
  t.match(updated.stdout, /Expires:\s+\S+Z/)
})

t.test('keys usage --from more than a year back: asked in windows, added up', async (t) => {
  const { key, id } = await gw.createKey({ name: 'old usage' })
  for (let i = 0; i < 2; i++) {
    const res = await chatWith(gw.url, key, 'gpt-4o', 3)
    t.equal(res.status, 200)
    await res.text()
  }
  const day = (offset: number): string => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10)
  const from = day(800)

  // The API alone: one query is still at most 366 days, and its refusal says what to do.
  const refused = await fetch(`${gw.url}/admin/keys/${id}/usage?from=${from}`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  t.equal(refused.status, 400)
  const message = ((await refused.json()) as { error: { message: string } }).error.message
  t.match(message, /at most 366 days/)
  t.match(message, '(`to` defaults to today)', 'says why the range is that long')
  t.match(message, /several ranges of 366 days or fewer with `from` and `to`/, 'and what to do')

  const table = await tollgate(['keys', 'usage', id, '--from', from], env)
  t.equal(table.code, 0, table.stderr)
  t.match(table.stdout, new RegExp(`Usage of ${id}, ${from} to ${day(0)}`), 'the whole range, up to today')
  t.match(table.stdout, /^TOTAL\s+2\s/m, 'both calls, counted once')

  const json = JSON.parse((await tollgate(['keys', 'usage', id, '--from', from, '--json'], env)).stdout) as {
    from: string
    to: string
    totals: { requests: number }
    by_model: Array<{ model: string; requests: number }>
  }
  t.equal(json.from, from)
  t.equal(json.to, day(0))
  t.equal(json.totals.requests, 2)
  t.same(
    json.by_model.map((m) => [m.model, m.requests]),
    [['gpt-4o', 2]],
  )

  const byKey = JSON.parse(
    (await tollgate(['keys', 'usage', '--from', from, '--to', day(0), '--json'], env)).stdout,
  ) as { data: Array<{ key_id: string; requests: number }> }
  t.same(
    byKey.data.filter((r) => r.key_id === id).map((r) => r.requests),
    [2],
    'across keys: one row per key, summed over the windows',
  )
})

t.test('in process: the windows of a long range, and the replies added up', async (t) => {
  const now = new Date('2026-11-26T08:00:00Z')
  t.same(
    usageWindows(undefined, undefined, now),
    [{ from: undefined, to: undefined }],
    "no from: the gateway's default",
  )
  t.same(
    usageWindows('2026-01-01', undefined, now),
    [{ from: '2026-01-01', to: undefined }],
    'within a year: one query, as given',
  )
  t.same(
    usageWindows('2025-03-01', undefined, now),
    [
      { from: '2025-03-01', to: '2026-03-01' },
      { from: '2026-03-02', to: '2026-11-26' },
    ],
    '2025-03-01 to today: two windows, 366 days and the rest, no day twice',
  )
  t.same(
    usageWindows('2025-02-30', undefined, now),
    [{ from: '2025-02-30', to: undefined }],
    'not a day: the gateway says so',
  )

  const row = (model: string, requests: number, cost: number): Record<string, unknown> => ({
    model,
    requests,
    input_tokens: requests * 10,
    output_tokens: requests,
    cost,
  })
  const merged = mergeUsageReplies(
    [
      {
        object: 'usage',
        key_id: 'key_1',
        from: '2025-03-01',
        to: '2026-03-01',
        data: [{ day: '2025-06-01', ...row('a', 1, 0.1) }],
        by_model: [row('a', 1, 0.1)],
        totals: {
          requests: 1,
          input_tokens: 10,
          output_tokens: 1,
          cost: 0.1,
          cache_read_tokens: 4,
          cache_write_tokens: 2,
          cache_read_cost: 0.01,
          cache_write_cost: 0.02,
        },
      },
      {
        object: 'usage',
        key_id: 'key_1',
        from: '2026-03-02',
        to: '2026-11-26',
        data: [
          { day: '2026-06-01', ...row('a', 2, 0.2) },
          { day: '2026-06-01', ...row('b', 1, 0.3) },
        ],
        by_model: [row('a', 2, 0.2), row('b', 1, 0.3)],
        totals: {
          requests: 3,
          input_tokens: 30,
          output_tokens: 3,
          cost: 0.5,
          cache_read_tokens: 6,
          cache_write_tokens: 0,
          cache_read_cost: 0.02,
          cache_write_cost: 0,
        },
      },
    ],
    null,
    true,
  )
  t.equal(merged.from, '2025-03-01')
  t.equal(merged.to, '2026-11-26')
  t.same(
    merged.totals,
    {
      requests: 4,
      input_tokens: 40,
      output_tokens: 4,
      cost: 0.6,
      cache_read_tokens: 10,
      cache_write_tokens: 2,
      cache_read_cost: 0.03,
      cache_write_cost: 0.02,
    },
    'totals summed, the cache parts too (0.1 + 0.5 is 0.6, not 0.6000000000000001; 0.01 + 0.02 is 0.03)',
  )
  t.same(merged.by_model, [row('a', 3, 0.3), row('b', 1, 0.3)], 'by_model summed per model')
  t.equal((merged.data as unknown[]).length, 3, 'per-day rows kept')
  const grouped = mergeUsageReplies(
    [
      { group_by: 'owner', from: 'x', to: 'y', data: [{ owner: 'o1', ...row('m', 1, 1) }], totals: {} },
      {
        group_by: 'owner',
        from: 'y',
        to: 'z',
        data: [
          { owner: 'o2', ...row('m', 1, 1) },
          { owner: 'o1', ...row('m', 2, 1) },
        ],
        totals: {},
      },
    ],
    'owner',
    false,
  )
  t.same(
    (grouped.data as Array<Record<string, unknown>>).map((r) => [r.owner, r.requests]),
    [
      ['o1', 3],
      ['o2', 1],
    ],
    'a group in both windows: one row',
  )
  t.same(
    grouped.totals,
    { requests: 0, input_tokens: 0, output_tokens: 0, cost: 0 },
    'replies without the cache fields (an older gateway): none made up',
  )
})

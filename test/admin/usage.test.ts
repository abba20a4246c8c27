// Usage through the admin API: per key (per model and per day, with totals) and across
// keys (grouped by key, owner, tier or model), costed from the plan's prices; and what
// the usage routes refuse.
import { join, resolve } from 'node:path'
import t from 'tap'
import { loadPlans } from '../../src/config/load.ts'
import { resolveLimits } from '../../src/limits/plans.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request } from '../helpers/http.ts'
import { adminCall, isError } from './helpers.ts'

const plans = loadPlans(join(resolve(import.meta.dirname, '../..'), 'config/plans.yaml'))
/** Cost in hundredths of a currency unit per million tokens: exact, since the catalogue's prices have two decimals. */
const centsPerMillion = (tier: string, model: string, input: number, output: number): number => {
  const { limits } = resolveLimits(plans, { tier, limits: null }, model)
  return Math.round((limits.input_price ?? 0) * 100) * input + Math.round((limits.output_price ?? 0) * 100) * output
}
/** The exact decimal cost, as the nearest double: what the API must answer, to the last digit. */
const price = (tier: string, model: string, input: number, output: number): number =>
  centsPerMillion(tier, model, input, output) / 1e8

let gw: RunningTollgate
let admin: ReturnType<typeof adminCall>
const today = new Date().toISOString().slice(0, 10)

t.before(async () => {
  gw = await startTollgate()
  admin = adminCall(gw.url, gw.adminToken)
})
t.teardown(async () => {
  await gw.stop()
})

interface Usage {
  prompt_tokens: number
  completion_tokens: number
}
interface Row {
  requests: number
  input_tokens: number
  output_tokens: number
  cost: number
  model?: string
  day?: string
  key_id?: string
  owner?: string
  tier?: string
}
interface UsageReply {
  key_id?: string
  from: string
  to: string
  currency: string
  data: Row[]
  by_model?: Row[]
  totals: Row
}

async function chat(key: string, model: string, stream: boolean, maxTokens: number): Promise<Usage> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: `count for ${model}` }],
      max_tokens: maxTokens,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
  })
  if (res.status !== 200) throw new Error(`chat ${res.status}: ${await res.text()}`)
  if (!stream) return ((await res.json()) as { usage: Usage }).usage
  // The last data chunk before [DONE] carries the usage the backend reported.
  const events = (await res.text())
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)) as { usage?: Usage | null })
  const usage = events.findLast((e) => e.usage)?.usage
  if (!usage) throw new Error('stream without usage')
  return usage
}

t.test('per key: rows per model and day, totals, cost from the plan', async (t) => {
  const k = await gw.createKey({ tier: 'Standard4000', owner: 'usage-team' })
  const expected = new Map<string, { requests: number; input: number; output: number }>()
  const calls: Array<[string, boolean, number]> = [
    ['gpt-4o', false, 5],
    ['gpt-4o', true, 9],
    ['claude-sonnet-4', false, 7],
    ['claude-sonnet-4', true, 3],
    ['gpt-4o', false, 11],
  ]
  for (const [model, stream, max] of calls) {
    const usage = await chat(k.key, model, stream, max)
    const e = expected.get(model) ?? { requests: 0, input: 0, output: 0 }
    expected.set(model, {
      requests: e.requests + 1,
      input: e.input + usage.prompt_tokens,
      output: e.output + usage.completion_tokens,
    })
  }
  const res = await admin('GET', `/admin/keys/${k.id}/usage`)
  t.equal(res.status, 200)
  const body = res.json<UsageReply>()
  t.equal(body.key_id, k.id)
  t.equal(body.to, today, 'to defaults to today')
  t.equal(body.data.length, 2, 'one row per (model, day)')
  let cents = 0
  for (const [model, e] of expected) {
    const row = body.data.find((r) => r.model === model)
    t.match(
      row,
      { day: today, requests: e.requests, input_tokens: e.input, output_tokens: e.output },
      `${model}: what the backend reported`,
    )
    const want = price('Standard4000', model, e.input, e.output)
    t.ok(want > 0, `${model} has a price`)
    t.equal(row?.cost, want, `${model}: cost ${row?.cost}, exactly the plan's prices`)
    cents += centsPerMillion('Standard4000', model, e.input, e.output)
  }
  t.match(body.totals, {
    requests: 5,
    input_tokens: [...expected.values()].reduce((s, e) => s + e.input, 0),
    output_tokens: [...expected.values()].reduce((s, e) => s + e.output, 0),
  })
  t.equal(body.totals.cost, cents / 1e8, `total cost ${body.totals.cost}, exact: no float noise`)
  t.equal(body.currency, 'EUR', "the costs' currency: the plans name none, so the catalogue's euros")
  t.same(
    body.by_model?.map((r) => r.model),
    ['claude-sonnet-4', 'gpt-4o'],
  )

  const past = (await admin('GET', `/admin/keys/${k.id}/usage?from=2020-01-01&to=2020-01-31`)).json<UsageReply>()
  t.same(past.data, [], 'nothing in a past month')
  t.same(past.totals, {
    requests: 0,
    input_tokens: 0,
    output_tokens: 0,
    cost: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cache_read_cost: 0,
    cache_write_cost: 0,
    cached_requests: 0,
    batch_requests: 0,
    batch_cost: 0,
  })
})

t.test('across keys: grouped by key, owner, tier or model, by day on request, filtered', async (t) => {
  const owner = `owner-${Date.now()}`
  const a = await gw.createKey({ tier: 'Standard4000', owner })
  const b = await gw.createKey({ tier: 'Standard1000', owner })
  const ua = await chat(a.key, 'gpt-4o', false, 6)
  const ub = await chat(b.key, 'gpt-4o', false, 8)
  const q = async (query: string): Promise<UsageReply> => {
    const res = await admin('GET', `/admin/usage?${query}`)
    t.equal(res.status, 200, query)
    return res.json<UsageReply>()
  }
  const byKey = await q(`group_by=key&owner=${owner}`)
  t.same(byKey.data.map((r) => r.key_id).sort(), [a.id, b.id].sort())
  t.equal(byKey.currency, 'EUR', 'named across keys too')
  t.match(
    byKey.data.find((r) => r.key_id === a.id),
    { requests: 1, input_tokens: ua.prompt_tokens, output_tokens: ua.completion_tokens },
  )
  const byOwner = await q(`group_by=owner&owner=${owner}`)
  t.match(byOwner.data, [
    {
      owner,
      requests: 2,
      input_tokens: ua.prompt_tokens + ub.prompt_tokens,
      output_tokens: ua.completion_tokens + ub.completion_tokens,
    },
  ])
  const byTier = await q(`group_by=tier&owner=${owner}`)
  t.same(
    byTier.data.map((r) => r.tier),
    ['Standard1000', 'Standard4000'],
  )
  const s1000 = byTier.data.find((r) => r.tier === 'Standard1000')
  t.equal(
    s1000?.cost,
    price('Standard1000', 'gpt-4o', ub.prompt_tokens, ub.completion_tokens),
    'each tier costed at its own prices',
  )
  const byModel = await q(`group_by=model&owner=${owner}&granularity=day`)
  t.match(byModel.data, [{ day: today, model: 'gpt-4o', requests: 2 }])
  const tierFilter = await q(`group_by=key&owner=${owner}&tier=Standard1000`)
  t.same(
    tierFilter.data.map((r) => r.key_id),
    [b.id],
  )
  const all = await q('group_by=key')
  t.ok(all.totals.requests >= byKey.totals.requests + 5, 'without filters: every key')
})

t.test('usage refuses bad queries with 400, unknown keys with 404, and anyone without the admin token', async (t) => {
  const k = await gw.createKey()
  const bad: Array<[string, string]> = [
    ['from=2025-02-30', 'not a calendar day'],
    ['from=yesterday', 'not a day'],
    ['to=2025-1-1', 'not zero-padded'],
    ['from=2025-03-02&to=2025-03-01', 'from after to'],
    ['from=2020-01-01&to=2025-01-01', 'more than a year'],
    ['window=7d', 'unknown parameter'],
    ['from=2025-01-01&from=2025-01-02', 'repeated parameter'],
  ]
  for (const [query, what] of bad) {
    isError(t, await admin('GET', `/admin/keys/${k.id}/usage?${query}`), 400, 'invalid_body', `per key: ${what}`)
    isError(t, await admin('GET', `/admin/usage?${query}`), 400, 'invalid_body', `across keys: ${what}`)
  }
  isError(t, await admin('GET', '/admin/usage?group_by=user'), 400, 'invalid_body', 'unknown group')
  isError(t, await admin('GET', '/admin/usage?granularity=hour'), 400, 'invalid_body', 'unknown granularity')
  isError(
    t,
    await admin('GET', `/admin/keys/${k.id}/usage?group_by=model`),
    400,
    'invalid_body',
    'group_by is for usage across keys',
  )
  isError(t, await admin('GET', '/admin/keys/key_000000000000000000000000/usage'), 404, 'not_found', 'unknown key')
  const noToken = await request(`${gw.url}/admin/usage`)
  isError(t, noToken, 401, 'invalid_admin_token', 'no admin token')
  const apiKey = await request(`${gw.url}/admin/keys/${k.id}/usage`, { headers: { authorization: `Bearer ${k.key}` } })
  isError(t, apiKey, 401, 'invalid_admin_token', 'a key cannot read even its own usage here')
})

t.test(
  'a plans file that names its currency: the usage replies carry it; a code that is not one is refused at boot',
  async (t) => {
    const usd = await startTollgate({
      config: (doc) => {
        doc.plans = {
          defaultTier: 'Open',
          currency: 'USD',
          tiers: { Open: { default: { input_price: 1, output_price: 2 } } },
        }
      },
    })
    t.teardown(() => usd.stop())
    const res = await fetch(`${usd.url}/admin/usage`, { headers: { authorization: `Bearer ${usd.adminToken}` } })
    t.equal(((await res.json()) as UsageReply).currency, 'USD')
    await t.rejects(
      startTollgate({
        config: (doc) => {
          doc.plans = { defaultTier: 'Open', currency: 'euro', tiers: { Open: {} } }
        },
      }),
      /currency/,
      'currency "euro": the gateway does not start, naming the field',
    )
  },
)

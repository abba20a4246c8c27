// Cached tokens priced apart, end to end (issue #38, item 4), on a running gateway whose
// plan prices claude-sonnet-4.5 at the published multipliers (deployed on an `anthropic`
// backend: the fake of the Messages API, whose every reply reports 3,000 tokens read from
// its cache and 700 written) and claude-3-7-sonnet at the plan's own (on the mock, which
// caches a prompt under its prompt_cache_key). Each call is metered with its cache reads
// and writes apart, charged at the multipliers, shown apart in /admin/usage and in the
// portal's CSV, and its key's budget is spent by exactly that cost.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { stringify } from 'yaml'
import { startFakeAnthropic } from '../helpers/fake-anthropic.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { createKeyByFetch, createUser, signInByFetch } from '../portal/helpers.ts'

const CLAUDE = 'claude-sonnet-4.5'
const MOCKED = 'claude-3-7-sonnet'

const fake = await startFakeAnthropic()
t.teardown(() => fake.close())
const reported = fake.options.usage
const PROMPT = reported.input_tokens + reported.cache_creation_input_tokens + reported.cache_read_input_tokens

const dir = mkdtempSync(join(tmpdir(), 'tollgate-cache-pricing-'))
const plansPath = join(dir, 'plans.yaml')
writeFileSync(
  plansPath,
  stringify({
    defaultTier: 'Cached',
    currency: 'EUR',
    tiers: {
      Cached: {
        budget: { amount: 1000, period: 'month' },
        default: {},
        models: {
          // Anthropic's published multipliers: reads 0.1×, writes 1.25×.
          [CLAUDE]: { input_price: 3, output_price: 15 },
          // The plan's own.
          [MOCKED]: { input_price: 2, output_price: 8, cache_read_multiplier: 0.5, cache_write_multiplier: 2 },
        },
      },
    },
  }),
)

const gw = await startTollgate({
  env: { CLAUDE_UPSTREAM_KEY: fake.options.apiKey },
  config: (doc) => {
    doc.plans = plansPath
    doc.backends = {
      ...(doc.backends as object),
      claude: { type: 'anthropic', baseUrl: fake.url, apiKeyEnv: 'CLAUDE_UPSTREAM_KEY' },
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>) {
      if (model.name === CLAUDE) model.deployments = [{ backend: 'claude', model: 'claude-sonnet-4-5-20250929' }]
    }
  },
})
t.teardown(() => gw.stop())
const admin = { authorization: `Bearer ${gw.adminToken}` }

await createUser(gw, 'carol', 'carol-password')
const portal = await signInByFetch(gw.url, 'carol', 'carol-password')

interface Totals {
  requests: number
  input_tokens: number
  output_tokens: number
  cost: number
  cache_read_tokens: number
  cache_write_tokens: number
  cache_read_cost: number
  cache_write_cost: number
}
interface KeyUsage {
  totals: Totals
  data: Array<Totals & { model: string }>
  budgets: Array<{ scope: string; id: string; spent: number; reserved: number }>
}

/** The key's usage once `requests` calls are metered and nothing is held any more. */
async function usageOf(id: string, requests: number): Promise<KeyUsage> {
  const polled = await pollUntil(
    async () => (await (await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: admin })).json()) as KeyUsage,
    (u) => u.totals.requests >= requests && u.budgets.every((b) => b.reserved === 0),
    1000,
    30,
  )
  return polled.value
}

/** Nano-units → currency units, as the gateway writes them in JSON. */
const units = (nanos: number): number => nanos / 1e9

t.test('anthropic backend: reads at 0.1×, writes at 1.25× of the input price, apart everywhere', async (t) => {
  const key = await createKeyByFetch(portal, 'claude-key')
  const openai = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key.secret, maxRetries: 0 })
  const anthropic = new Anthropic({ baseURL: gw.url, apiKey: key.secret, maxRetries: 0 })

  const chat = await openai.chat.completions.create({
    model: CLAUDE,
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Hello' }],
  })
  t.equal(chat.usage?.prompt_tokens, PROMPT, 'the whole prompt, as before')
  t.equal(chat.usage?.prompt_tokens_details?.cached_tokens, reported.cache_read_input_tokens)
  const message = await anthropic.messages
    .stream({ model: CLAUDE, max_tokens: 100, messages: [{ role: 'user', content: 'Hello again' }] })
    .finalMessage()
  t.equal(message.usage.cache_read_input_tokens, reported.cache_read_input_tokens)
  t.equal(message.usage.cache_creation_input_tokens, reported.cache_creation_input_tokens)

  // Per call, per million tokens: 1,234 uncached × 3 + 3,000 read × 0.3 + 700 written × 3.75 + 56 out × 15.
  const read = 3 * 1000 * reported.cache_read_input_tokens * 0.1
  const write = 3 * 1000 * reported.cache_creation_input_tokens * 1.25
  const call = 3000 * reported.input_tokens + read + write + 15_000 * reported.output_tokens
  t.equal(call, 8_067_000, 'one call: 0.008067 EUR')

  const usage = await usageOf(key.id, 2)
  t.strictSame(usage.totals, {
    requests: 2,
    input_tokens: 2 * PROMPT,
    output_tokens: 2 * reported.output_tokens,
    cost: units(2 * call),
    cache_read_tokens: 2 * reported.cache_read_input_tokens,
    cache_write_tokens: 2 * reported.cache_creation_input_tokens,
    cache_read_cost: units(2 * read),
    cache_write_cost: units(2 * write),
    cached_requests: 0,
    batch_requests: 0,
    batch_cost: 0,
  })
  t.match(usage.data, [{ model: CLAUDE, cache_read_tokens: 6000, cache_write_tokens: 1400 }])
  const budget = usage.budgets.find((b) => b.scope === 'key')
  t.equal(budget?.spent, units(2 * call), "the key's budget is spent by exactly the cached cost")

  // Prometheus: input stays the whole prompt; the cache's parts are counted apart.
  const series = (kind: string): RegExp =>
    new RegExp(`^tollgate_cache_tokens_total\\{model="${CLAUDE}",tier="Cached",kind="${kind}"\\} (\\d+)$`, 'm')
  const scraped = await pollUntil(
    async () => (await fetch(`${gw.metricsUrl}/metrics`)).text(),
    // Both calls charged (each is counted once it is metered).
    (text) => Number(series('write').exec(text)?.[1]) === 2 * reported.cache_creation_input_tokens,
    1000,
    30,
  )
  const metrics = scraped.value
  t.equal(Number(series('read').exec(metrics)?.[1]), 2 * reported.cache_read_input_tokens, 'cache reads counted apart')
  t.equal(Number(series('write').exec(metrics)?.[1]), 2 * reported.cache_creation_input_tokens, 'and writes')
  t.match(
    metrics,
    new RegExp(`^tollgate_tokens_total\\{model="${CLAUDE}",tier="Cached",direction="input"\\} ${2 * PROMPT}$`, 'm'),
    'input: the whole prompt, as before',
  )

  const byModel = (await (
    await fetch(`${gw.url}/admin/usage?group_by=model&model=${CLAUDE}`, { headers: admin })
  ).json()) as { data: Array<Totals & { model: string }> }
  t.match(byModel.data, [
    { model: CLAUDE, cache_read_cost: units(2 * read), cache_write_cost: units(2 * write), cost: units(2 * call) },
  ])

  const csv = await (await portal.get(`/portal/usage.csv?key=${key.id}`)).text()
  const [header, line] = csv.split('\r\n')
  t.equal(
    header,
    'day,key_id,key_name,model,requests,input_tokens,output_tokens,cost,currency,cache_read_tokens,cache_write_tokens,cache_read_cost,cache_write_cost,cached_requests,batch_requests,batch_cost',
  )
  t.match(
    line,
    new RegExp(`,${key.id},claude-key,${CLAUDE},2,${2 * PROMPT},112,0.016134,EUR,6000,1400,0.0018,0.00525,0,0,0.00$`),
  )
})

t.test("mock: a prompt cached under its prompt_cache_key, priced at the plan's multipliers", async (t) => {
  const key = await createKeyByFetch(portal, 'mock-key')
  const openai = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key.secret, maxRetries: 0 })
  const system = { role: 'system' as const, content: 'You are a careful assistant. '.repeat(40) }
  const first = await openai.chat.completions.create({
    model: MOCKED,
    max_tokens: 20,
    prompt_cache_key: 'cache-pricing-test',
    messages: [system, { role: 'user', content: 'First question' }],
  })
  const second = await openai.chat.completions.create({
    model: MOCKED,
    max_tokens: 20,
    prompt_cache_key: 'cache-pricing-test',
    messages: [
      system,
      { role: 'user', content: 'First question' },
      { role: 'assistant', content: 'First answer' },
      { role: 'user', content: 'Second question' },
    ],
  })
  type Details = { cached_tokens?: number; cache_write_tokens?: number }
  const parts = (u: OpenAI.CompletionUsage | undefined): { prompt: number; out: number; r: number; w: number } => {
    const details = (u?.prompt_tokens_details ?? {}) as Details
    return {
      prompt: u?.prompt_tokens ?? 0,
      out: u?.completion_tokens ?? 0,
      r: details.cached_tokens ?? 0,
      w: details.cache_write_tokens ?? 0,
    }
  }
  const a = parts(first.usage)
  const b = parts(second.usage)
  t.ok(a.r === 0 && a.w === a.prompt && a.prompt > 0, `the first call writes its whole prompt (${a.w})`)
  t.ok(b.r > 0 && b.r < b.prompt && b.w === b.prompt - b.r, `the second reads ${b.r}, writes ${b.w}`)

  // At 2.00 in, 8.00 out per million: a read at 0.5× is 1,000 nano-units a token, a write at 2× 4,000.
  const cost = (p: typeof a): number => 2000 * (p.prompt - p.r - p.w) + 1000 * p.r + 4000 * p.w + 8000 * p.out
  const usage = await usageOf(key.id, 2)
  t.strictSame(usage.totals, {
    requests: 2,
    input_tokens: a.prompt + b.prompt,
    output_tokens: a.out + b.out,
    cost: units(cost(a) + cost(b)),
    cache_read_tokens: b.r,
    cache_write_tokens: a.w + b.w,
    cache_read_cost: units(1000 * b.r),
    cache_write_cost: units(4000 * (a.w + b.w)),
    cached_requests: 0,
    batch_requests: 0,
    batch_cost: 0,
  })
  t.equal(usage.budgets.find((b) => b.scope === 'key')?.spent, units(cost(a) + cost(b)), 'the budget, exactly')

  const byKey = (await (await fetch(`${gw.url}/admin/usage?group_by=key`, { headers: admin })).json()) as {
    data: Array<Totals & { key_id: string }>
  }
  t.match(
    byKey.data.find((r) => r.key_id === key.id),
    { cache_read_tokens: b.r, cache_write_tokens: a.w + b.w },
  )
  const csv = await (await portal.get('/portal/usage.csv')).text()
  t.match(csv, `,${key.id},mock-key,${MOCKED},2,${a.prompt + b.prompt},${a.out + b.out},`)
  t.match(csv, new RegExp(`,mock-key,${MOCKED},.*,EUR,${b.r},${a.w + b.w},`))

  // Without a key the mock caches nothing: charged as plain input.
  const plain = await openai.chat.completions.create({
    model: MOCKED,
    max_tokens: 20,
    messages: [system, { role: 'user', content: 'First question' }],
  })
  t.equal(parts(plain.usage).r + parts(plain.usage).w, 0)
})

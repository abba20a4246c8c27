// A call that names no output cap, on a running gateway in front of upstreams that never stop
// by themselves (test/helpers/fake-upstream.ts `uncappedTokens`): the tier's outputCap either
// sends the reserved cap upstream (`send`, the default) or holds the model's own ceiling
// (`ceiling`). Either way a budget is never overspent and a window's metered output stays
// within output_tpm, however many calls run at once; a client's own cap goes as it came.
import OpenAI from 'openai'
import t from 'tap'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const UNCAPPED = 16_000
/** The model whose most output per reply is known, and what its upstream writes uncapped. */
const CEILING = 2_000
const PRICED = { input_price: 0, output_price: 1000 }

let gw: RunningTollgate
let up: FakeUpstream
let ceilingUp: FakeUpstream

t.before(async () => {
  // Headers come after a while: the six calls below are all in flight at once.
  up = await startFakeUpstream({ uncappedTokens: UNCAPPED, headerDelayMs: 300 })
  ceilingUp = await startFakeUpstream({ uncappedTokens: CEILING })
  gw = await startTollgate({
    config: (doc) => {
      doc.backends = {
        ...(doc.backends as object),
        up: { type: 'openai', baseUrl: up.url },
        ceilingUp: { type: 'openai', baseUrl: ceilingUp.url },
      }
      doc.models = [
        ...(doc.models as object[]),
        { name: 'open-model', kind: 'chat', deployments: [{ backend: 'up' }] },
        {
          name: 'ceiling-model',
          kind: 'chat',
          meta: { max_output_length: CEILING },
          deployments: [{ backend: 'ceilingUp' }],
        },
      ]
      doc.plans = {
        defaultTier: 'Send',
        tiers: {
          // 1,024 output tokens (defaultMaxTokens) cost 1.024 EUR: four calls fit the budget.
          Send: { budget: { amount: 5, period: 'month' }, default: { ...PRICED, output_tpm: 8000 } },
          Ceiling: { outputCap: 'ceiling', default: { ...PRICED, output_tpm: 1500 } },
          CeilingWide: { outputCap: 'ceiling', default: { ...PRICED, output_tpm: 100_000 } },
        },
      }
    },
  })
})
t.teardown(async () => {
  await gw.stop()
  await up.close()
  await ceilingUp.close()
})

const clientOf = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })

interface KeyUsage {
  readonly totals: { readonly requests: number; readonly output_tokens: number }
  readonly budgets: ReadonlyArray<{ readonly amount: number; readonly spent: number; readonly reserved: number }>
}
async function usageOf(id: string): Promise<KeyUsage> {
  const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  return (await res.json()) as KeyUsage
}

/** One call without a cap: its reply's output tokens, or the status it was refused with. */
async function uncapped(client: OpenAI, model: string, stream: boolean): Promise<number> {
  const messages = [{ role: 'user' as const, content: 'write until you are stopped' }]
  try {
    if (!stream) return (await client.chat.completions.create({ model, messages })).usage?.completion_tokens ?? -1
    let tokens = -1
    const chunks = await client.chat.completions.create({
      model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    })
    for await (const chunk of chunks) if (chunk.usage) tokens = chunk.usage.completion_tokens
    return tokens
  } catch (err) {
    if (err instanceof OpenAI.APIError) return -(err.status ?? 1)
    throw err
  }
}

t.test('send: six calls at once against a 5 EUR budget and output_tpm 8,000 stay within both', async (t) => {
  const { key, id } = await gw.createKey({ tier: 'Send', owner: 'ada' })
  const client = clientOf(key)
  const outcomes = await Promise.all(Array.from({ length: 6 }, (_, i) => uncapped(client, 'open-model', i % 2 === 0)))
  const served = outcomes.filter((o) => o >= 0)
  t.same(served, [1024, 1024, 1024, 1024], 'four fit the budget, each written to the cap it was sent')
  t.same(
    outcomes.filter((o) => o < 0),
    [-429, -429],
    'the other two are refused',
  )
  const sent = up.requests.map((r) => r.json as Record<string, unknown>)
  t.equal(sent.length, 4, 'only the admitted calls reached the upstream')
  t.ok(
    sent.every((body) => body.max_tokens === 1024 && !('max_completion_tokens' in body)),
    'each was sent the cap it holds',
  )
  const usage = await pollUntil(
    () => usageOf(id),
    (u) => u.totals.output_tokens >= 4096 && u.budgets[0]?.reserved === 0,
  )
  t.ok(usage.met, JSON.stringify(usage.value))
  const budget = usage.value.budgets[0]
  t.ok(budget !== undefined && budget.spent <= budget.amount, `spent ${budget?.spent} of ${budget?.amount}`)
  t.equal(budget?.spent, 4.096)
  t.ok(usage.value.totals.output_tokens <= 8000, `metered output ${usage.value.totals.output_tokens} within output_tpm`)
})

t.test("a client's own cap goes upstream as it came, and nothing is added beside it", async (t) => {
  const { key } = await gw.createKey({ tier: 'Send', owner: 'bob' })
  const client = clientOf(key)
  const before = up.requests.length
  const messages = [{ role: 'user' as const, content: 'hi' }]
  const a = await client.chat.completions.create({ model: 'open-model', messages, max_tokens: 50 })
  const b = await client.chat.completions.create({ model: 'open-model', messages, max_completion_tokens: 60 })
  t.same([a.usage?.completion_tokens, b.usage?.completion_tokens], [50, 60])
  const sent = up.requests.slice(before).map((r) => r.json as Record<string, unknown>)
  t.same(
    sent.map((body) => [body.max_tokens ?? null, body.max_completion_tokens ?? null]),
    [
      [50, null],
      [null, 60],
    ],
  )
})

t.test("ceiling: nothing is sent, and the call holds the model's own most output", async (t) => {
  const narrow = clientOf((await gw.createKey({ tier: 'Ceiling', owner: 'cy' })).key)
  const refused = await narrow.chat.completions
    .create({ model: 'ceiling-model', messages: [{ role: 'user', content: 'hi' }] })
    .then(
      () => null,
      (err: unknown) => err,
    )
  t.ok(refused instanceof OpenAI.RateLimitError, 'its ceiling (2,000) is more than the output_tpm (1,500)')
  t.match((refused as Error).message, "the model's most output per reply")
  t.equal(ceilingUp.requests.length, 0)

  const wide = clientOf((await gw.createKey({ tier: 'CeilingWide', owner: 'cy' })).key)
  const reply = await wide.chat.completions.create({
    model: 'ceiling-model',
    messages: [{ role: 'user', content: 'hi' }],
  })
  t.equal(reply.usage?.completion_tokens, CEILING, 'the model wrote what it can')
  t.notOk('max_tokens' in (ceilingUp.requests[0]?.json as object), 'no cap sent')

  const before = up.requests.length
  const fallback = await narrow.chat.completions.create({
    model: 'open-model',
    messages: [{ role: 'user', content: 'hi' }],
  })
  t.equal(fallback.usage?.completion_tokens, 1024, 'a model without a known ceiling: a cap sent, as with send')
  t.equal((up.requests[before]?.json as Record<string, unknown>).max_tokens, 1024)
})

t.test('a stored request (/queue, Prefer: respond-async) runs with the cap it was accepted with', async (t) => {
  const { key } = await gw.createKey({ tier: 'Send', owner: 'dee' })
  const before = up.requests.length
  const accepted = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'respond-async' },
    body: JSON.stringify({ model: 'open-model', messages: [{ role: 'user', content: 'later' }] }),
  })
  t.equal(accepted.status, 202)
  const { id } = (await accepted.json()) as { id: string }
  const done = await pollUntil(
    async () =>
      (await (
        await fetch(`${gw.url}/queue/requests/${id}`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as { status: string; response?: { usage: { output_tokens: number } } },
    (r) => r.status !== 'queued' && r.status !== 'in_progress',
  )
  t.match(done.value, { status: 'completed', response: { usage: { output_tokens: 1024 } } })
  t.equal((up.requests[before]?.json as Record<string, unknown>).max_tokens, 1024)
})

t.test("the admin API shows each tier's outputCap", async (t) => {
  const res = await fetch(`${gw.url}/admin/tiers`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  const tiers = ((await res.json()) as { data: Array<{ name: string; output_cap: string }> }).data
  t.same(
    tiers.map((tier) => [tier.name, tier.output_cap]),
    [
      ['Send', 'send'],
      ['Ceiling', 'ceiling'],
      ['CeilingWide', 'ceiling'],
    ],
  )
})

// Priority classes (OpenAI's service_tier) on a running gateway, through the official SDK:
// the reply says the class that served it (chat completions and responses, whole and
// streamed), a class the tier does not allow is refused with 400 before anything is
// admitted, 'auto' is the tier's default class, each class is charged at its price (flex
// cheaper, priority dearer, exact in nano-units), and on /v2 flex is the first refused as
// a key fills up while default calls still have the room kept for them.
import OpenAI from 'openai'
import t from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { PRICED, PRICED_MODEL, startWithTiers } from '../helpers/plans.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = PRICED_MODEL

let gw: RunningTollgate
t.before(async () => {
  gw = await startWithTiers('Open', {
    // Every class, at the documented prices (flex 0.5×, priority 2×).
    Open: { default: { rpm: 1000, ...PRICED } },
    // No priority; a call that names no class is flex; flex may fill half of each limit.
    Narrow: {
      serviceTiers: { allow: ['default', 'flex'], default: 'flex', prices: { flex: 0.25 }, flexShare: 0.5 },
      default: { rpm: 4, ...PRICED },
    },
  })
})
t.teardown(() => gw.stop())

const clientOf = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
interface Totals {
  requests: number
  cost: number
  input_tokens: number
  output_tokens: number
}
const totalsOf = async (id: string): Promise<Totals> =>
  (
    (await (
      await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
    ).json()) as { totals: Totals }
  ).totals
const ask = (tier?: string): OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'hello there' }],
  max_tokens: 8,
  ...(tier === undefined ? {} : { service_tier: tier as 'auto' }),
})

t.test('the reply says the class that served it, whole and streamed, on chat and responses', async (t) => {
  const sdk = clientOf((await gw.createKey({ tier: 'Open' })).key)
  t.equal((await sdk.chat.completions.create(ask('priority'))).service_tier, 'priority')
  t.equal((await sdk.chat.completions.create(ask('flex'))).service_tier, 'flex')
  t.equal((await sdk.chat.completions.create(ask('fast'))).service_tier, 'priority', "'fast' is priority")
  t.equal((await sdk.chat.completions.create(ask())).service_tier, 'default', 'none named: the tier default')

  const chunks: Array<string | null | undefined> = []
  for await (const chunk of await sdk.chat.completions.create({ ...ask('flex'), stream: true }))
    chunks.push(chunk.service_tier)
  t.ok(chunks.length > 1, `${chunks.length} chunks`)
  t.same([...new Set(chunks)], ['flex'], 'every chunk says flex')

  const response = await sdk.responses.create({ model: MODEL, input: 'hello', service_tier: 'priority' })
  t.equal(response.service_tier, 'priority')
  const tiers = new Set<string | null | undefined>()
  for await (const event of await sdk.responses.create({
    model: MODEL,
    input: 'hello',
    service_tier: 'flex',
    stream: true,
  })) {
    if ('response' in event) tiers.add(event.response.service_tier)
  }
  t.same([...tiers], ['flex'], 'every event that carries the response says flex')
})

t.test("a class the tier does not allow is refused with 400; 'auto' is the tier's default", async (t) => {
  const sdk = clientOf((await gw.createKey({ tier: 'Narrow' })).key)
  for (const tier of ['priority', 'fast', 'scale']) {
    const error = await sdk.chat.completions.create(ask(tier)).catch((e: unknown) => e)
    t.ok(error instanceof OpenAI.BadRequestError, `${tier}: 400`)
    const body = (error as InstanceType<typeof OpenAI.BadRequestError>).error as { param?: string; message?: string }
    t.equal(body.param, 'service_tier')
    t.match(body.message, /service_tier/)
  }
  t.equal((await sdk.chat.completions.create(ask('auto'))).service_tier, 'flex')
  t.equal((await sdk.chat.completions.create(ask('default'))).service_tier, 'default')
})

t.test('each class is charged at its price, exact in nano-units', async (t) => {
  const cases: Array<[string, number]> = [
    ['default', 1],
    ['flex', 0.5],
    ['priority', 2],
  ]
  for (const [tier, multiplier] of cases) {
    const { key, id } = await gw.createKey({ tier: 'Open' })
    const reply = await clientOf(key).chat.completions.create(ask(tier))
    const usage = reply.usage!
    const totals = await pollUntil(
      () => totalsOf(id),
      (x) => x.requests === 1,
      100,
      50,
    )
    t.ok(totals.met, `${tier}: metered`)
    const { input_tokens: input, output_tokens: output, cost } = totals.value
    t.equal(input, usage.prompt_tokens)
    t.equal(output, usage.completion_tokens)
    // Prices in micro-units per million tokens, times the multiplier, then ÷ 1000: nano-units.
    const nanos = Math.round((1.1e6 * multiplier * input + 3.3e6 * multiplier * output) / 1000)
    t.equal(Math.round(cost * 1e9), nanos, `${tier}: ${multiplier}× the plan's price (${cost})`)
  }
})

t.test('/v2: flex is refused first as a key fills up; the room kept lets default calls through', async (t) => {
  const sdk = clientOf((await gw.createKey({ tier: 'Narrow' })).key)
  // rpm 4, flexShare 0.5: flex calls (this tier's default) fill 2 of the 4.
  t.equal((await sdk.chat.completions.create(ask())).service_tier, 'flex')
  t.equal((await sdk.chat.completions.create(ask('flex'))).service_tier, 'flex')
  const refused = await sdk.chat.completions.create(ask('flex')).catch((e: unknown) => e)
  t.ok(refused instanceof OpenAI.RateLimitError, 'the third flex call: 429')
  t.equal((refused as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('x-ratelimit-limit-requests'), '2')
  t.equal((await sdk.chat.completions.create(ask('default'))).service_tier, 'default', 'default still runs')
  t.equal((await sdk.chat.completions.create(ask('default'))).service_tier, 'default', 'to the whole limit')
  const full = await sdk.chat.completions.create(ask('default')).catch((e: unknown) => e)
  t.ok(full instanceof OpenAI.RateLimitError, 'then default is refused too')
})

t.test("a key's own default class, when its tier allows it; null gives the tier's back", async (t) => {
  const created = await gw.createKey({ tier: 'Open', service_tier: 'flex' })
  t.equal(created.service_tier, 'flex', 'the admin view shows it')
  const sdk = clientOf(created.key)
  t.equal((await sdk.chat.completions.create(ask())).service_tier, 'flex', 'none named: the key default')
  t.equal((await sdk.chat.completions.create(ask('auto'))).service_tier, 'flex', "'auto': the key default")
  t.equal((await sdk.chat.completions.create(ask('priority'))).service_tier, 'priority', 'named: as named')
  const patched = await fetch(`${gw.url}/admin/keys/${created.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ service_tier: null }),
  })
  t.equal(patched.status, 200)
  t.notOk('service_tier' in ((await patched.json()) as object), 'unset: not shown')
  // The key cache may hold the old record for a moment.
  const back = await pollUntil(
    async () => (await sdk.chat.completions.create(ask())).service_tier,
    (tier) => tier === 'default',
    100,
    50,
  )
  t.ok(back.met, "the tier's default again")
  const narrow = clientOf((await gw.createKey({ tier: 'Narrow', service_tier: 'priority' })).key)
  t.equal(
    (await narrow.chat.completions.create(ask())).service_tier,
    'flex',
    'a default its tier forbids: the tier default',
  )
  const bad = await fetch(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tier: 'Open', service_tier: 'scale' }),
  })
  t.equal(bad.status, 400, 'a class the gateway does not offer cannot be set')
})

// Budgets on running gateways, driven the way users do: the openai SDK gets insufficient_quota
// and does not retry it; /queue answers a spent budget at once instead of waiting; the
// admin API sets budgets and shows what is left; three gateways on one Redis admit exactly
// what fits. Calls are priced by a key override so that their cost is exact: only output
// tokens cost (0.001 EUR each), and the mock writes exactly max_tokens of them.
import OpenAI from 'openai'
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { onSharedRedis, startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { deleteUnder } from '../helpers/redis.ts'
import { pollUntil } from '../helpers/poll.ts'
import { redisClient } from './helpers.ts'

const MODEL = 'gpt-oss-120b'
const MAX_TOKENS = 10
/** One call: 10 output tokens at 1,000 EUR per million = 0.01 EUR. */
const CALL_EUR = 0.01
const PRICED = {
  '*': { input_price: 0, output_price: 1000, rpm: 1_000_000, input_tpm: 1_000_000_000, output_tpm: 1_000_000_000 },
}

/** What the admin replies this file reads. */
interface AdminReply {
  readonly budgets?: unknown
  readonly error?: { readonly message: string; readonly code: string; readonly param: string | null }
  readonly [field: string]: unknown
}

async function admin(
  gw: RunningTollgate,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: AdminReply }> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, json: (await res.json()) as AdminReply }
}

/** An SDK client that counts every HTTP exchange it makes (its retries included). */
function countingClient(gw: RunningTollgate, key: string, maxRetries: number): { client: OpenAI; statuses: number[] } {
  const statuses: number[] = []
  const client = new OpenAI({
    apiKey: key,
    baseURL: `${gw.url}/v2`,
    maxRetries,
    fetch: async (url, init) => {
      const res = await fetch(url, init)
      statuses.push(res.status)
      return res
    },
  })
  return { client, statuses }
}

const chat = (client: OpenAI) =>
  client.chat.completions.create({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }] })

t.test(
  'embedded: the SDK gets insufficient_quota and does not retry; /queue answers at once; the admin sees what is left',
  async (t) => {
    const gw = await startTollgate()
    t.teardown(() => gw.stop())
    const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: 'ada', limits: PRICED })
    const set = await admin(gw, 'PUT', `/admin/budgets/key/${id}`, {
      amount: 3 * CALL_EUR,
      period: 'month',
      time_zone: 'Europe/Berlin',
    })
    t.equal(set.status, 200, JSON.stringify(set.json))
    t.match(set.json, {
      object: 'budget',
      scope: 'key',
      id,
      amount: 0.03,
      spent: 0,
      remaining: 0.03,
      time_zone: 'Europe/Berlin',
      currency: 'EUR',
      origin: 'set',
    })

    const { client, statuses } = countingClient(gw, key, 2)
    for (let i = 0; i < 3; i++) await chat(client)
    t.same(statuses, [200, 200, 200])
    const error = await chat(client).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(error instanceof OpenAI.RateLimitError, 'a 429')
    const apiError = error as InstanceType<typeof OpenAI.RateLimitError>
    t.equal(apiError.code, 'insufficient_quota')
    t.equal(apiError.type, 'insufficient_quota')
    t.match(apiError.message, `the monthly budget of key ${id} (0.03 EUR per month, Europe/Berlin)`)
    t.match(
      apiError.message,
      /It resets at \d{4}-\d\d-01T00:00:00\+0[12]:00 \(in (\d+h)?(\d+m)?\d+s\)\./,
      'in whole seconds',
    )
    t.same(statuses, [200, 200, 200, 429], 'one exchange for the refused call: the SDK (maxRetries 2) did not retry it')
    const calls = (): Array<Record<string, unknown>> =>
      gw.logs().filter((l) => l.msg === 'request' && l.keyId === id && l.path === '/v2/chat/completions')
    const forKey = (
      await pollUntil(
        async () => calls(),
        (c) => c.length >= 4,
        500,
      )
    ).value
    t.same(
      forKey.map((l) => [l.status, l.error ?? null]),
      [
        [200, null],
        [200, null],
        [200, null],
        [429, 'budget_exhausted'],
      ],
      'the gateway saw four calls, and sent three upstream (backend named on those only)',
    )
    t.same(
      forKey.map((l) => l.backend ?? null),
      ['mock', 'mock', 'mock', null],
    )

    // /queue does not wait for the period's end: the same 429, at once.
    const started = Date.now()
    const queued = await fetch(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }] }),
    })
    const queuedBody = (await queued.json()) as { error: { code: string } }
    t.equal(queued.status, 429)
    t.equal(queuedBody.error.code, 'insufficient_quota')
    t.equal(queued.headers.get('x-should-retry'), 'false')
    t.ok(Date.now() - started < 5000, 'answered without waiting in line')

    const usage = await admin(gw, 'GET', `/admin/keys/${id}/usage`)
    t.match(usage.json.budgets, [{ scope: 'key', id, spent: 0.03, remaining: 0, reserved: 0 }])
    const all = await admin(gw, 'GET', '/admin/usage')
    t.match(all.json.budgets, [{ scope: 'key', id, spent: 0.03 }])

    // Raised: the key runs again, what was spent stays spent.
    const raised = await admin(gw, 'PUT', `/admin/budgets/key/${id}`, {
      amount: 4 * CALL_EUR,
      period: 'month',
      time_zone: 'Europe/Berlin',
    })
    t.match(raised.json, { spent: 0.03, remaining: 0.01 })
    await chat(client)
    t.equal(statuses.at(-1), 200)

    // An owner budget covers the owner's other keys too.
    const other = await gw.createKey({ tier: 'Standard4000', owner: 'ada', limits: PRICED })
    t.equal((await admin(gw, 'PUT', '/admin/budgets/owner/ada', { amount: 0.015, period: 'day' })).status, 200)
    const second = countingClient(gw, other.key, 2)
    await chat(second.client)
    await t.rejects(chat(second.client), { status: 429, code: 'insufficient_quota' })
    t.match((await admin(gw, 'GET', '/admin/usage?owner=ada')).json.budgets, [
      { scope: 'owner', id: 'ada', spent: 0.01 },
    ])
    // Cleared: the owner's keys are free of it again.
    t.equal((await admin(gw, 'DELETE', '/admin/budgets/owner/ada')).status, 200)
    await chat(second.client)

    // Bad input: the admin API says what is wrong.
    const bad = await admin(gw, 'PUT', `/admin/budgets/key/${id}`, { amount: -1, period: 'fortnight' })
    t.equal(bad.status, 400)
    t.match(bad.json.error, { code: 'invalid_body', param: 'amount' })
    const zone = await admin(gw, 'PUT', `/admin/budgets/tenant/acme`, {
      amount: 1,
      period: 'day',
      time_zone: 'Mars/Olympus',
    })
    t.equal(zone.status, 400)
    t.match(zone.json.error?.message, 'IANA time zone')
    t.equal((await admin(gw, 'PUT', '/admin/budgets/key/key_nope', { amount: 1, period: 'day' })).status, 404)
    t.equal((await admin(gw, 'PUT', '/admin/budgets/team/x', { amount: 1, period: 'day' })).status, 404)
    t.equal((await admin(gw, 'DELETE', '/admin/budgets/tenant/nobody')).status, 404)
  },
)

t.test(
  'three gateways on one Redis: 200 concurrent calls against a budget that fits 20 admit exactly 20',
  async (t) => {
    const prefix = `tgtest:budgets:${randomBytes(6).toString('hex')}:`
    const shared = onSharedRedis(prefix)
    const options = {
      ...shared,
      config: (doc: Record<string, unknown>) => {
        shared.config?.(doc)
        // The shared Redis may be slow on a busy machine: an admission waits for it, not for an outage.
        doc.limits = { redisTimeoutMs: 5000 }
      },
    }
    // One after another: three boots at once on a busy machine can take longer than a start may.
    const gateways: RunningTollgate[] = []
    t.teardown(() => Promise.all(gateways.map((g) => g.stop())))
    for (let i = 0; i < 3; i++) gateways.push(await startTollgate(options))
    const redis = redisClient()
    t.teardown(async () => {
      await deleteUnder(redis, prefix)
      redis.disconnect()
    })
    const [first] = gateways
    if (first === undefined) throw new Error('no gateway')
    const { key, id } = await first.createKey({ tier: 'Standard4000', limits: PRICED })
    t.equal(
      (await admin(first, 'PUT', `/admin/budgets/key/${id}`, { amount: 20 * CALL_EUR, period: 'week' })).status,
      200,
    )
    // Another instance sees a budget set elsewhere within budgets.refreshMs (docs/budgets.md):
    // the burst starts once every instance lists it.
    for (const gw of gateways) {
      const seen = await pollUntil(
        async () => (await admin(gw, 'GET', '/admin/budgets')).json,
        (reply) => JSON.stringify(reply.data ?? []).includes(id),
        500,
        20,
      )
      t.ok(seen.met, `${gw.url} lists the budget`)
    }
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const gw = gateways[i % 3] as RunningTollgate
        const res = await fetch(`${gw.url}/v2/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }] }),
        })
        const body = (await res.json()) as { error?: { code: string } }
        return { status: res.status, code: body.error?.code ?? null }
      }),
    )
    const seen = new Map<string, number>()
    for (const o of outcomes) seen.set(`${o.status} ${o.code}`, (seen.get(`${o.status} ${o.code}`) ?? 0) + 1)
    t.comment(`outcomes: ${JSON.stringify([...seen])}`)
    t.equal(outcomes.filter((o) => o.status === 200).length, 20, 'exactly 20 admitted, across the three')
    t.equal(outcomes.filter((o) => o.status === 429).length, 180, 'the rest refused')
    t.ok(
      outcomes.every((o) => o.status === 200 || o.code === 'insufficient_quota' || o.code === 'rate_limit_exceeded'),
      'refused as spent, or as held by calls still in flight',
    )
    for (const gw of gateways) {
      const usage = await admin(gw, 'GET', `/admin/keys/${id}/usage`)
      t.match(
        usage.json.budgets,
        [{ scope: 'key', id, spent: 0.2, remaining: 0, reserved: 0 }],
        'every gateway sees the same state',
      )
    }
  },
)

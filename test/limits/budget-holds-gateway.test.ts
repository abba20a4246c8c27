// Issue #36, item 1, on running gateways: a budget's hold lasts as long as its call. Two
// streams that hold a budget whole outlive the rate-limit window they were admitted in
// (limits.windowMs of 1 s, streams of about 4 s); a third call is refused before the window
// ends and after it, and admitted once the streams have ended. On the old code the holds
// lapsed with the window and the third call was admitted while the two still ran, spending
// the budget 1.5 times over. Embedded, and on Redis.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { onSharedRedis, startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'gpt-oss-120b'
const MAX_TOKENS = 100
/** Only output tokens cost: 1,000 EUR per million, so a call of 100 tokens costs 0.1 EUR. */
const PRICED = {
  '*': { input_price: 0, output_price: 1000, rpm: 1_000_000, input_tpm: 1_000_000_000, output_tpm: 1_000_000_000 },
}
const WINDOW_MS = 1000

async function admin(gw: RunningTollgate, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

const call = (gw: RunningTollgate, key: string, stream: boolean): Promise<Response> =>
  fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: MAX_TOKENS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  })

for (const store of ['embedded', 'redis'] as const) {
  t.test(`${store}: two streams hold the budget past their window, until they end`, async (t) => {
    const shared = store === 'redis' ? onSharedRedis(`tgtest:holds:${randomBytes(6).toString('hex')}:`) : {}
    const gw = await startTollgate({
      ...shared,
      config: (doc) => {
        shared.config?.(doc)
        ;(doc.limits as Record<string, unknown>).windowMs = WINDOW_MS
        // 25 tokens a second: a call of 100 streams for about 4 s, four windows.
        Object.assign((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}, { tokensPerSecond: 25 })
      },
    })
    t.teardown(() => gw.stop())
    const { key, id } = await gw.createKey({ tier: 'Standard4000', limits: PRICED })
    t.equal((await admin(gw, 'PUT', `/admin/budgets/key/${id}`, { amount: 0.2, period: 'month' })).status, 200)
    const reserved = async (): Promise<number> => {
      const usage = (await (await admin(gw, 'GET', `/admin/keys/${id}/usage`)).json()) as {
        budgets: Array<{ reserved: number; spent: number }>
      }
      return usage.budgets[0]?.reserved ?? -1
    }

    const streams = await Promise.all([call(gw, key, true), call(gw, key, true)])
    t.same(
      streams.map((r) => r.status),
      [200, 200],
      'two calls hold the budget whole',
    )
    const admittedAt = Date.now()
    const refused = await call(gw, key, false)
    t.equal(refused.status, 429, 'a third is refused while they run')
    t.match(await refused.json(), { error: { code: 'rate_limit_exceeded' } })
    // The window the streams were admitted in ends (a bounded wait for a time-based window).
    await pollUntil(
      async () => Date.now() - admittedAt,
      (ms) => ms > 2 * WINDOW_MS,
      100,
      50,
    )
    t.equal(await reserved(), 0.2, 'two windows later, the running streams still hold the budget')
    const after = await call(gw, key, false)
    t.equal(after.status, 429, 'and a third call is still refused')
    await after.arrayBuffer()
    // The streams end; their settles spend the budget, nothing held.
    await Promise.all(streams.map((r) => r.text()))
    const settled = await pollUntil(reserved, (r) => r === 0, 200, 25)
    t.ok(settled.met, 'nothing held once they ended')
    const usage = (await (await admin(gw, 'GET', `/admin/keys/${id}/usage`)).json()) as {
      budgets: Array<{ spent: number; remaining: number }>
    }
    t.match(usage.budgets[0], { spent: 0.2, remaining: 0 }, 'spent never passed the amount')
  })
}

// queue.fairShares: false turns fair shares off (docs/limits.md "Fair shares"): no counter is
// built, so no call is charged and the capacity line stays first come first served. On a
// running gateway, a served call moves tollgate_fair_share_weighted_tokens_total only when
// they are on.
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { createFairSharesFromConfig } from '../../src/fairness/index.ts'
import { createLogger } from '../../src/observability/logger.ts'

const log = createLogger('silent')
const plans = () => ({ defaultTier: 'T', tiers: {} }) as never

t.test('createFairSharesFromConfig builds none when the switch is off', async (t) => {
  const store = { keyPrefix: 'tgtest:fair-switch:' } as never
  t.equal(
    createFairSharesFromConfig({ store, queue: { fairShares: false } as never }, undefined, log, plans),
    undefined,
  )
  t.ok(createFairSharesFromConfig({ store, queue: { fairShares: true } as never }, undefined, log, plans))
})

async function servedWeighted(fairShares: boolean | undefined): Promise<{ status: number; sample: boolean }> {
  const gw = await startTollgate({
    config: (doc) => {
      if (fairShares !== undefined) (doc.queue as Record<string, unknown>).fairShares = fairShares
    },
  })
  try {
    const { key } = await gw.createKey({ name: 'switch' })
    const res = await fetch(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    })
    await res.text()
    const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
    return { status: res.status, sample: /^tollgate_fair_share_weighted_tokens_total\{/m.test(metrics) }
  } finally {
    await gw.stop()
  }
}

t.test('on a running gateway: charged by default, not at all with queue.fairShares false', async (t) => {
  const on = await servedWeighted(undefined)
  t.equal(on.status, 200)
  t.ok(on.sample, 'the default (on) charged the served call to its tier')
  const off = await servedWeighted(false)
  t.equal(off.status, 200, 'the call is served all the same')
  t.notOk(off.sample, 'off: no fair-share charge at all')
})

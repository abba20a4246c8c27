// The limiter with fair-share charges (src/fairness/shares.ts withFairShares): a call is
// charged its estimate (its learned rate estimate when it has one) over its tier's weight
// when admitted, put right to what it used when it settles, given back whole when no
// upstream served it; the metric counts served tokens over the weight; a store that fails
// refuses nothing.
import t from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import { captureLog, quietMetrics } from '../limits/helpers.ts'
import type { PlansConfig } from '../../src/config/schema.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { createFairShares, withFairShares } from '../../src/fairness/index.ts'
import { memoryFairStore, type FairStore } from '../../src/fairness/store.ts'

const plans = (): PlansConfig => ({ tiers: { One: {}, Two: { fairShare: { weight: 2 } } } }) as unknown as PlansConfig
const request = (keyId: string, tier: string, owner?: string) => ({
  keyId,
  ...(owner === undefined ? {} : { owner }),
  tier,
  model: 'm',
  limits: {},
  estimate: { inputTokens: 10, outputTokens: 1024 },
})

t.test('charged at admission, put right at settlement, given back when withdrawn', async (t) => {
  const store = memoryFairStore()
  const metrics = createMetrics({ defaultMetrics: false })
  const shares = createFairShares({ store, plans, log: captureLog().log, metrics, now: () => 1000 })
  const limiter = withFairShares(
    createLimiter({ log: captureLog().log, metrics: quietMetrics() }),
    shares,
    plans,
    metrics,
  )
  t.teardown(() => limiter.close())
  const counters = async (...parties: string[]): Promise<readonly number[]> => {
    await shares.settled()
    return (await store.read('m', parties, 1000, 10_000)).counters
  }

  const one = await limiter.admit(request('k1', 'One'))
  t.same(await counters('k1'), [1034], 'the estimate is charged while the call runs')
  await one.settle({ inputTokens: 10, outputTokens: 90 })
  t.same(await counters('k1'), [100], 'settled: what it used')

  const learned = await limiter.admit({
    ...request('k2', 'Two', 'tenant'),
    rateEstimate: { inputTokens: 10, outputTokens: 40 },
  })
  t.same(await counters('tenant'), [125], "the learned reservation, over weight 2, lifted to k1's 100")
  await learned.settle({ inputTokens: 10, outputTokens: 190 })
  t.same(await counters('tenant'), [200], 'the owner is the party: 100 + 200 / 2')

  const withdrawn = await limiter.admit(request('k1', 'One'))
  await withdrawn.settle({ inputTokens: 0, outputTokens: 0 }, { withdrawn: true })
  await withdrawn.settle({ inputTokens: 10, outputTokens: 10 })
  t.same(await counters('k1'), [100], 'a withdrawn call costs nothing, and a second settle does nothing')

  const served = (await metrics.registry.getSingleMetricAsString('tollgate_fair_share_weighted_tokens_total')).split(
    '\n',
  )
  t.ok(
    served.some((l) => l.includes('tier="One"') && l.endsWith(' 100')),
    'tier One: 100 weighted tokens',
  )
  t.ok(
    served.some((l) => l.includes('tier="Two"') && l.endsWith(' 100')),
    'tier Two: 200 tokens over weight 2',
  )
})

t.test('a store that fails refuses nothing; the line falls back to first come first served', async (t) => {
  const failing: FairStore = {
    chargeMany: () => Promise.reject(new Error('down')),
    read: () => Promise.reject(new Error('down')),
  }
  const { log, lines } = captureLog()
  const shares = createFairShares({ store: failing, plans, log })
  const limiter = withFairShares(createLimiter({ log, metrics: quietMetrics() }), shares, plans)
  t.teardown(() => limiter.close())
  const admission = await limiter.admit(request('k', 'One'))
  await admission.settle({ inputTokens: 1, outputTokens: 1 })
  await shares.settled()
  t.equal(await shares.counters('m', ['k']), undefined, 'no counters: the line keeps its order')
  t.equal(lines().filter((l) => String(l.msg).startsWith('fair shares')).length, 1, 'the outage is logged once')
})

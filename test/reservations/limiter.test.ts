// The limiter's side of a learned output reservation (port.ts rateEstimate): the windowed
// token limits reserve the learned amount; a budget and the lifetime quota keep holding the
// worst case (the fixed reservation); settle charges what really flowed on every one.
import t from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import { setup, spec } from '../limits/budget-contract.ts'
import { captureLog, quietMetrics } from '../limits/helpers.ts'
import type { PlansConfig } from '../../src/config/schema.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { createLearnedReservations, withLearnedReservations } from '../../src/reservations/index.ts'
import { memorySketchStore } from '../../src/reservations/store.ts'

t.test('rateEstimate: output_tpm reserves the learned amount, the budget the fixed one', async (t) => {
  const budget = spec({ amountNanos: 10_000_000_000 })
  const { options } = setup([budget], '2026-11-27T12:00:00Z')
  const limiter = createLimiter({ log: captureLog().log, metrics: quietMetrics(), ...options })
  t.teardown(() => limiter.close())
  const request = {
    keyId: budget.id,
    owner: budget.id,
    tier: 'T',
    model: 'm',
    // 1,000 units per million output tokens: 1,024 tokens cost 1.024.
    limits: { output_tpm: 1500, quota: 100_000, input_price: 0, output_price: 1000 },
    estimate: { inputTokens: 10, outputTokens: 1024 },
    uncapped: { replies: 1 },
    rateEstimate: { inputTokens: 10, outputTokens: 40 },
  }
  const admission = await limiter.admit(request)
  t.equal(admission.headers['x-ratelimit-remaining-output-tokens'], String(1500 - 40), 'output_tpm holds 40')
  const [held] = (await limiter.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'T' })) ?? []
  t.equal(held?.reserved, 1.024, 'the budget holds the cost of 1,024 output tokens')
  // Longer than its reservation: charged in full.
  await admission.settle({ inputTokens: 10, outputTokens: 600 })
  const probe = await limiter.admit({
    ...request,
    estimate: { inputTokens: 0, outputTokens: 1 },
    rateEstimate: undefined,
  })
  t.equal(probe.headers['x-ratelimit-remaining-output-tokens'], String(1500 - 600 - 1), 'the window counts all 600')
  await probe.settle({ inputTokens: 0, outputTokens: 1 })
  const [spent] = (await limiter.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'T' })) ?? []
  t.equal(spent?.reserved, 0, 'nothing held once settled')
  t.equal(spent?.spent, 0.601, 'spent what flowed')
})

t.test('tollgate_output_reservation_tokens: what each call without a cap reserved, by source', async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  const limiter = withLearnedReservations(
    createLimiter({ log: captureLog().log, metrics: quietMetrics() }),
    createLearnedReservations({ store: memorySketchStore(), log: captureLog().log, now: () => 1000 }),
    () => ({ tiers: { T: { outputReservation: { mode: 'learned', minSamples: 3 } } } }) as unknown as PlansConfig,
    metrics,
  )
  t.teardown(() => limiter.close())
  const request = {
    keyId: 'metric-key',
    tier: 'T',
    model: 'm',
    limits: { output_tpm: 100_000 },
    estimate: { inputTokens: 0, outputTokens: 1024 },
    uncapped: { replies: 1 },
  }
  // A still clock: three observations count three, and the fourth call is the first learned.
  for (let i = 0; i < 6; i++) {
    const admission = await limiter.admit(request)
    await admission.settle({ inputTokens: 0, outputTokens: 40 })
  }
  const { values } = await metrics.outputReservation.get()
  const of = (name: string, source: string): number =>
    values.find((v) => v.metricName === `tollgate_output_reservation_tokens_${name}` && v.labels.source === source)
      ?.value ?? 0
  t.equal(of('count', 'fixed'), 3, 'three on the fixed reservation while learning')
  t.equal(of('sum', 'fixed'), 3 * 1024)
  t.equal(of('count', 'key'), 3, "then three on the key's learned one")
  t.ok(Math.abs(of('sum', 'key') - 120) <= 3, `about 40 each: ${of('sum', 'key')}`)
})

// /v2's side of fair shares without a gateway: where a party stands is read from the last
// flush's answer (src/fairness/contention.ts) with its unsent charges added and the call's
// own charge taken off; an answer older than CONTEND_MS says nothing. A party above its
// share is cut to 1 − reserve of a deployment (capacity-share.ts), and a refusal on that cut
// is answered fair_share_exceeded with the capacity's retry hint.
import t from 'tap'
import { createStandings, CONTEND_MS } from '../../src/fairness/contention.ts'
import { createFairCapacity, cutShare, fairRefusal } from '../../src/fairness/capacity-share.ts'
import { createFairShares } from '../../src/fairness/shares.ts'
import { memoryFairStore } from '../../src/fairness/store.ts'
import { gatewayError, GatewayError } from '../../src/errors.ts'
import { captureLog } from '../limits/helpers.ts'
import type { PlansConfig } from '../../src/config/schema.ts'

t.test('standings: above another party that contends, from a fresh answer only', async (t) => {
  const s = createStandings()
  t.notOk(s.above('m', 'a', 0, 0), 'nothing known: nobody is above')
  s.saw(
    'm',
    {
      charged: [
        ['a', 100],
        ['b', 40],
      ],
      lowest: [
        ['b', 40],
        ['a', 100],
      ],
    },
    1_000,
  )
  t.ok(s.above('m', 'a', 0, 1_000), 'a (100) is above b (40)')
  t.notOk(s.above('m', 'b', 0, 1_000), 'b is the lowest')
  t.notOk(s.above('m', 'a', -70, 1_000), 'with 70 given back (not sent yet), a is below b')
  t.ok(s.above('m', 'b', 61, 1_000), "b's unsent charges put it above a")
  t.notOk(s.above('m', 'c', 0, 1_000), 'a party this gateway has not charged lately is not cut')
  t.notOk(s.above('other', 'a', 0, 1_000), 'scopes are apart')
  t.notOk(s.above('m', 'a', 0, 1_000 + CONTEND_MS + 1), 'an old answer says nothing')
  s.saw('m', { charged: [['a', 120]], lowest: [['a', 120]] }, 1_500)
  t.notOk(s.above('m', 'a', 0, 1_500), 'alone among those contending: above nobody')
})

t.test('fair shares: above() reads the last flush, with the call itself taken off', async (t) => {
  let now = 10_000
  const plans = (): PlansConfig => ({ tiers: { One: {}, Two: { fairShare: { weight: 2 } } } }) as unknown as PlansConfig
  const shares = createFairShares({ store: memoryFairStore(), plans, log: captureLog().log, now: () => now })
  const flood = { keyId: 'f', tier: 'One', model: 'm' }
  const light = { keyId: 'l', tier: 'Two', model: 'm' }
  // Both arrive together (a newcomer starts at the floor of the active ones), then are charged.
  shares.arrived('m', 'f')
  shares.arrived('m', 'l')
  await shares.settled()
  shares.charge(flood, 300)
  shares.charge(light, 200)
  await shares.settled()
  t.ok(shares.above(flood, 0), 'flood 300 is above light 200 / 2')
  t.notOk(shares.above(light, 0), 'light is below')
  shares.charge(light, 500) // a call just admitted: 250 weighted, not sent yet
  t.notOk(shares.above(light, 500), 'its own call does not count against it')
  t.ok(shares.above(light, 0), 'its unsent charges do')
  await shares.settled()
  now += CONTEND_MS + 1
  t.notOk(shares.above(flood, 0), 'nobody charged lately: nobody above')
})

t.test('the cut and its refusal', async (t) => {
  t.equal(createFairCapacity({ above: () => true }, 0), undefined, 'reserve 0: no scheme at all')
  const fair = createFairCapacity({ above: (r) => r.keyId === 'over' }, 0.25)
  const call = (keyId: string) => ({
    principal: { keyId, owner: keyId },
    resolved: { tier: 'T', model: 'm' },
    estimate: { inputTokens: 4, outputTokens: 6 },
  })
  t.equal(fair?.shareOf(call('over')), 0.75)
  t.equal(fair?.shareOf(call('under')), undefined)
  t.equal(cutShare(1, undefined), 1)
  t.equal(cutShare(0.8, 0.75), 0.75, 'the lesser of the class share and the cut')
  t.equal(cutShare(0.5, 0.75), 0.5)
  const flex = gatewayError('flex_capacity', { headers: { 'retry-after': '1', 'retry-after-ms': '250' } })
  const refused = fairRefusal(flex, 1, 0.75)
  t.ok(refused instanceof GatewayError && refused.code === 'fair_share_exceeded', 'refused on the cut: fair_share')
  t.same((refused as GatewayError).headers, { 'retry-after': '1', 'retry-after-ms': '250' }, 'the same retry hint')
  t.equal(refused instanceof GatewayError ? refused.status : 0, 429)
  t.equal(fairRefusal(flex, 0.5, 0.75), flex, "a flex call whose class share was the lesser: flex's refusal")
  const full = gatewayError('upstream_capacity')
  t.equal(fairRefusal(full, 1, 0.75), full, 'full for everyone: upstream_capacity as before')
  t.equal(fairRefusal(flex, 1, undefined), flex, 'no cut: unchanged')
})

// The insurance limits alone (src/limits/insurance.ts): each instance's share of the
// windowed limits, the lifetime quota started from what Redis last said, and the quota
// counted in memory handed back to Redis.
import t from 'tap'
import type { Subject } from '../../src/limits/counters.ts'
import type { Adjustment, Charge, Dimension } from '../../src/limits/dimensions.ts'
import { createInsurance, handOverQuota } from '../../src/limits/insurance.ts'
import { memoryCounters } from '../../src/limits/memory-counters.ts'

const subject: Subject = { keyId: 'key_a', model: 'm' }
const other: Subject = { keyId: 'key_b', model: 'm' }
const rpm: Dimension = { name: 'requests', limit: 10, windowed: true }
const quota: Dimension = { name: 'quota', limit: 1000, windowed: false }
const charge = (d: Dimension, cost: number): Charge => ({ ...d, cost })
const state = (used: number): { used: number } => ({ used })

t.test('windowed limits are shared out between the instances, never below one', async (t) => {
  t.same(createInsurance(3).share(subject, [rpm]), [{ ...rpm, limit: 3 }])
  t.same(createInsurance(1).share(subject, [rpm]), [rpm])
  t.same(createInsurance(50).share(subject, [rpm]), [{ ...rpm, limit: 1 }])
  const charged = createInsurance(2).share(subject, [charge(rpm, 1)])
  t.same(charged, [{ ...rpm, limit: 5, cost: 1 }], 'a charge keeps its cost')
})

t.test('the quota starts from what Redis last counted, per (key, model)', async (t) => {
  const insurance = createInsurance(4)
  t.same(insurance.share(subject, [quota]), [quota], 'never seen on Redis: the whole quota')
  insurance.remember(subject, [charge(rpm, 1), charge(quota, 50)], [state(1), state(300)])
  t.same(
    insurance.share(subject, [quota]),
    [{ ...quota, limit: 700 }],
    'not divided by the instances: it is what is left',
  )
  t.same(insurance.share(other, [quota]), [quota], 'another key is untouched')
  insurance.remember(subject, [charge(quota, 50)], [state(1200)])
  t.same(insurance.share(subject, [quota]), [{ ...quota, limit: 0 }], 'an overspent quota leaves nothing, not less')
})

t.test('a settle on Redis moves the remembered quota by its adjustment', async (t) => {
  const insurance = createInsurance(1)
  const giveBack: Adjustment = { name: 'quota', windowed: false, delta: -40, reserved: 50, expiresAt: 0 }
  insurance.settled(subject, [giveBack])
  t.same(insurance.share(subject, [quota]), [quota], 'nothing remembered yet: nothing to move')
  insurance.remember(subject, [charge(quota, 50)], [state(100)])
  insurance.settled(subject, [giveBack])
  t.same(insurance.share(subject, [quota]), [{ ...quota, limit: 940 }])
  insurance.settled(subject, [{ ...giveBack, delta: -500 }])
  t.same(insurance.share(subject, [quota]), [quota], 'never below zero')
  insurance.remember(subject, [charge(rpm, 1)], [state(9)])
  t.same(insurance.share(subject, [quota]), [quota], 'an admission without a quota remembers nothing')
})

t.test('the quota memory is bounded: the least recently seen key goes first', async (t) => {
  const insurance = createInsurance(1)
  const key = (i: number): Subject => ({ keyId: `key_${i}`, model: 'm' })
  for (let i = 0; i < 10_000; i++) insurance.remember(key(i), [charge(quota, 1)], [state(10)])
  insurance.remember(key(0), [charge(quota, 1)], [state(20)])
  insurance.remember(key(10_000), [charge(quota, 1)], [state(10)])
  t.same(insurance.share(key(1), [quota]), [quota], 'the oldest one is forgotten')
  t.same(insurance.share(key(0), [quota]), [{ ...quota, limit: 980 }], 'one seen again is kept')
  t.same(insurance.share(key(10_000), [quota]), [{ ...quota, limit: 990 }])
})

t.test('the quota counted in memory is handed over as one settle per counter, once', async (t) => {
  const memory = memoryCounters(60_000)
  // What settling calls during an outage leaves in the memory's lifetime counters.
  const used = (delta: number): Adjustment => ({ name: 'quota', windowed: false, delta, reserved: 0, expiresAt: 0 })
  await memory.settle(subject, [used(30)])
  await memory.settle(other, [used(5)])
  const settles: Array<{ subject: Subject; adjustments: readonly Adjustment[] }> = []
  await handOverQuota(memory, async (s, adjustments) => {
    settles.push({ subject: s, adjustments })
  })
  const byKey = settles.map((s) => [s.subject.keyId, s.adjustments]).sort()
  t.same(byKey, [
    ['key_a', [{ name: 'quota', windowed: false, delta: 30, reserved: 0, expiresAt: 0 }]],
    ['key_b', [{ name: 'quota', windowed: false, delta: 5, reserved: 0, expiresAt: 0 }]],
  ])
  settles.length = 0
  await handOverQuota(memory, async (s, adjustments) => {
    settles.push({ subject: s, adjustments })
  })
  t.same(settles, [], 'drained: a second hand-over sends nothing')
})

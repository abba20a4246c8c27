// The virtual token counter (src/fairness/vtc.ts) and its two stores (store.ts): charges add
// up per party, a party that was idle is lifted to the active floor (idle time earns no
// credit) but never lowered, the waiter chosen is the lowest band then the lowest counter,
// a simulated contended server gives backlogged parties shares equal to their weights, and
// the Redis store answers as the memory one does, shared by two clients (a flush's standing too).
import t, { type Test } from 'tap'
import { activeFloor, charge, effectiveCounter, fairest, type PartyState } from '../../src/fairness/vtc.ts'
import { memoryFairStore, redisFairStore, WAITING_MS, type FairStore } from '../../src/fairness/store.ts'
import { testNamespace } from '../helpers/redis.ts'

const ACTIVE = 10_000

t.test('charges add up; an idle party comes back at the active floor, never lower than it was', async (t) => {
  const states = new Map<string, PartyState>()
  t.equal(charge(states, 'a', 100, 0, ACTIVE), 100)
  t.equal(charge(states, 'a', 50, 1_000, ACTIVE), 150)
  t.equal(
    charge(states, 'b', 10, 1_000, ACTIVE),
    160,
    'b was never seen: it starts at the floor of the active (a: 150)',
  )
  t.equal(effectiveCounter(states, 'c', 2_000, ACTIVE), 150, 'an unseen party is ranked at the active floor')
  t.equal(activeFloor(states, 2_000, ACTIVE), 150)
  // a keeps going, b goes idle for longer than ACTIVE.
  for (let at = 2_000; at <= 30_000; at += 1_000) charge(states, 'a', 100, at, ACTIVE)
  t.equal(effectiveCounter(states, 'b', 30_000, ACTIVE), states.get('a')?.counter, 'idle b is ranked at a: no credit')
  t.equal(charge(states, 'b', 1, 30_000, ACTIVE), (states.get('a')?.counter ?? 0) + 1)
  // A party that went idle ahead of the others keeps what it owes.
  const ahead = new Map<string, PartyState>([
    ['x', { counter: 1_000, activeAt: 0 }],
    ['y', { counter: 10, activeAt: 20_000 }],
  ])
  t.equal(effectiveCounter(ahead, 'x', 20_000, ACTIVE), 1_000, 'lifted, never lowered')
  t.equal(charge(ahead, 'y', -5, 20_000, ACTIVE), 5, 'a withdrawn call gives its charge back')
})

t.test('parties idle past the forget time are let go when another comes back', async (t) => {
  const states = new Map<string, PartyState>([['old', { counter: 5, activeAt: 0 }]])
  charge(states, 'new', 1, 700_000, ACTIVE, 600_000)
  t.same([...states.keys()], ['new'])
})

t.test('fairest: lowest band first, then lowest counter, then the earliest', async (t) => {
  t.equal(fairest([]), -1)
  t.equal(
    fairest([
      { band: 0, counter: 5 },
      { band: 0, counter: 3 },
      { band: 0, counter: 3 },
    ]),
    1,
  )
  t.equal(
    fairest([
      { band: 0, counter: 1 },
      { band: -1, counter: 99 },
    ]),
    1,
    'priority before default, whatever it used',
  )
  t.equal(
    fairest([
      { band: 1, counter: 0 },
      { band: 0, counter: 9 },
    ]),
    1,
    'flex after default',
  )
})

/**
 * A server of `slots` calls at a time, each of `tokens` tokens taking one tick per token;
 * every party always has calls waiting. Returns the tokens each was served.
 */
function simulate(
  weights: Record<string, number>,
  slots: number,
  tokens: (party: string, n: number) => number,
): Record<string, number> {
  const states = new Map<string, PartyState>()
  const served: Record<string, number> = Object.fromEntries(Object.keys(weights).map((p) => [p, 0]))
  const running: Array<{ party: string; until: number; tokens: number }> = []
  let n = 0
  // Each becomes backlogged at the start: lifted (to the floor of those before it) and active.
  for (const party of Object.keys(weights)) charge(states, party, 0, 0, ACTIVE)
  for (let now = 0; now < 200_000; now++) {
    for (let i = running.length - 1; i >= 0; i--) {
      const call = running[i] as (typeof running)[number]
      if (call.until > now) continue
      running.splice(i, 1)
      served[call.party] = (served[call.party] ?? 0) + call.tokens
    }
    while (running.length < slots) {
      const parties = Object.keys(weights)
      const at = fairest(parties.map((p) => ({ band: 0, counter: effectiveCounter(states, p, now, ACTIVE) })))
      const party = parties[at] as string
      const size = tokens(party, n++)
      charge(states, party, size / (weights[party] ?? 1), now, ACTIVE)
      running.push({ party, until: now + size, tokens: size })
    }
  }
  return served
}

t.test('on a contended server, backlogged parties are served in proportion to their weights', async (t) => {
  const cases: Array<Record<string, number>> = [
    { a: 1, b: 1 },
    { a: 1, b: 2 },
    { a: 1, b: 1, c: 2 },
  ]
  for (const weights of cases) {
    // Calls of very different lengths: a's are long, the others' short and varied.
    const served = simulate(weights, 4, (party, n) => (party === 'a' ? 800 : 20 + ((n * 37) % 300)))
    const total = Object.values(served).reduce((x, y) => x + y, 0)
    const weightSum = Object.values(weights).reduce((x, y) => x + y, 0)
    for (const [party, weight] of Object.entries(weights)) {
      const share = (served[party] ?? 0) / total
      const due = weight / weightSum
      t.ok(
        Math.abs(share - due) <= 0.02,
        `${JSON.stringify(weights)}: ${party} got ${share.toFixed(3)}, due ${due.toFixed(3)}`,
      )
    }
  }
})

/** One party's charge through chargeMany: its new counter. */
const chargeOne = async (store: FairStore, scope: string, party: string, delta: number, at: number): Promise<number> =>
  (await store.chargeMany(scope, [[party, delta]], at, ACTIVE)).charged[0]?.[1] ?? NaN

async function storeBehaviour(t: Test, one: FairStore, two: FairStore): Promise<void> {
  const scope = 'gpt-4o-mini'
  t.equal(await chargeOne(one, scope, 'a', 100, 0), 100)
  t.equal(await chargeOne(two, scope, 'a', 50.5, 1_000), 150.5, "the second store adds to the first's")
  t.equal(await chargeOne(two, scope, 'b', 10, 1_000), 160.5, 'a newcomer starts at the active floor')
  const counters = async (store: FairStore, s: string, parties: string[], at: number): Promise<readonly number[]> =>
    (await store.read(s, parties, at, ACTIVE)).counters
  t.same(await counters(one, scope, ['a', 'b', 'c'], 2_000), [150.5, 160.5, 150.5])
  t.same(await counters(one, 'other', ['a'], 2_000), [0], 'scopes are apart')
  t.same(await counters(one, scope, ['a', 'b'], 20_000), [150.5, 160.5], 'nobody active: each keeps its own')
  t.equal(await chargeOne(one, scope, 'a', 1, 20_000), 151.5)
  t.same(await counters(two, scope, ['b'], 20_001), [160.5], 'b idle ahead of a keeps its counter')
  t.equal(await chargeOne(two, scope, 'a', -1, 20_002), 150.5, 'a charge given back')
  t.same(
    (
      await one.chargeMany(
        scope,
        [
          ['a', 2],
          ['b', 3],
          ['a', -1],
        ],
        20_003,
        ACTIVE,
      )
    ).charged,
    [
      ['a', 152.5],
      ['b', 163.5],
      ['a', 151.5],
    ],
    'several charges at once, in order, each with its new counter',
  )
  // A flush's answer (contention.ts Standing): the counters charged, in order, and the two
  // lowest of the parties charged within contendMs, over both stores' charges.
  const flushed = await one.chargeMany(
    'flush',
    [
      ['x', 30],
      ['y', 10],
      ['z', 20],
    ],
    50_000,
    ACTIVE,
    1_000,
  )
  t.same(flushed.charged, [
    ['x', 30],
    ['y', 40],
    ['z', 50],
  ])
  t.same(flushed.lowest, [
    ['x', 30],
    ['y', 40],
  ])
  t.same(await two.chargeMany('flush', [['z', 0]], 50_500, ACTIVE, 1_000), {
    charged: [['z', 50]],
    lowest: [
      ['x', 30],
      ['y', 40],
    ],
  })
  t.same(
    (await one.chargeMany('flush', [['z', 5]], 51_200, ACTIVE, 1_000)).lowest,
    [['z', 55]],
    'x and y stopped wanting room: only z contends',
  )
}

t.test('the memory store', async (t) => {
  const store = memoryFairStore()
  await storeBehaviour(t, store, store)
})

t.test('the Redis store, shared by two clients, answers as the memory one', async (t) => {
  const ns = testNamespace(t, 'fair', 'fair-test')
  const { prefix } = ns.fresh()
  const { createRedisClient } = await import('../../src/store/redis-client.ts')
  const { REDIS_URL } = await import('../helpers/redis.ts')
  const a = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'fair-a' })
  const b = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'fair-b' })
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  await storeBehaviour(t, redisFairStore(a, prefix), redisFairStore(b, prefix))
  // Who waits where: a party one instance read as waiting is seen by the other, for WAITING_MS.
  const [one, two] = [redisFairStore(a, prefix), redisFairStore(b, prefix)]
  await chargeOne(one, 'm', 'low', 10, 100_000)
  await chargeOne(one, 'm', 'high', 50, 100_000)
  t.equal((await one.read('m', ['low'], 100_010, ACTIVE)).elsewhere, undefined, 'nobody waits elsewhere')
  t.equal((await two.read('m', ['high'], 100_020, ACTIVE)).elsewhere, 10, 'low waits on the first instance')
  t.equal(
    (await two.read('m', ['high'], 100_020 + WAITING_MS + 1, ACTIVE)).elsewhere,
    undefined,
    'no longer read waiting',
  )
})

// The output-length sketch (src/reservations/sketch.ts) and its two stores: a quantile within
// the stated relative error on a known distribution, merging in any order, decay following a
// shift, and the Redis store's sketch being the sum of what every instance wrote.
import t, { type Test } from 'tap'
import { randomFrom } from '../../src/backends/mock/hash.ts'
import {
  countOf,
  lengthWeightedMeanOf,
  emptySketch,
  merge,
  observe,
  quantileOf,
  rebase,
  RELATIVE_ACCURACY,
  type Sketch,
} from '../../src/reservations/sketch.ts'
import { createLearnedReservations, settingsOf, type Learned } from '../../src/reservations/learned.ts'
import { memorySketchStore, redisSketchStore, type SketchStore } from '../../src/reservations/store.ts'
import { testNamespace } from '../helpers/redis.ts'
import { createLogger } from '../../src/observability/logger.ts'

const HOUR = 3_600_000

/** Lengths of replies: 70 % short (20–80 tokens), 30 % long (400–1200): bimodal, like chat traffic. */
function bimodal(next: () => number, n: number): number[] {
  return Array.from({ length: n }, () => Math.round(next() < 0.7 ? 20 + next() * 60 : 400 + next() * 800))
}

function exact(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? 0
}

t.test('a quantile is within the stated relative error on a known distribution', async (t) => {
  const values = bimodal(randomFrom(7), 20_000)
  const sketch = emptySketch(0)
  for (const v of values) observe(sketch, v, 0, HOUR)
  for (const q of [0.5, 0.75, 0.9, 0.95, 0.99]) {
    const truth = exact(values, q)
    const found = quantileOf(sketch, q) ?? NaN
    t.ok(Math.abs(found - truth) <= RELATIVE_ACCURACY * truth + 1e-9, `p${q * 100}: ${found} vs ${truth}`)
  }
  t.ok(Math.abs(countOf(sketch, 0, HOUR) - 20_000) < 1e-6, 'every observation counted once')
  t.ok(sketch.buckets.size < 120, `${sketch.buckets.size} buckets for 20,000 observations`)
})

t.test('merging sketches is the sketch of all the observations, in any order', async (t) => {
  const values = bimodal(randomFrom(11), 3000)
  const whole = emptySketch(0)
  const parts = [emptySketch(0), emptySketch(5 * 60_000), emptySketch(30 * 60_000)]
  values.forEach((v, i) => {
    const at = i * 1000
    observe(whole, v, at, HOUR)
    const part = parts[i % 3] as Sketch
    observe(part, v, at, HOUR)
  })
  const merged = emptySketch(0)
  for (const part of [...parts].reverse()) merge(merged, part, HOUR)
  const now = values.length * 1000
  for (const q of [0.5, 0.95]) t.equal(quantileOf(merged, q), quantileOf(whole, q), `p${q * 100}`)
  t.ok(Math.abs(countOf(merged, now, HOUR) - countOf(whole, now, HOUR)) < 1e-6, 'the same decayed count')
})

t.test('decay follows a shift: after a few half-lives the new lengths decide', async (t) => {
  const sketch = emptySketch(0)
  const next = randomFrom(3)
  for (let i = 0; i < 500; i++) observe(sketch, 800 + next() * 200, i * 1000, HOUR)
  t.ok((quantileOf(sketch, 0.95) ?? 0) > 780, 'long replies at first')
  // Then replies become short, for eight half-lives.
  const start = 500 * 1000
  for (let i = 0; i < 8 * 60; i++) observe(sketch, 30 + next() * 20, start + i * 60_000, HOUR)
  const p95 = quantileOf(sketch, 0.95) ?? 0
  t.ok(p95 < 52, `p95 follows the short replies: ${p95}`)
  // An observation weighs half after one half-life.
  const one = emptySketch(0)
  observe(one, 10, 0, HOUR)
  t.ok(Math.abs(countOf(one, HOUR, HOUR) - 0.5) < 1e-9, 'half after one half-life')
  // Rebasing changes nothing a reader sees.
  const before = [quantileOf(sketch, 0.5), countOf(sketch, start + 8 * HOUR, HOUR)]
  rebase(sketch, start + 8 * HOUR, HOUR)
  t.equal(quantileOf(sketch, 0.5), before[0], 'the same median')
  t.ok(Math.abs(countOf(sketch, start + 8 * HOUR, HOUR) - (before[1] ?? 0)) < 1e-6, 'the same count')
})

async function storeBehaviour(t: Test, stores: readonly SketchStore[]): Promise<void> {
  const values = bimodal(randomFrom(5), 400)
  const t0 = 1_700_000_000_000
  // Each instance writes its share; every one reads the same merged sketch.
  for (const [i, v] of values.entries())
    await (stores[i % stores.length] as SketchStore).observe(['s1', 's2'], v, t0 + i * 10, HOUR)
  const read = await Promise.all(stores.map((s) => s.read(['s1', 's2', 'none'], t0 + 4000)))
  const whole = emptySketch(t0)
  for (const [i, v] of values.entries()) observe(whole, v, t0 + i * 10, HOUR)
  for (const [i, sketches] of read.entries()) {
    const [s1, s2, none] = sketches as [Sketch, Sketch, Sketch]
    t.equal(quantileOf(s1, 0.95), quantileOf(whole, 0.95), `instance ${i}: p95 of the merged sketch`)
    t.equal(quantileOf(s2, 0.5), quantileOf(whole, 0.5), `instance ${i}: p50 of the second scope`)
    t.ok(Math.abs(countOf(s1, t0 + 4000, HOUR) - countOf(whole, t0 + 4000, HOUR)) < 1e-6, `instance ${i}: count`)
    t.equal(none.buckets.size, 0, `instance ${i}: an unknown scope is empty`)
  }
  // Far in the future (past the rebase threshold), a write moves the epoch; the new lengths decide.
  const later = t0 + 45 * HOUR
  for (let i = 0; i < 30; i++) await (stores[0] as SketchStore).observe(['s1'], 100, later + i, HOUR)
  const [s1] = (await (stores[stores.length - 1] as SketchStore).read(['s1'], later + 100)) as [Sketch]
  t.ok(Math.abs((quantileOf(s1, 0.95) ?? 0) - 100) <= 2, 'after a rebase, the recent lengths')
  t.ok(Math.abs(countOf(s1, later + 100, HOUR) - 30) < 0.1, 'the old observations have decayed away')
}

t.test('memory store', async (t) => {
  await storeBehaviour(t, [memorySketchStore()])
})

t.test('redis store: two instances write one sketch', async (t) => {
  const ns = testNamespace(t, 'sketch', 'sketch-test')
  const { prefix } = ns.fresh()
  const { createRedisClient } = await import('../../src/store/redis-client.ts')
  const { REDIS_URL } = await import('../helpers/redis.ts')
  const a = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'sketch-a' })
  const b = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'sketch-b' })
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  await storeBehaviour(t, [redisSketchStore(a, prefix), redisSketchStore(b, prefix)])
})

t.test('the learned reservation: the first sketch with minSamples, within floor and ceiling', async (t) => {
  let now = 1_000_000
  const store = memorySketchStore()
  const learned = createLearnedReservations({ store, log: createLogger('silent'), now: () => now, refreshMs: 0 })
  const settings = settingsOf({ mode: 'learned', minSamples: 5, floor: 10, ceiling: 500 })
  const mine = { keyId: 'k1', tier: 'T', model: 'm' }
  const other = { keyId: 'k2', tier: 'T', model: 'm' }
  t.equal(await learned.lookup(mine, settings), undefined, 'nothing learned yet: the fixed reservation')
  const settle = async (who: typeof mine, tokens: number): Promise<void> => {
    learned.observe(who, settings, tokens)
    await new Promise((done) => setImmediate(done))
  }
  // A lookup answers from its cache and reads again behind it: the second one sees the read.
  const fresh = async (who: typeof mine): Promise<Learned | undefined> => {
    await learned.lookup(who, settings)
    await new Promise((done) => setImmediate(done))
    return learned.lookup(who, settings)
  }
  // Decayed, five calls a moment ago count a little under five: six.
  for (let i = 0; i < 6; i++) await settle(other, 200)
  now += 1
  const fromTier = await fresh(mine)
  t.same(fromTier?.source, 'tier', "another key's calls teach the tier's sketch")
  t.ok(Math.abs((fromTier?.perReply ?? 0) - 200) <= 5, `about 200: ${fromTier?.perReply}`)
  for (let i = 0; i < 6; i++) await settle(mine, 2)
  now += 1
  const own = await fresh(mine)
  t.same(own, { perReply: 10, source: 'key' }, "the key's own, lifted to the floor")
  for (let i = 0; i < 50; i++) await settle(other, 5000)
  now += 1
  t.same(await fresh(other), { perReply: 500, source: 'key' }, 'held to the ceiling')
  t.equal(await learned.lookup(mine, settingsOf({ mode: 'fixed' })), undefined, 'fixed: never learned')
  const view = await learned.describe(mine, {
    outputReservation: { mode: 'learned', minSamples: 5, floor: 10, ceiling: 500 },
  } as never)
  t.equal(view.source, 'key')
  t.equal(Math.round(view.samples.key), 6)
  t.equal(Math.round(view.samples.model), 62)
})

t.test('a store that fails leaves calls on the fixed reservation, without each one waiting for it', async (t) => {
  let now = 0
  let reads = 0
  const failing: SketchStore = {
    observe: async () => {
      throw new Error('store away')
    },
    read: async () => {
      reads++
      throw new Error('store away')
    },
  }
  const learned = createLearnedReservations({ store: failing, log: createLogger('silent'), now: () => now })
  const settings = settingsOf({ mode: 'learned', minSamples: 1 })
  const who = { keyId: 'k', tier: 'T', model: 'm' }
  t.equal(await learned.lookup(who, settings), undefined, 'the fixed reservation')
  learned.observe(who, settings, 100)
  t.equal(await learned.lookup(who, settings), undefined, 'still, and the failed observation did not throw')
  t.equal(reads, 1, 'read once within refreshMs')
  now += 2000
  await learned.lookup(who, settings)
  t.equal(reads, 2, 'tried again once refreshMs passed')
})

t.test('the length-weighted mean: the mean length of the calls in flight, within the stated error', async (t) => {
  const sketch = emptySketch(0)
  t.equal(lengthWeightedMeanOf(sketch), undefined, 'empty: nothing')
  // 96 replies of 50 tokens, 4 of 800: E[X²]/E[X] = (96·2500 + 4·640000) / (96·50 + 4·800) = 350.
  for (let i = 0; i < 96; i++) observe(sketch, 50, 0, HOUR)
  for (let i = 0; i < 4; i++) observe(sketch, 800, 0, HOUR)
  const found = lengthWeightedMeanOf(sketch) ?? NaN
  t.ok(Math.abs(found - 350) <= 350 * 2 * RELATIVE_ACCURACY, `about 350: ${found}`)
  t.ok(found > (quantileOf(sketch, 0.95) ?? 0) * 4, 'far above the p95 (50) when a few replies are long')
})

t.test('the tail held: a learned reservation is at least the length-weighted mean, unless told not to', async (t) => {
  const settings = settingsOf({ mode: 'learned', minSamples: 5 })
  const who = { keyId: 'k', tier: 'T', model: 'm' }
  const lookupAfter = async (holdTail: boolean | undefined): Promise<Learned | undefined> => {
    const learned = createLearnedReservations({
      store: memorySketchStore(),
      log: createLogger('silent'),
      now: () => 1000,
      ...(holdTail === undefined ? {} : { holdTail }),
    })
    await learned.lookup(who, settings)
    for (let i = 0; i < 96; i++) learned.observe(who, settings, 50)
    for (let i = 0; i < 4; i++) learned.observe(who, settings, 800)
    return learned.lookup(who, settings)
  }
  const held = await lookupAfter(undefined)
  const bare = await lookupAfter(false)
  t.ok(bare !== undefined && Math.abs(bare.perReply - 50) <= 2, `bare: the p95, about 50: ${bare?.perReply}`)
  t.ok(held !== undefined && Math.abs(held.perReply - 350) <= 15, `held (the default): about 350: ${held?.perReply}`)
})

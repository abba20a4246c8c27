// The meter: calls fold into (key, model, day) rows written in batches; a store that
// refuses loses nothing and counts nothing twice; close() writes what is left.
import t from 'tap'
import { createMeter } from '../../src/keys/meter.ts'
import { createLogger } from '../../src/observability/logger.ts'
import type { UsageRecord, UsageStore } from '../../src/store/ports.ts'
import { checkUsageRecords } from '../../src/store/usage-rows.ts'

const log = createLogger('silent')

interface FakeUsage extends UsageStore {
  rows: UsageRecord[]
  batches: number
  failures: number
  /** Fails this many of the next add() calls. */
  failNext: number
}

function fakeUsage(): FakeUsage {
  const store: FakeUsage = {
    rows: [],
    batches: 0,
    failures: 0,
    failNext: 0,
    async add(records) {
      // Like both adapters: a malformed row refuses the whole batch.
      checkUsageRecords(records)
      if (store.failNext > 0) {
        store.failNext--
        store.failures++
        throw new Error('Redis did not answer')
      }
      store.batches++
      store.rows.push(...records)
    },
    async query() { return store.rows },
  }
  return store
}

function totals(rows: readonly UsageRecord[]) {
  return rows.reduce((s, r) => ({
    requests: s.requests + r.requests,
    inputTokens: s.inputTokens + r.inputTokens,
    outputTokens: s.outputTokens + r.outputTokens,
    cost: s.cost + r.cost,
  }), { requests: 0, inputTokens: 0, outputTokens: 0, cost: 0 })
}

const call = (keyId: string, model: string, inputTokens: number, outputTokens: number, at = new Date('2025-03-01T12:00:00Z')) =>
  ({ keyId, owner: 'o', tier: 'Basic', model, inputTokens, outputTokens, cost: (inputTokens + outputTokens) / 1e6, at })

t.test('calls fold into one row per (key, model, day) and are written in one batch', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 60_000 })
  meter.record(call('k1', 'm1', 10, 5))
  meter.record(call('k1', 'm1', 20, 7))
  meter.record(call('k1', 'm2', 1, 1))
  meter.record(call('k2', 'm1', 3, 3))
  meter.record(call('k1', 'm1', 4, 4, new Date('2025-03-02T00:00:00Z')))
  t.equal(meter.pending(), 4)
  t.equal(store.rows.length, 0, 'nothing written on the request path')
  await meter.flush()
  t.equal(store.batches, 1)
  t.equal(store.rows.length, 4)
  const k1m1 = store.rows.find((r) => r.keyId === 'k1' && r.model === 'm1' && r.day === '2025-03-01')
  t.match(k1m1, { requests: 2, inputTokens: 30, outputTokens: 12 })
  t.equal(meter.pending(), 0)
  await meter.close()
})

t.test('a store that refuses keeps the rows; the next flush writes them exactly once', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 60_000 })
  meter.record(call('k1', 'm1', 10, 5))
  store.failNext = 2
  await meter.flush()
  // Calls that end while the store is down fold into the kept rows.
  meter.record(call('k1', 'm1', 1, 1))
  meter.record(call('k3', 'm1', 2, 2))
  await meter.flush()
  t.equal(store.failures, 2)
  t.equal(store.rows.length, 0)
  t.equal(meter.pending(), 2)
  await meter.flush()
  t.same(totals(store.rows), { requests: 3, inputTokens: 13, outputTokens: 8, cost: 21 / 1e6 })
  await meter.flush()
  t.equal(store.rows.length, 2, 'nothing written twice')
  await meter.close()
})

t.test('the timer flushes by itself, and a full buffer flushes early', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 20, maxPendingRows: 1000 })
  meter.record(call('k1', 'm1', 1, 1))
  for (let i = 0; i < 100 && store.rows.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
  t.equal(store.rows.length, 1, 'written by the interval')
  await meter.close()

  const eager = fakeUsage()
  const small = createMeter({ store: eager, log, flushIntervalMs: 60_000, maxPendingRows: 3 })
  for (let i = 0; i < 3; i++) small.record(call(`k${i}`, 'm', 1, 1))
  for (let i = 0; i < 100 && eager.rows.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
  t.equal(eager.rows.length, 3, 'written once maxPendingRows is reached')
  await small.close()
})

t.test('close() keeps retrying through a blip, then writes everything', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 60_000, closeTimeoutMs: 5000 })
  for (let i = 0; i < 10; i++) meter.record(call('k1', `m${i % 3}`, 100, 10))
  store.failNext = 3
  await meter.close()
  t.equal(store.failures, 3)
  t.same(totals(store.rows), { requests: 10, inputTokens: 1000, outputTokens: 100, cost: 1100 / 1e6 })
})

t.test('a call recorded after close() is still written', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 60_000 })
  await meter.close()
  meter.record(call('late', 'm', 5, 5))
  for (let i = 0; i < 100 && store.rows.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
  t.equal(store.rows[0]?.keyId, 'late')
})

t.test('bad numbers are made whole and non-negative, so one bad call cannot block the rest', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, flushIntervalMs: 60_000 })
  meter.record({ ...call('k', 'm', Number.NaN, -5), cost: Number.POSITIVE_INFINITY })
  meter.record(call('k', 'm', 2.6, 1))
  await meter.close()
  t.equal(store.failures, 0)
  t.same(totals(store.rows), { requests: 2, inputTokens: 3, outputTokens: 1, cost: 3.6 / 1e6 })
})

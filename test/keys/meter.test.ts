// The meter: every call's usage is in the store when record() resolves; a store that
// refuses loses nothing and counts nothing twice (rows never sent are kept, folded, and
// retried; rows that may have been applied are sent again under their id); close()
// retries what is left.
import t from 'tap'
import { createMeter } from '../../src/keys/meter.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { StoreUnavailableError } from '../../src/store/errors.ts'
import type { UsageRecord, UsageStore, UsageWrite } from '../../src/store/ports.ts'
import { checkUsageRecords } from '../../src/store/usage-rows.ts'

const log = createLogger('silent')

interface FakeUsage extends UsageStore {
  rows: UsageRecord[]
  writes: number
  failures: number
  /** Fails this many of the next add() calls, unsent (no connection). */
  failNext: number
  /** Fails this many of the next add() calls as a timeout would: maybe applied, here not. */
  timeOutNext: number
  /** Applies this many of the next add() calls, then fails them as if the reply was lost. */
  loseReplyNext: number
  /** Every id sent, in order. */
  ids: string[]
}

function fakeUsage(): FakeUsage {
  const store: FakeUsage = {
    rows: [],
    writes: 0,
    failures: 0,
    failNext: 0,
    timeOutNext: 0,
    loseReplyNext: 0,
    ids: [],
    async add(records) {
      // Like both adapters: a malformed row refuses the whole batch.
      checkUsageRecords(records)
      if (store.failNext > 0) {
        store.failNext--
        store.failures++
        throw new StoreUnavailableError('Redis did not answer: no connection', { unsent: true })
      }
      store.ids.push(...records.map((r) => r.id ?? ''))
      if (store.timeOutNext > 0) {
        store.timeOutNext--
        store.failures++
        throw new StoreUnavailableError('Redis did not answer: Command timed out')
      }
      store.writes++
      // Like Redis: an id applied before is skipped.
      const applied = new Set(store.rows.map((r) => (r as UsageWrite).id))
      store.rows.push(...records.filter((r) => r.id === undefined || !applied.has(r.id)))
      if (store.loseReplyNext > 0) {
        store.loseReplyNext--
        store.failures++
        throw new StoreUnavailableError('Redis did not answer: Connection is closed.')
      }
    },
    async query() {
      return store.rows
    },
  }
  return store
}

function totals(rows: readonly UsageRecord[]) {
  return rows.reduce(
    (s, r) => ({
      requests: s.requests + r.requests,
      inputTokens: s.inputTokens + r.inputTokens,
      outputTokens: s.outputTokens + r.outputTokens,
      costNanos: s.costNanos + r.costNanos,
    }),
    { requests: 0, inputTokens: 0, outputTokens: 0, costNanos: 0 },
  )
}

const call = (
  keyId: string,
  model: string,
  inputTokens: number,
  outputTokens: number,
  at = new Date('2025-03-01T12:00:00Z'),
) => ({
  keyId,
  owner: 'o',
  tier: 'Basic',
  model,
  inputTokens,
  outputTokens,
  costNanos: (inputTokens + outputTokens) * 1000,
  at,
})

t.test('each call is in the store when record() resolves, on the day it was made', async (t) => {
  // Each record() is awaited before the next: each call ends in a turn of its own.
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  await meter.record(call('k1', 'm1', 10, 5))
  t.equal(store.rows.length, 1, 'written before record() resolved')
  await meter.record(call('k1', 'm1', 20, 7))
  await meter.record(call('k1', 'm1', 4, 4, new Date('2025-03-02T00:00:00Z')))
  t.equal(store.writes, 3, 'one write per call')
  t.same(
    store.rows.map((r) => [r.day, r.requests, r.inputTokens]),
    [
      ['2025-03-01', 1, 10],
      ['2025-03-01', 1, 20],
      ['2025-03-02', 1, 4],
    ],
  )
  t.equal(meter.pending(), 0)
  await meter.close()
})

t.test('the calls that end in one turn go in one write, folded per key, model and day; a stream apart', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  let resolved = 0
  const turn = [
    meter.record(call('k1', 'm1', 10, 5)),
    meter.record(call('k1', 'm1', 20, 7)),
    meter.record(call('k2', 'm1', 1, 1)),
    meter.record({ ...call('k1', 'm1', 3, 3), stream: 'st-1' }),
    meter.record(call('k1', 'm1', 4, 4, new Date('2025-03-02T00:00:00Z'))),
  ].map((p) => p.then(() => resolved++))
  t.equal(store.writes, 0, 'nothing is written before the turn ends')
  await Promise.all(turn)
  t.equal(resolved, 5, 'every record() resolves')
  t.equal(store.writes, 1, 'one write for the turn')
  t.same(
    store.rows.map((r) => [
      r.keyId,
      r.day,
      r.requests,
      r.inputTokens,
      r.outputTokens,
      (r as UsageWrite).stream ?? null,
    ]),
    [
      ['k1', '2025-03-01', 2, 30, 12, null],
      ['k2', '2025-03-01', 1, 1, 1, null],
      ['k1', '2025-03-01', 1, 3, 3, 'st-1'],
      ['k1', '2025-03-02', 1, 4, 4, null],
    ],
  )
  t.equal(new Set(store.ids).size, 4, 'each row under an id of its own')
  await meter.record(call('k1', 'm1', 1, 1))
  t.equal(store.writes, 2, 'a call in a later turn is a write of its own')
  await meter.close()
})

t.test(
  'a store that refuses: record() still resolves, the rows are kept, folded, and written exactly once',
  async (t) => {
    const store = fakeUsage()
    const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
    store.failNext = 3
    await meter.record(call('k1', 'm1', 10, 5))
    await meter.record(call('k1', 'm1', 20, 7))
    await meter.record(call('k2', 'm1', 1, 1))
    t.equal(store.rows.length, 0, 'nothing written yet')
    t.equal(meter.pending(), 2, 'kept as one row per (key, model, day)')
    await meter.flush()
    t.equal(meter.pending(), 0)
    t.same(totals(store.rows), { requests: 3, inputTokens: 31, outputTokens: 13, costNanos: 44_000 })
    await meter.flush()
    t.same(
      totals(store.rows),
      { requests: 3, inputTokens: 31, outputTokens: 13, costNanos: 44_000 },
      'a second flush writes nothing twice',
    )
    await meter.close()
  },
)

t.test('a once charge (a stored request) is never folded, and is sent and sent again under its own id', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  const once = { id: 'queue:req_1', keepIdMs: 60_000 }
  await Promise.all([
    meter.record({ ...call('k1', 'm1', 10, 5), ...once }),
    meter.record({ ...call('k1', 'm1', 10, 5), ...once }), // its run again
    meter.record(call('k1', 'm1', 20, 7)),
  ])
  t.same(
    store.rows.map((r) => [r.requests, r.inputTokens, (r as UsageWrite).id ?? '']).sort(),
    [
      [1, 10, 'queue:req_1'],
      [1, 20, store.ids[1] ?? ''],
    ].sort(),
    'the plain call apart, under an id of the meter; the charge once, under its own',
  )
  t.equal((store.rows[0] as UsageWrite).keepIdMs, 60_000, 'with how long the store keeps its id')
  // Not sent (no connection), then a reply lost: still under its own id, counted once.
  store.failNext = 1
  store.loseReplyNext = 1
  await meter.record({ ...call('k1', 'm1', 3, 3), id: 'queue:req_2', keepIdMs: 60_000 })
  await meter.flush()
  await meter.flush()
  t.equal(meter.pending(), 0)
  t.same(
    store.rows.filter((r) => (r as UsageWrite).id === 'queue:req_2').map((r) => r.inputTokens),
    [3],
  )
  t.same(store.ids.slice(-2), ['queue:req_2', 'queue:req_2'], 'sent twice under its own id')
  await meter.close()
})

t.test('a write whose reply was lost is sent again under its id, and counted once', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  store.loseReplyNext = 1
  await meter.record(call('k1', 'm1', 10, 5))
  t.equal(store.rows.length, 1, 'applied, although the meter never heard so')
  t.equal(meter.pending(), 1, 'kept for a retry')
  await meter.flush()
  t.equal(meter.pending(), 0)
  t.equal(store.ids.length, 2, 'sent twice')
  t.equal(store.ids[0], store.ids[1], 'under the same id')
  t.same(totals(store.rows), { requests: 1, inputTokens: 10, outputTokens: 5, costNanos: 15_000 }, 'counted once')
  await meter.close()
})

t.test('writes that may have been applied are not folded; each is retried under its own id', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  store.timeOutNext = 2
  store.loseReplyNext = 1
  await meter.record(call('k1', 'm1', 10, 5)) // timed out, not applied
  await meter.record(call('k1', 'm1', 20, 7)) // timed out, not applied
  await meter.record(call('k1', 'm1', 1, 1)) // applied, reply lost
  t.equal(meter.pending(), 3, 'three rows for one (key, model, day), each under its id')
  // The retry times out too: still unsure, still apart, still under the same ids.
  const firstIds = [...store.ids]
  store.timeOutNext = 1
  await meter.flush()
  t.equal(meter.pending(), 3)
  t.same(new Set(store.ids.slice(3)), new Set(firstIds), 'the retry sent the same ids')
  await meter.flush()
  t.equal(meter.pending(), 0)
  t.same(totals(store.rows), { requests: 3, inputTokens: 31, outputTokens: 13, costNanos: 44_000 }, 'each once')
  await meter.close()
})

t.test('rows never sent are folded; a retry of them that times out keeps them under the id it sent', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  store.failNext = 3
  await meter.record(call('k1', 'm1', 10, 5))
  await meter.record(call('k1', 'm1', 20, 7))
  await meter.flush()
  t.equal(meter.pending(), 1, 'one folded row')
  store.timeOutNext = 1
  await meter.flush()
  t.equal(meter.pending(), 1, 'its retry may have been applied: kept under that id')
  const sentAs = store.ids.at(-1)
  await meter.flush()
  t.equal(store.ids.at(-1), sentAs, 'and sent again under it')
  t.same(totals(store.rows), { requests: 2, inputTokens: 30, outputTokens: 12, costNanos: 42_000 })
  await meter.close()
})

t.test('the timer retries by itself', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 30 })
  store.failNext = 1
  await meter.record(call('k', 'm', 1, 1))
  t.equal(meter.pending(), 1)
  for (let i = 0; i < 100 && meter.pending() > 0; i++) await new Promise((r) => setTimeout(r, 10))
  t.equal(meter.pending(), 0, 'retried without being asked')
  t.equal(store.rows.length, 1)
  await meter.close()
})

t.test('close() keeps retrying through a blip, then writes everything', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000, closeTimeoutMs: 3000 })
  store.failNext = 4
  for (let i = 0; i < 10; i++) await meter.record(call('k', 'm', 100, 10))
  await meter.close()
  t.equal(store.failures, 4)
  t.same(totals(store.rows), { requests: 10, inputTokens: 1000, outputTokens: 100, costNanos: 1_100_000 })
})

t.test('a call recorded after close() is still written', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log })
  await meter.close()
  await meter.record(call('k', 'm', 1, 1))
  t.equal(store.rows.length, 1)
})

t.test('bad numbers are made whole and non-negative, so one bad call cannot block the rest', async (t) => {
  const store = fakeUsage()
  const meter = createMeter({ store, log, retryIntervalMs: 60_000 })
  await meter.record({ ...call('k', 'm', Number.NaN, -5), costNanos: Number.POSITIVE_INFINITY })
  await meter.record(call('k', 'm', 2.6, 1))
  await meter.close()
  t.equal(store.failures, 0)
  t.same(totals(store.rows), { requests: 2, inputTokens: 3, outputTokens: 1, costNanos: 3600 })
})

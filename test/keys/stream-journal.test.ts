// The stream journal as the corridor uses it, on the embedded store: a stream is journalled
// when it starts, checkpointed ahead of what it delivered at most once an interval (never
// per chunk), removed by the write that meters it, and recovered once its gateway stopped.
import t, { type Test } from 'tap'
import { createMeter } from '../../src/keys/meter.ts'
import { createStreamJournal, type StreamStart } from '../../src/keys/stream-journal.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import type { Stores, StreamJournal, UsageRecord, UsageStore } from '../../src/store/ports.ts'

const log = createLogger('silent')

/** Waits (on the event loop, a bounded number of turns) for a checkpoint that is counted first. */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise<void>((done) => setImmediate(done))
}
const INTERVAL = 1000
const START: StreamStart = {
  keyId: 'key_a',
  owner: 'team-a',
  tier: 'Basic',
  model: 'm',
  inputTokens: 10,
  reservedOutputTokens: 100,
  cost: (input, output) => input + 2 * output,
}

function setup(
  t: Test,
  instance = 'gw-a',
): {
  stores: Stores
  clock: { ms: number }
  writes: { checkpoints: number; landed: Array<Promise<void>> }
  service: ReturnType<typeof createStreamJournal>
  recovered: UsageRecord[]
} {
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  const clock = { ms: Date.UTC(2025, 2, 1, 12) }
  const writes = { checkpoints: 0, landed: [] as Array<Promise<void>> }
  const journal: StreamJournal = {
    ...stores.streams,
    checkpoint: (...args) => {
      writes.checkpoints++
      const landed = stores.streams.checkpoint(...args)
      writes.landed.push(landed)
      return landed
    },
  }
  const recovered: UsageRecord[] = []
  const service = createStreamJournal({
    journal,
    instance,
    log,
    checkpointMs: INTERVAL,
    now: () => clock.ms,
    // One token per character: easy to follow.
    tokensOf: (text) => text.length,
    onRecovered: (record) => recovered.push(record),
  })
  return { stores, clock, writes, service, recovered }
}

t.test('a stream is journalled at its start with its prompt, nothing delivered', async (t) => {
  const { stores, service } = setup(t)
  const tally = service.begin(START)
  await tally.close()
  t.match(await stores.streams.list(), [
    { id: tally.id, instance: 'gw-a', keyId: 'key_a', inputTokens: 10, outputTokens: 0, costNanos: 10 },
  ])
})

t.test(
  'checkpoints: at most one an interval, whatever the chunks; each written ahead by two intervals at the pace',
  async (t) => {
    const { stores, clock, writes, service } = setup(t)
    const tally = service.begin(START)
    for (let i = 0; i < 50; i++) tally.delivered('ab')
    t.equal(writes.checkpoints, 0, 'fifty chunks within the first interval: no write')
    clock.ms += INTERVAL
    tally.delivered('cd')
    for (let i = 0; i < 20; i++) tally.delivered('e')
    await until(() => writes.landed.length === 1)
    await Promise.all(writes.landed)
    // The tally takes the next checkpoint once this one's promise chain has run out.
    await new Promise<void>((done) => setImmediate(done))
    t.equal(writes.checkpoints, 1, 'one write once the interval is over')
    const [first] = await stores.streams.list()
    // 122 delivered by the time it is written (after the open), and no lead: past the 100 reserved.
    t.match(first, { outputTokens: 122, costNanos: 10 + 2 * 122 }, 'past the reservation: no lead')
    clock.ms += INTERVAL
    tally.delivered('')
    t.equal(writes.checkpoints, 1, 'an empty text is nothing delivered')
    tally.delivered('f')
    await tally.close()
    t.equal(writes.checkpoints, 2)
    t.match((await stores.streams.list())[0], { outputTokens: 123, at: clock.ms })
    tally.delivered('g'.repeat(50))
    clock.ms += INTERVAL
    tally.delivered('h')
    await tally.close()
    t.equal(writes.checkpoints, 2, 'nothing after close')
  },
)

t.test("the lead: twice the last interval's output, never past the reservation", async (t) => {
  const { stores, clock, service } = setup(t)
  const tally = service.begin({ ...START, reservedOutputTokens: 50 })
  clock.ms += INTERVAL
  tally.delivered('x'.repeat(10))
  await tally.close()
  t.match((await stores.streams.list())[0], { outputTokens: 30 }, '10 delivered, 20 ahead')
  const other = service.begin({ ...START, reservedOutputTokens: 50 })
  clock.ms += INTERVAL
  other.delivered('x'.repeat(40))
  await other.close()
  t.match(
    (await stores.streams.list()).find((e) => e.id === other.id),
    { outputTokens: 50 },
    '40 delivered, 10 left to the reservation',
  )
})

t.test('the metering write removes the entry; the usage is charged once', async (t) => {
  const { stores, clock, service } = setup(t)
  const meter = createMeter({ store: stores.usage, log })
  t.teardown(() => meter.close())
  const tally = service.begin(START)
  clock.ms += INTERVAL
  tally.delivered('x'.repeat(5))
  await tally.close()
  await meter.record({
    keyId: 'key_a',
    owner: 'team-a',
    tier: 'Basic',
    model: 'm',
    inputTokens: 12,
    outputTokens: 30,
    costNanos: 72,
    stream: tally.id,
  })
  t.strictSame(await stores.streams.list(), [], 'settled: no longer journalled')
  t.match(await stores.usage.query({}), [{ requests: 1, inputTokens: 12, outputTokens: 30, costNanos: 72 }])
  t.equal(await service.recover(async () => false), 0, 'nothing to recover')
})

t.test('a settle the store refused keeps its stream apart and removes the entry when it is written', async (t) => {
  const { stores, service } = setup(t)
  let refuse = 1
  const flaky: UsageStore = {
    ...stores.usage,
    add: async (records) => {
      if (refuse-- > 0) throw new Error('Redis did not answer')
      await stores.usage.add(records)
    },
  }
  const meter = createMeter({ store: flaky, log, retryIntervalMs: 60_000 })
  t.teardown(() => meter.close())
  const a = service.begin(START)
  const b = service.begin(START)
  await Promise.all([a.close(), b.close()])
  const entry = {
    keyId: 'key_a',
    owner: 'team-a',
    tier: 'Basic',
    model: 'm',
    inputTokens: 10,
    outputTokens: 5,
    costNanos: 20,
  }
  await meter.record({ ...entry, stream: a.id })
  refuse = 1
  await meter.record({ ...entry, stream: b.id })
  t.equal(meter.pending(), 2, 'two rows of one (key, model, day) kept apart: each names its stream')
  await meter.flush()
  t.equal(meter.pending(), 0)
  t.strictSame(await stores.streams.list(), [], 'both entries went with the retried write')
  t.match(await stores.usage.query({}), [{ requests: 2, outputTokens: 10 }])
})

t.test('recovery: only streams of gateways that stopped, each once, the liveness of each asked once', async (t) => {
  const a = setup(t, 'gw-a')
  const { stores, clock } = a
  const journalOf = (instance: string): ReturnType<typeof createStreamJournal> =>
    createStreamJournal({
      journal: stores.streams,
      instance,
      log,
      checkpointMs: INTERVAL,
      now: () => clock.ms,
      tokensOf: (text) => text.length,
    })
  const own = a.service.begin(START)
  const alive = journalOf('gw-alive').begin(START)
  const dead1 = journalOf('gw-dead').begin({ ...START, keyId: 'key_d' })
  const dead2 = journalOf('gw-dead').begin({ ...START, keyId: 'key_d' })
  clock.ms += INTERVAL
  dead1.delivered('x'.repeat(7))
  await Promise.all([own.close(), alive.close(), dead1.close(), dead2.close()])
  const asked: string[] = []
  const isAlive = async (instance: string): Promise<boolean> => {
    asked.push(instance)
    return instance === 'gw-alive'
  }
  t.equal(await a.service.recover(isAlive), 2, 'the two streams of the gateway that stopped')
  t.strictSame(asked.sort(), ['gw-alive', 'gw-dead'], 'each other instance asked once; its own never')
  t.strictSame(a.recovered.map((r) => [r.keyId, r.requests, r.inputTokens, r.outputTokens]).sort(), [
    ['key_d', 1, 10, 0],
    ['key_d', 1, 10, 21],
  ])
  t.match(await stores.usage.query({ keyId: 'key_d' }), [{ requests: 2, inputTokens: 20, outputTokens: 21 }])
  t.strictSame(
    (await stores.streams.list()).map((e) => e.id).sort(),
    [own.id, alive.id].sort(),
    'the running ones stay',
  )
  t.equal(await a.service.recover(isAlive), 0, 'recovered once')
})

t.test('a journal that fails never fails the stream', async (t) => {
  const failing: StreamJournal = {
    open: async () => {
      throw new Error('Redis did not answer')
    },
    checkpoint: async () => {
      throw new Error('Redis did not answer')
    },
    list: async () => [],
    recover: async () => null,
  }
  let now = 0
  const service = createStreamJournal({
    journal: failing,
    instance: 'gw',
    log,
    checkpointMs: 1,
    now: () => now,
    tokensOf: (s) => s.length,
  })
  const tally = service.begin(START)
  now += 5
  tally.delivered('abc')
  await tally.close()
  t.pass('close resolves')
})

t.test('by default what was delivered is the linear estimate plus 10 %: no tokenizer', async (t) => {
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  let now = Date.UTC(2025, 2, 1, 12)
  const service = createStreamJournal({
    journal: stores.streams,
    instance: 'gw',
    log,
    checkpointMs: INTERVAL,
    now: () => now,
  })
  const tally = service.begin({ ...START, reservedOutputTokens: 1000 })
  now += INTERVAL
  // 400 letters: 100 tokens estimated (a quarter of a token each), 110 with the margin; 220 ahead.
  tally.delivered('a'.repeat(400))
  await tally.close()
  t.match(await stores.streams.list(), [{ outputTokens: 330 }])
})

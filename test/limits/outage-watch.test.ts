// The outage state machine alone (src/limits/outage.ts), on a stand-in connection whose
// status, replies and 'ready' events the test decides: up → down → stand-in → probe → up,
// with no Redis and no waiting on the clock. The probe timer is set far out of reach; the
// test calls probe() itself, or emits 'ready' as a reconnecting client does.
import { EventEmitter } from 'node:events'
import t from 'tap'
import type { Test } from 'tap'
import { watchRedis, type OnRedisDown, type RedisWatch, type WatchedConnection } from '../../src/limits/outage.ts'
import { pollUntil } from '../helpers/poll.ts'
import { captureLog, metricValue, quietMetrics } from './helpers.ts'

const LOST = 'rate limiter cannot reach Redis'
const BACK = 'rate limiter back on Redis'
const NEVER_BY_ITSELF = 3_600_000

class FakeConnection extends EventEmitter implements WatchedConnection {
  status = 'ready'
  quits = 0
  disconnects = 0
  /** What quit() answers: undefined means it never does. */
  quitReply: Promise<unknown> | undefined = Promise.resolve('OK')

  quit(): Promise<unknown> {
    this.quits++
    return this.quitReply ?? new Promise(() => undefined)
  }

  disconnect(): void {
    this.disconnects++
  }
}

interface Rig {
  readonly watch: RedisWatch
  readonly connection: FakeConnection
  readonly counters: { reachable: boolean | 'throw'; reachableCalls: number; warmCalls: number }
  readonly metrics: ReturnType<typeof quietMetrics>
  readonly backs: { count: number }
  said(msg: string): number
  gauge(mode: string): Promise<number | undefined>
}

function rig(
  t: Test,
  options: { status?: string; onRedisDown?: OnRedisDown; timeoutMs?: number; closeRedis?: boolean } = {},
): Rig {
  const connection = new FakeConnection()
  connection.status = options.status ?? 'ready'
  const counters = { reachable: true as boolean | 'throw', reachableCalls: 0, warmCalls: 0 }
  const logs = captureLog()
  const metrics = quietMetrics()
  const backs = { count: 0 }
  const watch = watchRedis({
    redis: connection,
    counters: {
      reachable: async () => {
        counters.reachableCalls++
        if (counters.reachable === 'throw') throw new Error('connection reset')
        return counters.reachable
      },
      warm: async () => {
        counters.warmCalls++
      },
    },
    onRedisDown: options.onRedisDown ?? 'insurance',
    timeoutMs: options.timeoutMs ?? 50,
    probeIntervalMs: NEVER_BY_ITSELF,
    log: logs.log,
    metrics,
    closeRedis: options.closeRedis,
    onBack: () => {
      backs.count++
    },
  })
  t.teardown(() => watch.close())
  return {
    watch,
    connection,
    counters,
    metrics,
    backs,
    said: (msg) => logs.lines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(msg)).length,
    gauge: (mode) => metricValue(metrics, 'tollgate_limiter_mode', { mode }),
  }
}

const failing = (): Promise<never> => Promise.reject(new Error('ECONNREFUSED'))

t.test('up: calls run on Redis and their answers come back', async (t) => {
  const { watch, counters, gauge } = rig(t)
  t.equal(watch.mode(), 'redis')
  t.same(watch.health(), { mode: 'redis', healthy: true, outages: 0, downSince: null })
  t.equal(await gauge('redis'), 1)
  t.equal(await gauge('insurance'), 0)
  t.equal(await watch.call(async () => 42), 42)
  t.equal(counters.warmCalls, 1, 'a connection ready at the start has the scripts sent once')
})

t.test('up → down: the first failure switches to the stand-in, logs once, and no call is sent after it', async (t) => {
  const { watch, said, gauge } = rig(t)
  t.equal(await watch.call(failing), undefined, 'a failed call answers undefined, it does not throw')
  t.equal(watch.mode(), 'insurance')
  const health = watch.health()
  t.same(
    { ...health, downSince: typeof health.downSince },
    { mode: 'insurance', healthy: false, outages: 1, downSince: 'string' },
  )
  t.equal(await gauge('insurance'), 1)
  t.equal(await gauge('redis'), 0)
  let sent = 0
  for (let i = 0; i < 5; i++)
    t.equal(
      await watch.call(async () => {
        sent++
        return 1
      }),
      undefined,
    )
  t.equal(sent, 0, 'while down nothing goes to Redis')
  t.equal(said(LOST), 1, 'the outage is logged once')
  t.equal(watch.health().downSince, health.downSince, 'the outage keeps its start')
})

t.test('down → probe → up: Redis counts as back once its counters answer; the outage ends once', async (t) => {
  const { watch, counters, said, backs, gauge } = rig(t)
  await watch.call(failing)
  counters.reachable = false
  await watch.probe()
  t.equal(watch.mode(), 'insurance', 'a probe that finds no counters keeps the stand-in')
  counters.reachable = 'throw'
  await watch.probe()
  t.equal(watch.mode(), 'insurance', 'so does a probe that fails')
  t.equal(said(LOST), 1, 'still one outage in the log')
  t.equal(watch.health().outages, 1)
  counters.reachable = true
  const warmed = counters.warmCalls
  await watch.probe()
  t.same(watch.health(), { mode: 'redis', healthy: true, outages: 1, downSince: null })
  t.equal(counters.warmCalls, warmed + 1, 'the scripts are sent in full before the calls that need them')
  t.equal(said(BACK), 1)
  t.equal(backs.count, 1, 'onBack runs once Redis is back (the insurance hands its quota over)')
  t.equal(await gauge('redis'), 1)
  t.equal(await gauge('insurance'), 0)
  t.equal(await watch.call(async () => 'again'), 'again')
  const probes = counters.reachableCalls
  await watch.probe()
  t.equal(counters.reachableCalls, probes, 'a probe while up does nothing')

  await watch.call(failing)
  t.equal(watch.health().outages, 2, 'a second outage is a new one')
  t.equal(said(LOST), 2)
})

t.test("a reconnect (the client's ready event) probes at once", async (t) => {
  const { watch, connection } = rig(t)
  connection.status = 'reconnecting'
  t.equal(await watch.call(async () => 1), undefined, 'a connection that is not ready is an outage, no call is made')
  t.equal(watch.mode(), 'insurance')
  connection.status = 'ready'
  connection.emit('ready')
  const polled = await pollUntil(
    async () => watch.mode(),
    (mode) => mode === 'redis',
  )
  t.ok(polled.met, 'back on Redis without waiting for the probe timer')
})

t.test('a Redis that does not answer costs the deadline, then counts as down', async (t) => {
  const { watch } = rig(t, { timeoutMs: 20 })
  t.equal(await watch.call(() => new Promise<number>(() => undefined)), undefined)
  t.equal(watch.mode(), 'insurance')
})

t.test('a connection not ready at the start is down from the first probe', async (t) => {
  const { watch, counters, said } = rig(t, { status: 'connecting' })
  t.equal(watch.mode(), 'insurance', 'not up before it answered')
  t.equal(counters.warmCalls, 0)
  t.equal(said(LOST), 0, 'nothing is announced before a probe has looked')
  await watch.probe()
  t.equal(said(LOST), 1)
  t.equal(watch.health().outages, 1)
  t.type(watch.health().downSince, 'string')
})

t.test('the stand-in is the mode onRedisDown names, and the log says what it does', async (t) => {
  for (const [onRedisDown, mode, meanwhile] of [
    ['insurance', 'insurance', 'enforcing limits per instance in memory'],
    ['fail-open', 'fail_open', 'admitting every request'],
    ['fail-closed', 'fail_closed', 'refusing requests'],
  ] as const) {
    const { watch, said, gauge, backs, counters } = rig(t, { onRedisDown })
    await watch.call(failing)
    t.equal(watch.mode(), mode, onRedisDown)
    t.equal(await gauge(mode), 1)
    t.equal(said(`${LOST}: ${meanwhile} until it answers again`), 1)
    counters.reachable = true
    await watch.probe()
    t.equal(backs.count, 1)
  }
})

t.test('close: stops listening, never comes back up, quits the connection it was given to close', async (t) => {
  const { watch, connection, counters } = rig(t, { closeRedis: true })
  await watch.call(failing)
  await watch.close()
  t.equal(connection.listenerCount('ready'), 0)
  t.equal(connection.quits, 1)
  counters.reachable = true
  await watch.probe()
  t.equal(watch.mode(), 'insurance', 'a closed watch does not probe')
  await watch.close()
  t.equal(connection.quits, 1, 'closing twice quits once')
})

t.test('close: a quit that gets no answer within the deadline disconnects', async (t) => {
  const { watch, connection } = rig(t, { closeRedis: true, timeoutMs: 20 })
  connection.quitReply = undefined
  await watch.close()
  t.equal(connection.disconnects, 1)
})

t.test('close: a connection the watch was not given to close is left open', async (t) => {
  const { watch, connection } = rig(t)
  await watch.close()
  t.equal(connection.quits, 0)
  t.equal(connection.disconnects, 0)
})

// Redis trouble, on a redis-server of this test's own (never the shared one): killed
// (connection refused) and paused (connected, silent). The limiter keeps answering as
// configured, sends nothing to a Redis it knows is away, logs the outage once, and goes
// back to Redis by itself.
import t from 'tap'
import type { Test } from 'tap'
import type { Redis } from 'ioredis'
import { GatewayError } from '../../src/errors.ts'
import { createLimiter, type LimiterOptions, type ManagedLimiter } from '../../src/limits/limiter.ts'
import { limiterKeys } from '../../src/limits/redis-counters.ts'
import { createRedisClient, pingRedis } from '../../src/store/redis-client.ts'
import { caller } from './contract.ts'
import {
  captureLog,
  countCommands,
  eventually,
  metricValue,
  quietMetrics,
  startPrivateRedis,
  testPrefix,
  type CapturedLog,
  type PrivateRedis,
} from './helpers.ts'

const TIMEOUT_MS = 150
const use = (inputTokens: number, outputTokens: number): { inputTokens: number; outputTokens: number } => ({
  inputTokens,
  outputTokens,
})

const server: PrivateRedis = await startPrivateRedis()
t.teardown(() => server.kill())

interface Rig {
  readonly limiter: ManagedLimiter
  readonly redis: Redis
  readonly logs: CapturedLog
  readonly metrics: ReturnType<typeof quietMetrics>
  readonly prefix: string
  /** Log lines with this message. */
  said(msg: string): number
}

async function rig(t: Test, options: Partial<LimiterOptions> = {}): Promise<Rig> {
  // Redis must be up (a previous test may have left it killed or paused).
  server.resume()
  const probe = createRedisClient(server.url, { commandTimeoutMs: 500, lazyConnect: true })
  const alive = await pingRedis(probe)
  probe.disconnect()
  if (!alive) await server.start()
  const redis = createRedisClient(server.url, {
    commandTimeoutMs: TIMEOUT_MS,
    maxReconnectDelayMs: 100,
    name: 'tgtest-outage',
  })
  t.ok(await pingRedis(redis), 'Redis is up at the start')
  const logs = captureLog()
  const metrics = quietMetrics()
  const prefix = testPrefix()
  const limiter = createLimiter({
    redis,
    prefix,
    log: logs.log,
    metrics,
    redisTimeoutMs: TIMEOUT_MS,
    probeIntervalMs: 50,
    closeRedis: true,
    ...options,
  })
  t.teardown(async () => {
    server.resume()
    await limiter.close()
  })
  const said = (msg: string): number =>
    logs.lines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(msg)).length
  return { limiter, redis, logs, metrics, prefix, said }
}

const LOST = 'rate limiter cannot reach Redis'
const BACK = 'rate limiter back on Redis'

t.test('insurance: Redis killed under load and started again', async (t) => {
  const { limiter, redis, metrics, said } = await rig(t)
  const c = caller(limiter, { rpm: 10, tpm: 100_000 })
  for (let i = 0; i < 3; i++) await c.admit(use(10, 10))
  t.equal(limiter.health().mode, 'redis')
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'redis' }), 1)
  const commands = countCommands(redis)

  await server.kill()
  // Under load: 40 concurrent calls, then 40 more, while Redis is gone. Calls of the first
  // wave may be sent before the client has seen the socket close; they fail at once.
  const first = await Promise.allSettled(Array.from({ length: 40 }, () => c.admit(use(10, 10))))
  commands.reset()
  const second = await Promise.allSettled(Array.from({ length: 40 }, () => c.admit(use(10, 10))))
  const admitted = [...first, ...second].filter((r) => r.status === 'fulfilled').length
  const refused = [...first, ...second].flatMap((r) => (r.status === 'rejected' ? [r.reason as GatewayError] : []))
  t.equal(admitted, 10, 'the insurance limiter enforces the limit in this instance')
  t.ok(
    refused.every((e) => e instanceof GatewayError && e.status === 429 && e.errorName === 'rate_limit_requests'),
    'the others get ordinary 429s, not errors',
  )
  t.equal(
    commands.count('evalsha') + commands.count('eval'),
    0,
    'once the outage is known, nothing is sent to the dead Redis',
  )
  t.same(
    { ...limiter.health(), downSince: typeof limiter.health().downSince },
    { mode: 'insurance', healthy: false, outages: 1, downSince: 'string' },
  )
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'insurance' }), 1)
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'redis' }), 0)
  t.equal(said(LOST), 1, 'the outage is logged once')
  const peeked = await c.peek()
  t.equal(peeked['x-ratelimit-remaining-requests'], '0', 'headers come from the insurance counters')

  await server.start()
  t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20), 'back on Redis by itself')
  t.equal(said(BACK), 1, 'the recovery is logged once')
  t.equal(said(LOST), 1, 'and the outage still only once')
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'redis' }), 1)
  commands.reset()
  const after = await c.admit(use(10, 10))
  t.equal(after.headers['x-ratelimit-remaining-requests'], '9', 'counted on the restarted (empty) Redis')
  t.same(
    [commands.count('evalsha'), commands.count('eval')],
    [1, 0],
    'the probe sent the scripts to the restarted Redis in full: the call needs only EVALSHA',
  )
  t.same(limiter.health(), { mode: 'redis', healthy: true, outages: 1, downSince: null })
})

t.test('insurance: a Redis that stops answering costs one timeout, not one per request', async (t) => {
  const { limiter, redis, said } = await rig(t)
  const c = caller(limiter, { rpm: 1000 })
  await c.admit(use(1, 1))
  const commands = countCommands(redis)
  server.pause()
  const stalled = await c.admit(use(1, 1))
  t.equal(
    stalled.headers['x-ratelimit-remaining-requests'],
    '999',
    'the call that met the timeout was admitted by the insurance limiter',
  )
  t.equal(limiter.health().mode, 'insurance')
  for (let i = 0; i < 50; i++) await c.admit(use(1, 1))
  t.equal(commands.count('evalsha'), 1, 'only the first admission went to the silent Redis')
  await stalled.settle(use(0, 0))
  t.equal(said(LOST), 1)
  server.resume()
  t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20), 'back on Redis once it answers')
  const back = await c.admit(use(1, 1))
  // The admission that met the timeout was already on the wire: a paused Redis runs it
  // when it wakes. That one may count twice (Redis and insurance); the 50 after it don't.
  t.ok(
    ['997', '998'].includes(back.headers['x-ratelimit-remaining-requests'] ?? ''),
    'Redis kept its counters: 1 before the pause (maybe 2), 1 now',
  )
})

t.test(
  'insurance: a lifetime quota is enforced from its last known value, and the outage usage handed to Redis',
  async (t) => {
    const { limiter, redis, prefix } = await rig(t)
    const c = caller(limiter, { quota: 1000 })
    await (await c.admit(use(100, 100))).settle(use(200, 200))
    server.pause()
    // A read meets the timeout (an admission would too, but might still run when Redis
    // wakes, and this test counts tokens exactly).
    await c.peek()
    t.equal(limiter.health().mode, 'insurance')
    const during = await c.admit(use(100, 100))
    await during.settle(use(300, 200))
    await (await c.admit(use(10, 10))).settle(use(50, 50))
    const refused = await c.refusal(use(1, 1))
    t.equal(refused.errorName, 'insufficient_quota', '400 known in Redis + 600 in memory spend the 1000')
    server.resume()
    t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20))
    const key = limiterKeys(prefix).counter(
      { keyId: c.keyId, model: 'Mistral-Small-24B-Instruct-2501' },
      { name: 'quota' },
    )
    t.ok(
      await eventually(async () => (await redis.get(key)) === '1000', 50, 20),
      'Redis counts the tokens used during the outage',
    )
    t.equal((await c.refusal(use(1, 1))).errorName, 'insufficient_quota', 'and keeps refusing')
  },
)

t.test('fail-open: every request is admitted while Redis is away', async (t) => {
  const { limiter, said } = await rig(t, { onRedisDown: 'fail-open' })
  const c = caller(limiter, { rpm: 2, output_tpm: 100 })
  await c.admit(use(1, 1))
  await c.admit(use(1, 1))
  t.equal((await c.refusal(use(1, 1))).errorName, 'rate_limit_requests')
  await server.kill()
  for (let i = 0; i < 20; i++) {
    const a = await c.admit(use(1, 1))
    t.same(
      a.headers,
      {
        'x-ratelimit-limit-requests': '2',
        'x-ratelimit-limit-output-tokens': '100',
        'x-ratelimit-limit-tokens': '100',
      },
      'limits only: the counters are unknown',
    )
    await a.settle(use(1, 1))
  }
  t.same(limiter.health().mode, 'fail_open')
  t.equal(said(LOST), 1)
  await server.start()
  t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20))
  t.equal((await c.admit(use(1, 1))).headers['x-ratelimit-remaining-requests'], '1', 'enforced on Redis again')
})

t.test('fail-closed: requests are refused with 503 while Redis is away', async (t) => {
  const { limiter } = await rig(t, { onRedisDown: 'fail-closed' })
  const c = caller(limiter, { rpm: 100 })
  const before = await c.admit(use(1, 1))
  await server.kill()
  const refused = await c.refusal(use(1, 1))
  t.equal(refused.status, 503)
  t.equal(refused.errorName, 'store_unavailable')
  t.equal(refused.headers['retry-after'], '1')
  t.equal(limiter.health().mode, 'fail_closed')
  await before.settle(use(0, 0)) // settles into the void without throwing
  await server.start()
  t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20))
  t.equal((await c.admit(use(1, 1))).headers['x-ratelimit-remaining-requests'], '99')
})

t.test('a Redis that is down when the limiter starts is an outage like any other', async (t) => {
  await server.kill()
  const redis = createRedisClient(server.url, { commandTimeoutMs: TIMEOUT_MS, maxReconnectDelayMs: 100 })
  const logs = captureLog()
  const limiter = createLimiter({
    redis,
    prefix: testPrefix(),
    log: logs.log,
    redisTimeoutMs: TIMEOUT_MS,
    probeIntervalMs: 50,
    closeRedis: true,
  })
  t.teardown(() => limiter.close())
  t.equal(limiter.health().mode, 'insurance')
  const c = caller(limiter, { rpm: 3 })
  for (let i = 0; i < 3; i++) await c.admit(use(1, 1))
  t.equal((await c.refusal(use(1, 1))).errorName, 'rate_limit_requests')
  await server.start()
  t.ok(await eventually(() => limiter.health().mode === 'redis', 150, 20), 'on Redis as soon as it is there')
  t.equal((await c.admit(use(1, 1))).headers['x-ratelimit-remaining-requests'], '2')
})

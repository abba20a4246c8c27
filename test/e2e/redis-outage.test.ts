// A gateway whose Redis is down, the way an operator meets it: started with Redis away,
// Redis coming back, then going away again and the gateway told to stop. Clients get
// clean 503s; the log says the outage once when it starts (naming the target, never its
// password) and once when it ends (with its duration), and nothing per request beyond
// each request's own line (no stack, no doubled message); /readyz shows the queue
// worker unhealthy while its Redis is away; SIGTERM with nothing in flight does not wait
// on the dead Redis.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { generateKey } from '../../src/keys/format.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { eventually, startPrivateRedis, testPrefix } from '../limits/helpers.ts'

const GRACE_MS = 10_000
const STARTS = 'Redis unreachable at '
const ENDS = 'Redis reachable again at '

const password = randomBytes(12).toString('hex')
const redis = await startPrivateRedis(['--requirepass', password])
await redis.kill()
const target = `redis://:***@127.0.0.1:${redis.port}`
t.teardown(() => redis.kill())

const said = (gw: RunningTollgate, prefix: string): Array<Record<string, unknown>> =>
  gw.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(prefix))

async function readiness(gw: RunningTollgate): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gw.url}/readyz`)
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

const gw = await startTollgate({
  env: {
    REDIS_URL: `redis://:${password}@127.0.0.1:${redis.port}`,
    TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex'),
  },
  config: (doc) => {
    ;(doc.server as Record<string, unknown>).shutdownGraceMs = GRACE_MS
    ;(doc.store as Record<string, unknown>).keyPrefix = testPrefix()
  },
})
t.teardown(() => gw.stop('SIGKILL'))
const listeningAt = Date.now()

t.test('started with Redis down', async (t) => {
  const opened = said(gw, STARTS)
  t.equal(opened.length, 1, 'one line says the outage started')
  t.match(opened[0], {
    level: 50,
    target,
    msg: `${STARTS}${target}: requests that need it are answered 503 until it is back (further connection errors of this outage are not logged)`,
  })
  t.notOk(gw.output().includes(password), 'the password is never logged')

  const key = generateKey()
  for (let i = 0; i < 20; i++) {
    const res = await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}` } })
    const body = (await res.json()) as { error?: { code?: string } }
    t.equal(res.status, 503, `request ${i}: 503`)
    t.equal(body.error?.code, 'store_unavailable')
  }
  const output = gw.output()
  t.notOk(output.includes('"stack"'), 'no stack logged')
  t.notOk(output.includes('unhandled error'), 'a store outage is not an unhandled error')
  t.notMatch(output, /(Redis is not connected \(\w+\)): \1/, 'no message said twice')
  t.ok(said(gw, 'API: the store did not answer').length <= 1, "the requests' failures: one warning at most")

  const ready = await readiness(gw)
  t.equal(ready.status, 503)
  t.match(ready.body, { status: 'not_ready', store: 'down', queue_worker: 'running', queue_worker_healthy: false })

  // Over a few seconds of outage (the clients retry about twice a second), the worker's
  // connection errors are not logged one by one.
  t.ok(
    await eventually(async () => (await readiness(gw)).status === 503 && Date.now() - listeningAt > 4000, 200, 50),
    'four seconds of outage',
  )
  t.ok(
    gw.logs().filter((l) => l.msg === 'queue worker error').length <= 2,
    'no more than a couple of worker error lines',
  )
  t.equal(said(gw, STARTS).length, 1, 'still one outage line')
})

t.test('Redis comes back', async (t) => {
  await redis.start()
  t.ok(await eventually(() => said(gw, ENDS).length > 0, 300, 50), 'the end of the outage is logged')
  const closed = said(gw, ENDS)
  t.equal(closed.length, 1, 'once')
  t.match(closed[0], { level: 30, target, durationMs: Number })
  t.ok(Number(closed[0]?.durationMs) >= 4000, 'with how long it lasted')
  t.match(String(closed[0]?.msg), new RegExp(`^${ENDS.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.+ after \\d+\\.\\d s$`))
  t.ok(
    await eventually(
      async () => {
        const ready = await readiness(gw)
        return ready.status === 200 && ready.body.queue_worker_healthy === true
      },
      300,
      50,
    ),
    'ready again, the queue worker healthy',
  )
})

t.test('Redis goes away again; SIGTERM does not wait on it', async (t) => {
  await redis.kill()
  t.ok(await eventually(() => said(gw, STARTS).length === 2, 300, 50), 'the new outage is logged')
  t.ok(
    await eventually(async () => (await readiness(gw)).body.queue_worker_healthy === false, 300, 50),
    'the worker is unhealthy again',
  )
  const asked = Date.now()
  const code = await gw.stop('SIGTERM')
  const tookMs = Date.now() - asked
  t.equal(code, 0, 'a clean exit')
  t.ok(tookMs < GRACE_MS, `stopped within the grace (${tookMs} ms < ${GRACE_MS} ms)`)
  t.ok(
    gw.logs().some((l) => l.msg === 'stopped'),
    'through the whole shutdown',
  )
})

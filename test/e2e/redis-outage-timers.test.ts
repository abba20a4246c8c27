// The work a gateway does on a timer against Redis (the budgets' refresh, the webhooks'
// sweep, the JWT signing keys' check, each run several times a second here) during an
// outage: one warning per component when it starts failing, one line when it works again
// with how long it failed; not one line per run (the budgets' refresh alone said ~3,600 an hour).
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { eventually, startPrivateRedis, testPrefix } from '../limits/helpers.ts'

const TASKS = ['budgets: refresh', 'webhooks: sweep', 'JWT signing keys: check'] as const
const OUTAGE_MS = 2500

const redis = await startPrivateRedis()
t.teardown(() => redis.kill())
const gw = await startTollgate({
  env: { REDIS_URL: `redis://127.0.0.1:${redis.port}`, TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') },
  config: (doc) => {
    ;(doc.store as Record<string, unknown>).keyPrefix = testPrefix()
    doc.budgets = { ...(doc.budgets as Record<string, unknown>), refreshMs: 100 }
    doc.webhooks = { ...(doc.webhooks as Record<string, unknown>), sweepIntervalMs: 100 }
    // The keyring checks every quarter of the rotation period: every 250 ms.
    ;(doc.ragAuth as Record<string, unknown>).signingKeyRotationSeconds = 1
  },
})
t.teardown(() => gw.stop('SIGKILL'))

const lines = (g: RunningTollgate, start: string): Array<Record<string, unknown>> =>
  g.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(start))

t.test('an outage of a few seconds: one line per component when it starts', async (t) => {
  await redis.kill()
  const lost = Date.now()
  t.ok(
    await eventually(() => TASKS.every((task) => lines(gw, `${task} failed`).length > 0), 200, 50),
    'each component says it is failing',
  )
  t.ok(await eventually(() => Date.now() - lost > OUTAGE_MS, 200, 50), 'a few seconds of outage')
  for (const task of TASKS) {
    const said = lines(gw, `${task} failed`)
    t.equal(said.length, 1, `${task}: once`)
    t.match(said[0], {
      level: 40,
      err: String,
      msg: `${task} failed; trying again (further failures are not logged until it succeeds)`,
    })
  }
  t.notOk(gw.output().includes('could not be read again'), 'not once per refresh')
})

t.test('Redis back: one line per component when it ends, with its duration', async (t) => {
  await redis.start()
  t.ok(
    await eventually(() => TASKS.every((task) => lines(gw, `${task} succeeded again`).length > 0), 200, 50),
    'each component says it works again',
  )
  for (const task of TASKS) {
    const said = lines(gw, `${task} succeeded again`)
    t.equal(said.length, 1, `${task}: once`)
    t.match(said[0], { level: 30, durationMs: Number, failures: Number })
    t.ok(Number(said[0]?.durationMs) >= OUTAGE_MS, `${task}: how long it failed`)
    t.ok(Number(said[0]?.failures) > 2, `${task}: how many runs failed (${String(said[0]?.failures)})`)
    t.match(String(said[0]?.msg), new RegExp(`^${task} succeeded again after \\d+\\.\\d s$`))
    t.equal(lines(gw, `${task} failed`).length, 1, `${task}: still one failure line`)
  }
})

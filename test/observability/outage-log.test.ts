// One line when a connection's outage starts, one when it ends (with its duration), none
// for the errors in between; and a store error's message said once, without a stack.
import t from 'tap'
import { describeRedisTarget } from '../../src/config/redis-target.ts'
import { createConnectionOutage, createTaskOutage } from '../../src/observability/outage-log.ts'
import { StoreUnavailableError } from '../../src/store/errors.ts'
import { captureLog } from '../limits/helpers.ts'

t.test('a connection outage: one line when it starts, one when it ends', async (t) => {
  const { log, lines } = captureLog('info')
  let now = 1_000
  const outage = createConnectionOutage(log, 'Redis', 'redis://127.0.0.1:6390', () => now)
  outage.up()
  t.equal(lines().length, 0, 'up while up says nothing')
  for (let i = 0; i < 50; i++) outage.down(new Error('connect ECONNREFUSED 127.0.0.1:6390'))
  t.ok(outage.isDown)
  t.equal(lines().length, 1, 'fifty errors, one line')
  t.match(lines()[0], { level: 50, target: 'redis://127.0.0.1:6390', err: 'connect ECONNREFUSED 127.0.0.1:6390' })
  now += 12_345
  outage.up()
  outage.up()
  t.notOk(outage.isDown)
  t.equal(lines().length, 2, 'one line when it ends')
  t.match(lines()[1], {
    level: 30,
    durationMs: 12_345,
    connectionErrors: 50,
    msg: 'Redis reachable again at redis://127.0.0.1:6390 after 12.3 s',
  })
  outage.down(new Error('again'))
  t.equal(lines().length, 3, 'the next outage is a new one')
})

t.test('a task on a timer: one line when it starts failing, one when it succeeds again', async (t) => {
  const { log, lines } = captureLog('info')
  let now = 5_000
  const outage = createTaskOutage(log, 'webhooks: sweep', () => now)
  outage.succeeded()
  t.equal(lines().length, 0, 'success after success says nothing')
  for (let i = 0; i < 30; i++) outage.failed(new Error('Redis is not connected (reconnecting)'))
  t.ok(outage.isFailing)
  t.equal(lines().length, 1, 'thirty failed runs, one line')
  t.match(lines()[0], {
    level: 40,
    err: 'Redis is not connected (reconnecting)',
    msg: 'webhooks: sweep failed; trying again (further failures are not logged until it succeeds)',
  })
  now += 30_000
  outage.succeeded()
  outage.succeeded()
  t.notOk(outage.isFailing)
  t.equal(lines().length, 2, 'one line when it works again')
  t.match(lines()[1], {
    level: 30,
    durationMs: 30_000,
    failures: 30,
    msg: 'webhooks: sweep succeeded again after 30.0 s',
  })
  outage.failed('not an Error')
  t.match(lines()[2], { level: 40, err: 'not an Error' }, 'the next outage is a new one')
})

t.test('the Redis target in logs: where, never with whom', async (t) => {
  t.equal(
    describeRedisTarget({ kind: 'standalone', url: 'redis://alice:s3cret@10.0.0.5:6380/2' }),
    'redis://***:***@10.0.0.5:6380/2',
  )
  t.equal(
    describeRedisTarget({ kind: 'standalone', url: 'rediss://:s3cret@cache.internal:6380' }),
    'rediss://:***@cache.internal:6380',
  )
})

t.test('a store error logs its message once and no stack of its cause', async (t) => {
  const { log, lines } = captureLog('info')
  const cause = new Error('Redis is not connected (reconnecting)')
  const error = new StoreUnavailableError(`Redis did not answer: ${cause.message}`, { cause })
  t.equal(error.reason, cause, "the client's error is kept")
  log.warn({ err: error }, 'failed')
  const err = lines()[0]?.err as { message: string }
  t.equal(err.message, 'Redis did not answer: Redis is not connected (reconnecting)')
  t.notOk(JSON.stringify(lines()[0]).includes('caused by'), 'the cause is not printed again')
})

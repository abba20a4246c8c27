// The limiter on the embedded store: counters in this process (rate-limiter-flexible's
// RateLimiterMemory), held to the same contract as on Redis.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import { captureLog, metricValue, quietMetrics } from './helpers.ts'
import { caller, limiterContract } from './contract.ts'

limiterContract(t, 'memory', async (options = {}) =>
  createLimiter({ log: captureLog().log, metrics: quietMetrics(), ...options }),
)

t.test('memory: reports its mode, and counts refusals by reason', async (t) => {
  const metrics = quietMetrics()
  const limiter = createLimiter({ log: captureLog().log, metrics })
  t.teardown(() => limiter.close())
  t.same(limiter.health(), { mode: 'memory', healthy: true, outages: 0, downSince: null })
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'memory' }), 1)
  t.equal(await metricValue(metrics, 'tollgate_limiter_mode', { mode: 'redis' }), 0)
  const request = {
    keyId: 'k1',
    tier: 'Basic',
    model: 'gpt-4o',
    limits: { rpm: 1, input_tpm: 10 },
    estimate: { inputTokens: 5, outputTokens: 0 },
  }
  const c = caller(limiter, request.limits, request.model, request.keyId)
  await limiter.admit(request)
  t.equal((await c.refusal(request.estimate)).errorName, 'rate_limit_requests')
  t.equal((await c.refusal({ inputTokens: 50, outputTokens: 0 })).errorName, 'rate_limit_tokens')
  t.equal(
    await metricValue(metrics, 'tollgate_rate_limited_total', { model: 'gpt-4o', tier: 'Test', reason: 'requests' }),
    1,
  )
  t.equal(
    await metricValue(metrics, 'tollgate_rate_limited_total', { model: 'gpt-4o', tier: 'Test', reason: 'too_large' }),
    1,
  )
})

t.test('memory: usage that is not a count is read as zero', async (t) => {
  const limiter = createLimiter({ log: captureLog().log })
  t.teardown(() => limiter.close())
  const request = {
    keyId: 'k2',
    tier: 'Basic',
    model: 'm',
    limits: { tpm: 1000 },
    estimate: { inputTokens: 100, outputTokens: 100 },
  }
  const admission = await limiter.admit(request)
  await admission.settle({ inputTokens: Number.NaN, outputTokens: -5 })
  const headers = await limiter.peek(request)
  t.equal(headers['x-ratelimit-remaining-tokens'], '1000', 'the reservation is given back, nothing negative is charged')
})

t.test(
  'memory: an admission asked while a settle of the same key is still running sees what it gave back',
  async (t) => {
    const limiter = createLimiter({ log: captureLog().log })
    t.teardown(() => limiter.close())
    const request = {
      keyId: 'k3',
      tier: 'Basic',
      model: 'm',
      limits: { tpm: 100 },
      estimate: { inputTokens: 60, outputTokens: 0 },
    }
    const first = await limiter.admit(request)
    // Not awaited: the settle gives back 50 of the 60 held, and the next admission of the key waits for it.
    const settling = first.settle({ inputTokens: 10, outputTokens: 0 })
    const second = await limiter.admit({ ...request, estimate: { inputTokens: 80, outputTokens: 0 } })
    await settling
    t.equal(
      second.headers['x-ratelimit-remaining-tokens'],
      '10',
      '10 used and 80 held of 100: admitted after the settle',
    )
  },
)

t.test('memory: counters, the quota above all, survive a restart through the snapshot file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-limits-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'limits.json')
  const limits = { rpm: 10, quota: 1000 }
  const first = createLimiter({ log: captureLog().log, snapshotFile: file })
  const c1 = caller(first, limits, 'gpt-4o', 'key-snap')
  await (await c1.admit({ inputTokens: 100, outputTokens: 100 })).settle({ inputTokens: 300, outputTokens: 400 })
  await first.close()
  t.ok(existsSync(file), 'saved on close')

  const second = createLimiter({ log: captureLog().log, snapshotFile: file })
  t.teardown(() => second.close())
  const c2 = caller(second, limits, 'gpt-4o', 'key-snap')
  t.equal((await c2.peek())['x-ratelimit-remaining-requests'], '9', 'the open window came back')
  await (await c2.admit({ inputTokens: 1, outputTokens: 1 })).settle({ inputTokens: 150, outputTokens: 150 })
  t.equal(
    (await c2.refusal({ inputTokens: 1, outputTokens: 1 })).errorName,
    'insufficient_quota',
    '700 before the restart + 300 after spend the 1000',
  )

  writeFileSync(file, '{not json')
  const logs = captureLog()
  const third = createLimiter({ log: logs.log, snapshotFile: file })
  t.teardown(() => third.close())
  t.equal(
    (await caller(third, limits, 'gpt-4o', 'key-snap').peek())['x-ratelimit-remaining-requests'],
    '10',
    'a damaged file means starting empty',
  )
  t.ok(
    logs.lines().some((l) => l.msg === 'rate limiter could not read its saved counters; starting empty'),
    'and says so',
  )
})

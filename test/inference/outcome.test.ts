// What the corridor records about how an attempt went (src/inference/outcome.ts): a failed
// attempt is an upstream error, a failover only when another deployment follows; an error
// is counted once, however it surfaced; a reply that broke off or a client that stopped
// reading is noted for the access log; tokens and cost are counted by model and tier.
import { Writable } from 'node:stream'
import t from 'tap'
import type { Usage } from '../../src/backends/port.ts'
import { gatewayError } from '../../src/errors.ts'
import { recordCharge, recordFailedAttempt, recordOutcome, type Ending } from '../../src/inference/outcome.ts'
import type { CallNotes } from '../../src/inference/call.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts'
import type { RelayOutcome } from '../../src/proxy/relay.ts'

function rig(): {
  metrics: Metrics
  notes: CallNotes
  lines: Array<Record<string, unknown>>
  log: ReturnType<typeof createLogger>
} {
  const lines: Array<Record<string, unknown>> = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>)
      done()
    },
  })
  return { metrics: createMetrics(), notes: {}, lines, log: createLogger('info', sink) }
}

const ending = (fields: Partial<Ending> = {}): Ending => ({
  endpoint: 'chat.completions',
  started: performance.now(),
  firstBackend: 'first',
  idleReaderMs: 60_000,
  attemptFailed: false,
  failedSending: false,
  ...fields,
})

const relayed = (fields: Partial<RelayOutcome> = {}): RelayOutcome => ({
  status: 200,
  usage: { inputTokens: 3, outputTokens: 4 },
  usageSource: 'reported',
  aborted: false,
  bytes: 10,
  ...fields,
})

async function counts(
  metrics: Metrics,
  name: 'upstreamErrors' | 'failovers',
): Promise<Array<[Record<string, unknown>, number]>> {
  return (await metrics[name].get()).values.map((v) => [v.labels, v.value])
}

t.test('a failed attempt: an upstream error; a failover only when a next deployment is tried', async (t) => {
  const { metrics, log, lines } = rig()
  recordFailedAttempt({ metrics, log }, 2, 'first', gatewayError('upstream_unreachable'), 'second')
  recordFailedAttempt({ metrics, log }, 2, 'second', 503, undefined)
  t.same(await counts(metrics, 'upstreamErrors'), [
    [{ backend: 'first', reason: 'upstream_unreachable' }, 1],
    [{ backend: 'second', reason: 'status_5xx' }, 1],
  ])
  t.same(await counts(metrics, 'failovers'), [[{ backend: 'first' }, 1]])
  t.match(lines, [
    {
      level: 40,
      backend: 'first',
      reason: 'upstream_unreachable',
      next: 'second',
      msg: 'upstream attempt failed; trying the next deployment',
    },
    {
      level: 40,
      backend: 'second',
      reason: 'status 503',
      msg: 'upstream attempt failed; no other deployment is tried',
    },
  ])
  const single = rig()
  recordFailedAttempt(single, 1, 'only', gatewayError('upstream_unreachable'), undefined)
  t.equal(single.lines[0]?.msg, 'upstream attempt failed; the model has no other deployment')
})

t.test('a relayed reply: time to first byte and upstream time, against the backend that answered', async (t) => {
  const { metrics, log, notes, lines } = rig()
  notes.backend = 'second'
  recordOutcome({ metrics, log, notes }, ending({ relayed: relayed({ firstByteMs: 12 }) }))
  t.type(notes.upstreamMs, 'number')
  t.equal(notes.errorName, undefined)
  t.equal(
    (await metrics.timeToFirstByte.get()).values.find((v) => v.metricName === 'tollgate_upstream_ttfb_seconds_count')
      ?.labels.backend,
    'second',
  )
  t.equal(
    (await metrics.upstreamDuration.get()).values.find(
      (v) => v.metricName === 'tollgate_upstream_duration_seconds_count',
    )?.value,
    1,
  )
  t.same(await counts(metrics, 'upstreamErrors'), [])
  t.same(lines, [])
})

t.test('a reply that broke off, a client that stopped reading: noted, logged, the break counted', async (t) => {
  const { metrics, log, notes, lines } = rig()
  notes.backend = 'up'
  recordOutcome(
    { metrics, log, notes },
    ending({
      relayed: relayed({ stalled: true, error: gatewayError('upstream_bad_response'), usageSource: 'counted' }),
    }),
  )
  t.equal(notes.errorName, 'upstream_bad_response', 'the break is the line’s error')
  t.same(await counts(metrics, 'upstreamErrors'), [[{ backend: 'up', reason: 'upstream_bad_response' }, 1]])
  t.match(lines, [
    { backend: 'up', idleReaderMs: 60_000, msg: 'client stopped reading; stream ended and charged what was sent' },
    { backend: 'up', error: 'upstream_bad_response', usageSource: 'counted', msg: 'upstream reply broke off' },
  ])
})

t.test('an error is counted once: not again when failover counted its attempts already', async (t) => {
  const counted = rig()
  recordOutcome(
    counted,
    ending({ error: gatewayError('upstream_unreachable'), failedSending: true, attemptFailed: true }),
  )
  t.same(await counts(counted.metrics, 'upstreamErrors'), [], 'the attempt was counted as it failed')

  const uncounted = rig()
  recordOutcome(uncounted, ending({ error: gatewayError('upstream_unreachable'), failedSending: true }))
  t.same(
    await counts(uncounted.metrics, 'upstreamErrors'),
    [[{ backend: 'first', reason: 'upstream_unreachable' }, 1]],
    'no deployment at all: the first in line is named',
  )

  const afterAnswer = rig()
  afterAnswer.notes.backend = 'up'
  recordOutcome(afterAnswer, ending({ error: gatewayError('upstream_bad_response'), attemptFailed: true }))
  t.same(
    await counts(afterAnswer.metrics, 'upstreamErrors'),
    [[{ backend: 'up', reason: 'upstream_bad_response' }, 1]],
    'failing once answered is counted against who answered',
  )

  const notGateway = rig()
  recordOutcome(notGateway, ending({ error: new Error('boom') }))
  t.same(await counts(notGateway.metrics, 'upstreamErrors'), [])
  t.type(notGateway.notes.upstreamMs, 'number', 'timed whatever the ending')
})

t.test('tokens and cost by model and tier; a call without a model counts nowhere', async (t) => {
  const { metrics } = rig()
  const usage: Usage = { inputTokens: 10, outputTokens: 20 }
  recordCharge(metrics, 'm', 'Basic', usage, 2_500_000_000)
  recordCharge(metrics, null, 'Basic', usage, 1_000_000_000)
  recordCharge(metrics, 'm', 'Basic', usage, 0)
  t.same(
    (await metrics.tokens.get()).values.map((v) => [v.labels.direction, v.value]),
    [
      ['input', 20],
      ['output', 40],
    ],
  )
  t.same(
    (await metrics.cost.get()).values.map((v) => [v.labels, v.value]),
    [[{ model: 'm', tier: 'Basic' }, 2.5]],
  )
  t.same((await metrics.cacheTokens.get()).values, [], 'no cache touched: no cache series')
})

t.test('cache reads and writes counted apart; input stays the whole prompt', async (t) => {
  const { metrics } = rig()
  recordCharge(
    metrics,
    'm',
    'Basic',
    { inputTokens: 100, outputTokens: 5, cacheReadTokens: 60, cacheWriteTokens: 30 },
    0,
  )
  recordCharge(metrics, 'm', 'Basic', { inputTokens: 50, outputTokens: 5, cacheReadTokens: 40 }, 0)
  t.same(
    (await metrics.tokens.get()).values.map((v) => [v.labels.direction, v.value]),
    [
      ['input', 150],
      ['output', 10],
    ],
    'input: the whole prompts, cache parts included',
  )
  t.same(
    (await metrics.cacheTokens.get()).values.map((v) => [v.labels, v.value]),
    [
      [{ model: 'm', tier: 'Basic', kind: 'read' }, 100],
      [{ model: 'm', tier: 'Basic', kind: 'write' }, 30],
    ],
  )
})

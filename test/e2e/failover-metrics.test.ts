// What the metrics and the log say about failed upstream attempts: a failover is counted
// (and logged as "trying the next deployment") only when another deployment is tried next,
// and every failed attempt is an upstream error, the ones a failover saved too. The Grafana
// panel "Upstream errors and failovers" plots exactly these two counters.
import OpenAI from 'openai'
import t from 'tap'
import { closedPort, startTollgate, startUpstream, type RunningTollgate } from '../helpers/gateway.ts'
import { counterSum as counter } from '../helpers/metrics.ts'
import { freshKeyClient } from '../helpers/sdk-gateway.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'

/** Points every model at the given backends, in order. */
function routeTo(backends: Record<string, Record<string, unknown>>) {
  return (doc: Record<string, unknown>): void => {
    doc.backends = { ...(doc.backends as object), ...backends }
    doc.resourceBackend = Object.keys(backends)[0]
    for (const model of doc.models as Array<{ deployments: unknown[] }>) {
      model.deployments = Object.keys(backends).map((backend) => ({ backend }))
    }
  }
}

const attemptLines = (gw: RunningTollgate): Array<Record<string, unknown>> =>
  gw.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('upstream attempt failed'))

/** One short chat call, as a client with a fresh key makes it. */
async function ask(gw: RunningTollgate): Promise<OpenAI.ChatCompletion> {
  const client = await freshKeyClient(gw)
  return client.chat.completions.create({
    model: CHAT,
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 3,
  })
}

t.test('a model with a single deployment that is down: an upstream error, no failover', async (t) => {
  const dead = await closedPort()
  const gw = await startTollgate({
    config: routeTo({ only: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 } }),
  })
  t.teardown(() => gw.stop())
  const failed = await ask(gw).catch((e: unknown) => e)
  t.ok(failed instanceof OpenAI.APIError && failed.status === 502, 'the client gets 502')
  t.equal(await counter(gw, 'tollgate_failovers_total'), 0, 'no failover')
  t.equal(await counter(gw, 'tollgate_upstream_errors_total'), 1, 'one upstream error')
  t.equal(
    await counter(gw, 'tollgate_upstream_errors_total', { backend: 'only', reason: 'upstream_unreachable' }),
    1,
    'with its backend and reason',
  )
  const lines = attemptLines(gw)
  t.equal(lines.length, 1, 'one line for the failed attempt')
  t.equal(lines[0]?.msg, 'upstream attempt failed; the model has no other deployment')
  t.notOk(gw.output().includes('trying the next deployment'), 'no promise of a next deployment')
})

t.test('two deployments, the first down: one failover, one upstream error, the call served', async (t) => {
  const live = await startUpstream()
  t.teardown(() => live.stop())
  const dead = await closedPort()
  const gw = await startTollgate({
    config: routeTo({
      first: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 },
      second: { type: 'openai', baseUrl: `${live.url}/v1` },
    }),
  })
  t.teardown(() => gw.stop())
  // The first call of a fresh gateway leads with the first deployment (round robin from 0).
  const res = await ask(gw)
  t.equal(res.object, 'chat.completion', 'served by the second deployment')
  t.equal(await counter(gw, 'tollgate_failovers_total'), 1, 'one failover')
  t.equal(await counter(gw, 'tollgate_failovers_total', { backend: 'first' }), 1, 'away from the first')
  t.equal(await counter(gw, 'tollgate_upstream_errors_total'), 1, 'the saved attempt is still an upstream error')
  t.equal(
    await counter(gw, 'tollgate_upstream_errors_total', { backend: 'first', reason: 'upstream_unreachable' }),
    1,
    'with its backend and reason',
  )
  const lines = attemptLines(gw)
  t.equal(lines.length, 1)
  t.match(lines[0], {
    msg: 'upstream attempt failed; trying the next deployment',
    backend: 'first',
    next: 'second',
    reason: 'upstream_unreachable',
  })
})

t.test('two deployments, the first answers 503, then both fail', async (t) => {
  const failing = await startUpstream(['--fail-status', '503'])
  t.teardown(() => failing.stop())
  const dead = await closedPort()
  const gw = await startTollgate({
    config: routeTo({
      first: { type: 'openai', baseUrl: `${failing.url}/v1` },
      second: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 },
    }),
  })
  t.teardown(() => gw.stop())
  const failed = await ask(gw).catch((e: unknown) => e)
  t.ok(
    failed instanceof OpenAI.APIError && failed.status === 429 && failed.code === 'upstream_capacity_exceeded',
    "the client gets the gateway's 429: the 503 was a refusal, and the other deployment is down",
  )
  t.equal(await counter(gw, 'tollgate_failovers_total'), 1, 'one failover, from the first to the second')
  t.equal(await counter(gw, 'tollgate_upstream_errors_total', { backend: 'first', reason: 'status_5xx' }), 1)
  t.equal(await counter(gw, 'tollgate_upstream_errors_total', { backend: 'second', reason: 'upstream_unreachable' }), 1)
  t.equal(await counter(gw, 'tollgate_upstream_errors_total'), 2, 'each failed attempt once')
  t.same(
    attemptLines(gw).map((l) => l.msg),
    ['upstream attempt failed; trying the next deployment', 'upstream attempt failed; no other deployment is tried'],
  )
})

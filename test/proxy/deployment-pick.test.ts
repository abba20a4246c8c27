// The corridor's choice of deployment with capacity (src/proxy/deployment-pick.ts), with
// stand-in adapters and the in-memory capacity store on a clock the test moves: the pick
// follows the configured order when nothing is declared (and costs no store call), an
// upstream 429 or 503 moves the call on and cools the deployment down for the time it
// named, every deployment full is the gateway's own 429 with the time the first frees up,
// and a lease is released once.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { PassThrough } from 'node:stream'
import t from 'tap'
import type { BackendAdapter, UpstreamRequest } from '../../src/backends/port.ts'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { memoryCapacityStore } from '../../src/capacity/memory.ts'
import type { CapacityStore, DeploymentDeclaration } from '../../src/capacity/port.ts'
import { GatewayError } from '../../src/errors.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import {
  capacityRefusal,
  capacityRetryAt,
  sendWithCapacity,
  targetIdOf,
  type PickOptions,
} from '../../src/proxy/deployment-pick.ts'
import type { FailoverTarget } from '../../src/proxy/failover.ts'

interface Answer {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body?: string
}

interface StubAdapter extends BackendAdapter {
  readonly sent: UpstreamRequest[]
  /** What it answers from now on. */
  answer: Answer
}

function stub(name: string, answer: Answer = { status: 200 }): StubAdapter {
  const sent: UpstreamRequest[] = []
  const adapter: StubAdapter = {
    name,
    type: 'mock',
    sent,
    answer,
    supports: () => true,
    async send(request) {
      sent.push(request)
      const body = new PassThrough()
      body.end(adapter.answer.body ?? JSON.stringify({ from: name }))
      return {
        status: adapter.answer.status,
        headers: { 'content-type': 'application/json', ...adapter.answer.headers },
        body,
      }
    },
    close: async () => undefined,
  }
  return adapter
}

const target = (adapter: BackendAdapter, i: number, weight = 1): FailoverTarget => ({
  adapter,
  upstreamModel: 'm',
  weight,
  deploymentIndex: i,
})

const build = (target: FailoverTarget): UpstreamRequest => ({
  endpoint: 'chat.completions',
  method: 'POST',
  path: '/chat/completions',
  model: target.upstreamModel,
  body: { kind: 'json', value: { model: target.upstreamModel } },
  requestId: 'req_pick',
  signal: new AbortController().signal,
  client: { req: {} as IncomingMessage, res: {} as ServerResponse },
})

/** A capacity on the memory store and a clock the test moves; counts the store's calls. */
function setup(deployments: Record<string, DeploymentDeclaration> = {}) {
  const clock = { now: 1_000_000 }
  const inner = memoryCapacityStore()
  const calls = { acquire: 0, release: 0 }
  const store: CapacityStore = {
    ...inner,
    acquire: (r) => (calls.acquire++, inner.acquire(r)),
    release: (r) => (calls.release++, inner.release(r)),
  }
  const capacity = createDeploymentCapacity(store, { deployments, now: () => clock.now, random: () => 0 })
  const metrics = createMetrics({ defaultMetrics: false })
  let counter = 0
  const options = (): PickOptions<FailoverTarget> => ({
    capacity,
    metrics,
    model: 'chat',
    tokens: 10,
    counter: counter++,
    now: () => clock.now,
  })
  return { clock, capacity, calls, metrics, options }
}

async function counter(metrics: ReturnType<typeof createMetrics>, name: string): Promise<number> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name)
  return (metric?.values ?? []).reduce((sum, v) => sum + Number(v.value), 0)
}

t.test('no declared or learned limits: the configured order stands, and no store call', async (t) => {
  const { calls, options } = setup()
  const a = stub('a')
  const b = stub('b')
  const targets = [target(a, 0), target(b, 1)]
  for (let i = 0; i < 4; i++) {
    const sent = await sendWithCapacity(targets, build, options())
    await sent.lease.release({ tokens: 5 })
    t.notOk(sent.lease.tracked)
  }
  t.equal(a.sent.length, 2, 'round robin by weight')
  t.equal(b.sent.length, 2)
  t.same(calls, { acquire: 0, release: 0 }, 'not one store call')
})

t.test('an upstream 429 moves the call on; the deployment cools down for its retry-after-ms', async (t) => {
  const { clock, calls, metrics, options } = setup()
  const a = stub('a', { status: 429, headers: { 'retry-after-ms': '1500' }, body: '{"error":{"code":"429"}}' })
  const b = stub('b')
  const targets = [target(a, 0), target(b, 1)]
  const first = await sendWithCapacity(targets, build, { ...options(), counter: 0 })
  t.equal(first.response.status, 200, 'served by the second')
  t.equal(first.target.adapter.name, 'b')
  t.equal(first.attempts, 2)
  await first.lease.release({ tokens: 5 })
  t.equal(await counter(metrics, 'tollgate_upstream_refusals_total'), 1, 'the refusal is counted')
  t.equal(await counter(metrics, 'tollgate_deployment_moves_total'), 1, 'and the move')
  t.ok(calls.release >= 1, 'the refusal taught the store')

  // a leads the order (counter 0), but it cools down: every call goes to b until 1.5 s passed.
  a.answer = { status: 200 }
  for (let i = 0; i < 3; i++) {
    clock.now += 400
    const sent = await sendWithCapacity(targets, build, { ...options(), counter: 0 })
    t.equal(sent.target.adapter.name, 'b', `at +${400 * (i + 1)} ms: b`)
    await sent.lease.release({ tokens: 5 })
  }
  t.equal(a.sent.length, 1, 'the cooling deployment got no call')
  clock.now += 400
  let toA = 0
  for (let i = 0; i < 6; i++) {
    const sent = await sendWithCapacity(targets, build, { ...options(), counter: i })
    if (sent.target.adapter.name === 'a') toA++
    await sent.lease.release({ tokens: 5 })
  }
  t.ok(toA > 0, 'after the cooldown it gets traffic again')
})

t.test('every move to another deployment is counted: after a 5xx and after no connection too', async (t) => {
  const { metrics, options } = setup()
  const failing = stub('failing', { status: 500 })
  const down = stub('down')
  down.send = () => Promise.reject(new GatewayError('upstream_unreachable'))
  const serving = stub('serving')
  const sent = await sendWithCapacity([target(failing, 0), target(down, 1), target(serving, 2)], build, {
    ...options(),
    counter: 0,
  })
  t.equal(sent.target.adapter.name, 'serving')
  await sent.lease.release()
  const moves = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'tollgate_deployment_moves_total')
  t.same(
    (moves?.values ?? []).map((v) => [v.labels.from, v.labels.to, v.value]),
    [
      ['failing/m', 'down/m', 1],
      ['down/m', 'serving/m', 1],
    ],
  )
})

t.test('a 503 moves on too; a 4xx other than 429 is final', async (t) => {
  const { options } = setup()
  const a = stub('a', {
    status: 503,
    body: '{"error":"server busy, please try again.  maximum pending requests exceeded"}',
  })
  const b = stub('b')
  const sent = await sendWithCapacity([target(a, 0), target(b, 1)], build, { ...options(), counter: 0 })
  t.equal(sent.target.adapter.name, 'b')
  await sent.lease.release()

  const c = stub('c', { status: 400 })
  const d = stub('d')
  const final = await sendWithCapacity([target(c, 0), target(d, 1)], build, { ...options(), counter: 0 })
  t.equal(final.response.status, 400, "the client's own answer")
  t.equal(d.sent.length, 0)
  await final.lease.release()
})

t.test('every deployment answering 429 in one call: the gateway 429, with the time the first frees up', async (t) => {
  const { clock, options } = setup()
  const a = stub('a', { status: 429, headers: { 'retry-after-ms': '800' }, body: '{"from":"a"}' })
  const b = stub('b', { status: 429, headers: { 'retry-after-ms': '900' }, body: '{"from":"b"}' })
  let error: unknown
  try {
    await sendWithCapacity([target(a, 0), target(b, 1)], build, { ...options(), counter: 0 })
  } catch (err) {
    error = err
  }
  t.type(error, GatewayError)
  const refusal = error as GatewayError
  t.equal(refusal.errorName, 'upstream_capacity', 'never the upstream’s own refusal')
  t.equal(refusal.headers['retry-after-ms'], '800', 'when a frees up')
  t.equal(capacityRetryAt(refusal, clock.now), clock.now + 800)
  t.equal(a.sent.length + b.sent.length, 2, 'both were tried')
})

t.test('every deployment refusing with 503 in one call: the gateway 429, never the upstream’s refusal', async (t) => {
  const { clock, options } = setup()
  const a = stub('a', { status: 503, headers: { 'retry-after-ms': '800' }, body: '{"from":"a"}' })
  const b = stub('b', { status: 503, headers: { 'retry-after-ms': '900' }, body: '{"from":"b"}' })
  const error = await sendWithCapacity([target(a, 0), target(b, 1)], build, { ...options(), counter: 0 }).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.type(error, GatewayError)
  t.equal((error as GatewayError).errorName, 'upstream_capacity')
  t.equal(capacityRetryAt(error, clock.now), clock.now + 800, 'when a frees up')
  t.equal(a.sent.length + b.sent.length, 2, 'both were tried')
})

t.test('the only deployment refusing with 503 (no wait named): the gateway 429 with its 1 s cooldown', async (t) => {
  const { clock, options } = setup()
  const a = stub('a', { status: 503, body: '{"error":{"code":"overloaded"}}' })
  const error = await sendWithCapacity([target(a, 0)], build, { ...options(), counter: 0 }).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.equal((error as GatewayError).errorName, 'upstream_capacity')
  t.equal((error as GatewayError).headers['retry-after'], '1')
  t.equal(capacityRetryAt(error, clock.now), clock.now + 1000)
})

t.test('every deployment cooling or full: the gateway 429 with the time the first frees up', async (t) => {
  const { clock, options } = setup()
  const a = stub('a', { status: 429, headers: { 'retry-after-ms': '2000' } })
  const b = stub('b', { status: 429, headers: { 'retry-after-ms': '700' } })
  const targets = [target(a, 0), target(b, 1)]
  const first = await sendWithCapacity(targets, build, options()).then(
    () => null,
    (err: unknown) => err,
  )
  t.match(first, { errorName: 'upstream_capacity' }, 'both refuse: the gateway answers')
  let error: unknown
  try {
    await sendWithCapacity(targets, build, options())
  } catch (err) {
    error = err
  }
  t.type(error, GatewayError)
  const refusal = error as GatewayError
  t.equal(refusal.errorName, 'upstream_capacity')
  t.equal(refusal.status, 429)
  t.equal(refusal.code, 'upstream_capacity_exceeded')
  t.equal(refusal.headers['retry-after-ms'], '700', 'when b frees up')
  t.equal(refusal.headers['retry-after'], '1')
  t.equal(capacityRetryAt(refusal, clock.now), clock.now + 700)
  t.equal(a.sent.length + b.sent.length, 2, 'nothing was sent')
})

t.test('declared limits: a full deployment is skipped; all full is refused before sending', async (t) => {
  const a = stub('a')
  const b = stub('b')
  const ids = [targetIdOf(target(a, 0)), targetIdOf(target(b, 1))]
  t.same(ids, ['a/m', 'b/m'])
  const { options } = setup({ 'a/m': { maxConcurrent: 1 }, 'b/m': { maxConcurrent: 1 } })
  const targets = [target(a, 0), target(b, 1)]
  const one = await sendWithCapacity(targets, build, options())
  const two = await sendWithCapacity(targets, build, options())
  t.not(one.target.adapter.name, two.target.adapter.name, 'the second call goes where there is room')
  let error: unknown
  try {
    await sendWithCapacity(targets, build, options())
  } catch (err) {
    error = err
  }
  t.equal((error as GatewayError).errorName, 'upstream_capacity')
  t.equal(a.sent.length + b.sent.length, 2, 'the third was not sent')
  await one.lease.release({ tokens: 10 })
  await one.lease.release({ tokens: 10 })
  const three = await sendWithCapacity(targets, build, options())
  t.equal(three.target.adapter.name, one.target.adapter.name, 'a released slot is free again (released once)')
  await Promise.all([two.lease.release(), three.lease.release()])
})

t.test('a request larger than any tpm: refused with no retry-after', async (t) => {
  const refusal = capacityRefusal(null)
  t.equal(refusal.errorName, 'upstream_capacity')
  t.equal(refusal.headers['retry-after-ms'], undefined)
  t.equal(capacityRetryAt(refusal), undefined)
})

t.test('the one tried refused and the rest are full: the gateway 429, not the refusal', async (t) => {
  const { options } = setup({ 'b/m': { maxConcurrent: 1 } })
  const a = stub('a', { status: 429, headers: { 'retry-after-ms': '600' } })
  const b = stub('b')
  const targets = [target(a, 0), target(b, 1)]
  const held = await sendWithCapacity([target(b, 1)], build, options())
  let error: unknown
  try {
    await sendWithCapacity(targets, build, { ...options(), counter: 0 })
  } catch (err) {
    error = err
  }
  t.equal((error as GatewayError).errorName, 'upstream_capacity')
  t.ok(Number((error as GatewayError).headers['retry-after-ms']) <= 600, 'no later than the refusal named')
  t.equal(a.sent.length, 1, 'the refusing one was tried')
  t.equal(b.sent.length, 1, 'the full one was not')
  await held.lease.release()
})

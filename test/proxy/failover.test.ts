import { createHash } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { PassThrough, Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { createOpenAIBackend } from '../../src/backends/openai.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import { GatewayError, gatewayError } from '../../src/errors.ts'
import type { RequestBody } from '../../src/http/body.ts'
import { sendError } from '../../src/http/reply.ts'
import { CircuitBreaker } from '../../src/proxy/circuit-breaker.ts'
import { pickOrder, sendWithFailover, type FailoverTarget } from '../../src/proxy/failover.ts'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { call, startGateway, upstreamRequestFor } from './gateway-harness.ts'

// --- Logic, with stand-in adapters -------------------------------------------------

type Behaviour = number | GatewayError

interface StubAdapter extends BackendAdapter {
  readonly sent: UpstreamRequest[]
  readonly bodies: PassThrough[]
}

/** An adapter that answers each send with the next behaviour: a status, or a thrown error. */
function stub(name: string, ...behaviours: Behaviour[]): StubAdapter {
  const sent: UpstreamRequest[] = []
  const bodies: PassThrough[] = []
  return {
    name,
    type: 'mock',
    sent,
    bodies,
    supports: () => true,
    async send(request) {
      sent.push(request)
      const next = behaviours[Math.min(sent.length - 1, behaviours.length - 1)] ?? 200
      if (next instanceof GatewayError) throw next
      const body = new PassThrough()
      body.end(JSON.stringify({ from: name, status: next }))
      bodies.push(body)
      return { status: next, headers: { 'content-type': 'application/json' }, body }
    },
    close: async () => undefined,
  }
}

function target(adapter: BackendAdapter, deploymentIndex: number, weight = 1): FailoverTarget {
  return { adapter, upstreamModel: `model-${deploymentIndex}`, weight, deploymentIndex }
}

function builder(signal = new AbortController().signal): (target: FailoverTarget) => UpstreamRequest {
  return (target) => ({
    endpoint: 'chat.completions',
    method: 'POST',
    path: '/chat/completions',
    model: target.upstreamModel,
    body: { kind: 'json', value: { model: target.upstreamModel } },
    requestId: 'req_failover',
    signal,
    // The stand-in adapters never touch the client exchange.
    client: { req: {} as IncomingMessage, res: {} as ServerResponse },
  })
}

const refused = (): GatewayError =>
  gatewayError('upstream_unreachable', { message: 'The upstream model server could not be reached (ECONNREFUSED).' })

/** The GatewayError `promise` rejects with; fails the test when it resolves or rejects otherwise. */
async function rejection(t: Test, promise: Promise<unknown>): Promise<GatewayError | undefined> {
  try {
    await promise
  } catch (err) {
    t.type(err, GatewayError)
    return err instanceof GatewayError ? err : undefined
  }
  t.fail('expected a rejection')
  return undefined
}

async function bodyOf(response: UpstreamResponse): Promise<string> {
  let text = ''
  for await (const chunk of response.body as AsyncIterable<Buffer>) text += chunk.toString('utf8')
  return text
}

t.test('pickOrder: the first target follows the weights; the rest follow as fallbacks', async (t) => {
  const targets = [
    { id: 'a', weight: 3 },
    { id: 'b', weight: 1 },
    { id: 'c', weight: 2 },
  ]
  const leads: Record<string, number> = { a: 0, b: 0, c: 0 }
  let incomplete = 0
  for (let counter = 0; counter < 600; counter++) {
    const order = pickOrder(targets, counter)
    if (
      [...order]
        .map((x) => x.id)
        .sort()
        .join() !== 'a,b,c'
    )
      incomplete += 1
    const first = order[0]?.id ?? ''
    leads[first] = (leads[first] ?? 0) + 1
  }
  t.equal(incomplete, 0, 'every order holds every target once')
  t.same(leads, { a: 300, b: 100, c: 200 })
  t.same(
    pickOrder(targets, 3).map((x) => x.id),
    ['b', 'c', 'a'],
  )
  t.same(
    pickOrder([{ id: 'only', weight: 5 }], 7).map((x) => x.id),
    ['only'],
  )
  t.same(pickOrder([], 1), [])
})

t.test('a refused connection moves on to the next deployment', async (t) => {
  const a = stub('a', refused())
  const b = stub('b', 200)
  const failures: unknown[] = []
  const result = await sendWithFailover([target(a, 0), target(b, 1)], builder(), {
    onAttemptFailed: (tg, failure, next) =>
      failures.push([
        tg.deploymentIndex,
        failure instanceof GatewayError ? failure.errorName : failure,
        next?.deploymentIndex,
      ]),
  })
  t.equal(result.target.adapter.name, 'b')
  t.equal(result.attempts, 2)
  t.equal(result.response.status, 200)
  t.same(failures, [[0, 'upstream_unreachable', 1]], 'told which deployment is tried next')
  t.equal(b.sent[0]?.model, 'model-1', 'each attempt is built for its own deployment')
})

t.test('a 5xx before any body moves on, and its body is discarded', async (t) => {
  const a = stub('a', 503)
  const b = stub('b', 200)
  const result = await sendWithFailover([target(a, 0), target(b, 1)], builder())
  t.equal(result.target.adapter.name, 'b')
  t.equal(result.attempts, 2)
  t.equal(a.bodies[0]?.destroyed, true)
  t.same(JSON.parse(await bodyOf(result.response)), { from: 'b', status: 200 })
})

t.test('a 4xx is the answer: not retried', async (t) => {
  const a = stub('a', 400)
  const b = stub('b', 200)
  const result = await sendWithFailover([target(a, 0), target(b, 1)], builder())
  t.equal(result.response.status, 400)
  t.equal(result.attempts, 1)
  t.equal(b.sent.length, 0)
})

t.test('a timeout after the request was sent is final', async (t) => {
  const a = stub('a', gatewayError('upstream_timeout'))
  const b = stub('b', 200)
  const error = await rejection(t, sendWithFailover([target(a, 0), target(b, 1)], builder()))
  t.equal(error?.errorName, 'upstream_timeout')
  t.equal(error?.status, 504)
  t.equal(b.sent.length, 0)
})

t.test('all unreachable: the last error is thrown (502)', async (t) => {
  const a = stub('a', refused())
  const b = stub('b', refused())
  const error = await rejection(t, sendWithFailover([target(a, 0), target(b, 1)], builder()))
  t.equal(error?.errorName, 'upstream_unreachable')
  t.equal(error?.status, 502)
  t.equal(a.sent.length + b.sent.length, 2)
})

t.test('all failing with 5xx: the client gets the last upstream answer; earlier ones are discarded', async (t) => {
  const a = stub('a', 500)
  const b = stub('b', 503)
  const result = await sendWithFailover([target(a, 0), target(b, 1)], builder())
  t.equal(result.response.status, 503)
  t.equal(result.attempts, 2)
  t.equal(a.bodies[0]?.destroyed, true)
  t.same(JSON.parse(await bodyOf(result.response)), { from: 'b', status: 503 })
})

t.test('a 5xx followed by unreachable deployments still answers with the 5xx', async (t) => {
  const a = stub('a', 502)
  const b = stub('b', refused())
  const result = await sendWithFailover([target(a, 0), target(b, 1)], builder())
  t.equal(result.response.status, 502)
  t.equal(result.attempts, 2)
  t.equal(result.target.adapter.name, 'a')
})

t.test('an aborted request is not tried further', async (t) => {
  const controller = new AbortController()
  const a: BackendAdapter = {
    ...stub('a'),
    async send() {
      controller.abort()
      throw refused()
    },
  }
  const b = stub('b', 200)
  t.equal(
    (await rejection(t, sendWithFailover([target(a, 0), target(b, 1)], builder(controller.signal))))?.errorName,
    'upstream_unreachable',
  )
  t.equal(b.sent.length, 0)
})

t.test('no deployments: upstream_unreachable', async (t) => {
  t.equal((await rejection(t, sendWithFailover([], builder())))?.errorName, 'upstream_unreachable')
})

t.test(
  'circuit breaker: a backend that keeps refusing goes to the back of the line until its cool-down ends',
  async (t) => {
    let now = 1_000
    const breaker = new CircuitBreaker({ threshold: 2, coolDownMs: 5_000, now: () => now })
    const a = stub('a', refused())
    const b = stub('b', 200)
    const targets = [target(a, 0), target(b, 1)]
    await sendWithFailover(targets, builder(), { breaker })
    t.equal(breaker.isOpen('a'), false, 'one failure is not enough')
    await sendWithFailover(targets, builder(), { breaker })
    t.equal(breaker.isOpen('a'), true)
    t.equal(a.sent.length, 2)

    const result = await sendWithFailover(targets, builder(), { breaker })
    t.equal(result.attempts, 1, 'b is tried first while a cools down')
    t.equal(a.sent.length, 2)

    now += 5_001
    t.equal(breaker.isOpen('a'), false)
    await sendWithFailover(targets, builder(), { breaker })
    t.equal(a.sent.length, 3, 'after the cool-down a is tried first again')
    t.equal(breaker.isOpen('a'), true, 'and one more failure opens it anew')

    breaker.recordSuccess('a')
    t.equal(breaker.isOpen('a'), false, 'an answer closes it')
  },
)

t.test('circuit breaker: an open backend is still tried when it is the only one left', async (t) => {
  const breaker = new CircuitBreaker({ threshold: 1, coolDownMs: 60_000, now: () => 0 })
  breaker.recordFailure('a')
  const a = stub('a', 200)
  const result = await sendWithFailover([target(a, 0)], builder(), { breaker })
  t.equal(result.response.status, 200)
  t.equal(breaker.isOpen('a'), false)
})

// --- Through real adapters and fake upstreams ---------------------------------------

async function deadPort(): Promise<number> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

function adapterFor(t: Test, name: string, baseUrl: string): BackendAdapter {
  const adapter = createOpenAIBackend(
    name,
    {
      type: 'openai',
      baseUrl,
      connectTimeoutMs: 1_000,
      responseTimeoutMs: 2_000,
      idleTimeoutMs: 2_000,
      maxSockets: 8,
      headers: {},
    },
    undefined,
  )
  t.teardown(() => adapter.close())
  return adapter
}

async function fakes(t: Test, count: number): Promise<FakeUpstream[]> {
  const all = await Promise.all(Array.from({ length: count }, () => startFakeUpstream()))
  t.teardown(() => Promise.all(all.map((u) => u.close())))
  return all
}

/** A gateway that fails over across `targets` in pickOrder, with `body` as the request body. */
async function failoverGateway(
  t: Test,
  targets: readonly FailoverTarget[],
  body: () => RequestBody,
  path = '/chat/completions',
): Promise<{ url: string; served: number[] }> {
  let counter = 0
  const served: number[] = []
  const gateway = await startGateway(async (req, res) => {
    for await (const _ of req) {
      /* the body was read by the gateway */
    }
    try {
      const { response, target } = await sendWithFailover(pickOrder(targets, counter++), (tg) =>
        upstreamRequestFor(req, res, { path, body: body(), model: tg.upstreamModel }),
      )
      served.push(target.deploymentIndex)
      res.writeHead(response.status, { 'content-type': response.headers['content-type'] ?? 'application/json' })
      for await (const chunk of response.body) res.write(chunk)
      res.end()
    } catch (err) {
      sendError({ res }, err)
    }
  })
  t.teardown(() => gateway.close())
  return { url: gateway.url, served }
}

const chat = (): RequestBody => ({ kind: 'json', value: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } })

t.test('real upstreams: the first refuses connections, the second serves', async (t) => {
  const [live] = await fakes(t, 1)
  const targets = [
    target(adapterFor(t, 'dead', `http://127.0.0.1:${await deadPort()}/v1`), 0),
    target(adapterFor(t, 'live', live!.url), 1),
  ]
  const { url, served } = await failoverGateway(t, targets, chat)
  const reply = await call(url, { body: '{}' })
  t.equal(reply.status, 200)
  t.same(served, [1])
  t.equal(live!.requests.length, 1)
})

t.test('real upstreams: a 503 moves a multipart upload on, replayed byte for byte', async (t) => {
  const [failing, live] = await fakes(t, 2)
  failing!.options.failWith = 503
  const bytes = Buffer.from(
    '--b\r\nContent-Disposition: form-data; name="file"; filename="x.bin"\r\n\r\n' +
      'z'.repeat(300_000) +
      '\r\n--b--\r\n',
  )
  const multipart = (): RequestBody => ({
    kind: 'multipart',
    fields: {},
    files: [],
    contentType: 'multipart/form-data; boundary=b',
    size: bytes.length,
    open: () => Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)], { objectMode: false }),
    dispose: async () => undefined,
  })
  const targets = [target(adapterFor(t, 'failing', failing!.url), 0), target(adapterFor(t, 'live', live!.url), 1)]
  const { url, served } = await failoverGateway(t, targets, multipart, '/audio/transcriptions')
  const reply = await call(url, { body: '{}' })
  t.equal(reply.status, 200)
  t.same(served, [1])
  const sha = createHash('sha256').update(bytes).digest('hex')
  t.equal(failing!.requests[0]?.sha256, sha, 'the failing upstream got the whole upload')
  t.equal(live!.requests[0]?.sha256, sha, 'and so did the one that served')
  t.equal((JSON.parse(reply.body) as { sha256: string }).sha256, sha)
})

t.test('real upstreams: a 400 is not retried', async (t) => {
  const [first, second] = await fakes(t, 2)
  first!.options.failWith = 400
  const targets = [target(adapterFor(t, 'first', first!.url), 0), target(adapterFor(t, 'second', second!.url), 1)]
  const { url } = await failoverGateway(t, targets, chat)
  const reply = await call(url, { body: '{}' })
  t.equal(reply.status, 400)
  t.equal(second!.requests.length, 0)
})

t.test('real upstreams: all down is a 502 upstream_unreachable', async (t) => {
  const targets = [
    target(adapterFor(t, 'dead-1', `http://127.0.0.1:${await deadPort()}/v1`), 0),
    target(adapterFor(t, 'dead-2', `http://127.0.0.1:${await deadPort()}/v1`), 1),
  ]
  const { url } = await failoverGateway(t, targets, chat)
  const reply = await call(url, { body: '{}' })
  t.equal(reply.status, 502)
  t.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'upstream_unreachable')
})

t.test('real upstreams: load spreads over two healthy deployments by weight', async (t) => {
  const [heavy, light] = await fakes(t, 2)
  const targets = [target(adapterFor(t, 'heavy', heavy!.url), 0, 3), target(adapterFor(t, 'light', light!.url), 1, 1)]
  const { url, served } = await failoverGateway(t, targets, chat)
  for (let i = 0; i < 12; i++) t.equal((await call(url, { body: '{}' })).status, 200)
  t.equal(heavy!.requests.length, 9)
  t.equal(light!.requests.length, 3)
  t.equal(served.length, 12)
})

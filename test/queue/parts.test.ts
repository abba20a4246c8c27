// The small pieces of the queue on their own: the recorder a stored request's reply is
// relayed into, how a reply is kept, the Prefer header, the status a client sees, and
// which refusals a wait can cure.
import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { gatewayError } from '../../src/errors.ts'
import { RecordingSink, type Recording } from '../../src/proxy/recorder.ts'
import { prefersAsync } from '../../src/queue/routes.ts'
import { backoffMs, retryAfterMs, upstreamRetryable } from '../../src/queue/retry.ts'
import { statusOf } from '../../src/queue/view.ts'
import { toResult } from '../../src/queue/worker.ts'
import { newRequest, queuedAs } from './store-contract.ts'

t.test('the recorder keeps status, headers and body, up to its limit, and ends like a response', async (t) => {
  const sink = new RecordingSink(10)
  let closed = 0
  sink.on('close', () => {
    closed++
  })
  sink.statusCode = 201
  sink.setHeader('Content-Type', 'text/plain')
  t.ok(sink.hasHeader('content-type'))
  t.ok(sink.write('hello '))
  sink.end(Buffer.from('world!'))
  t.throws(() => sink.setHeader('x-late', '1'), 'no header after the body started')
  const r = sink.recording()
  t.equal(r.status, 201)
  t.same(r.headers, { 'content-type': 'text/plain' })
  t.equal(r.body.toString(), 'hello worl')
  t.ok(r.truncated)
  t.ok(r.complete)
  t.ok(sink.writableFinished)
  t.equal(closed, 1)
  const cut = new RecordingSink(100)
  cut.write('partial')
  cut.destroy()
  await new Promise((done) => setImmediate(done))
  t.notOk(cut.recording().complete)
  t.ok(cut.destroyed)
})

t.test('a reply is kept as JSON, text or base64', async (t) => {
  const usage = { inputTokens: 1, outputTokens: 2 }
  const rec = (type: string | undefined, body: string | Buffer): Recording => ({
    status: 200,
    headers: type ? { 'content-type': type } : {},
    body: Buffer.from(body),
    truncated: false,
    complete: true,
  })
  t.same(toResult(rec('application/json; charset=utf-8', '{"a":1}'), usage), {
    statusCode: 200,
    contentType: 'application/json; charset=utf-8',
    usage,
    encoding: 'json',
    body: { a: 1 },
  })
  t.equal(toResult(rec('text/event-stream', 'data: x\n\n'), usage).encoding, 'text')
  t.equal(toResult(rec('application/json', '{broken'), usage).encoding, 'text', 'broken JSON is kept as text')
  t.same(toResult(rec('audio/mpeg', Buffer.from([0, 255])), usage).body, 'AP8=')
  t.equal(toResult(rec(undefined, ''), usage).encoding, 'none')
})

t.test('Prefer: respond-async, alone or among others', async (t) => {
  const req = (prefer?: string | string[]): IncomingMessage =>
    ({ headers: prefer === undefined ? {} : { prefer } }) as unknown as IncomingMessage
  t.ok(prefersAsync(req('respond-async')))
  t.ok(prefersAsync(req('Respond-Async')))
  t.ok(prefersAsync(req('wait=10, respond-async')))
  t.ok(prefersAsync(req(['return=minimal', 'respond-async; foo=bar'])))
  t.notOk(prefersAsync(req()))
  t.notOk(prefersAsync(req('return=representation')))
  t.notOk(prefersAsync(req('respond-asyncx')))
})

t.test('a client sees "expired" once a result (or a wait) outlives its time to live', async (t) => {
  const base = queuedAs(newRequest({ createdAt: 1000 }))
  t.equal(statusOf(base, 1500, 1000), 'queued')
  t.equal(statusOf(base, 2000, 1000), 'expired', 'waited as long as a result is kept')
  const done = { ...base, status: 'completed' as const, finishedAt: 5000 }
  t.equal(statusOf(done, 5999, 1000), 'completed')
  t.equal(statusOf(done, 6000, 1000), 'expired')
  t.equal(statusOf({ ...base, status: 'in_progress' }, 9999, 1000), 'in_progress', 'a running request does not expire')
})

t.test('only a refusal over a window (or a store blip) is waited for', async (t) => {
  t.equal(
    retryAfterMs(gatewayError('rate_limit_requests', { headers: { 'retry-after-ms': '1200', 'retry-after': '2' } })),
    1200,
  )
  t.equal(
    retryAfterMs(gatewayError('rate_limit_tokens', { headers: { 'x-should-retry': 'false' } })),
    undefined,
    'can never fit',
  )
  t.equal(retryAfterMs(gatewayError('insufficient_quota')), undefined)
  t.equal(retryAfterMs(gatewayError('store_unavailable', { headers: { 'retry-after': '1' } })), 1000)
  t.equal(retryAfterMs(new Error('boom')), undefined)
  t.ok(upstreamRetryable(429) && upstreamRetryable(503) && !upstreamRetryable(400))
  for (let i = 0; i < 20; i++) {
    const b = backoffMs(100, 3)
    t.ok(b >= 320 && b <= 480, `third try backs off ~400 ms (${b})`)
  }
  t.ok(backoffMs(1000, 30) <= 72_000, 'capped')
})

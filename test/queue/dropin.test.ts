// The drop-in /queue on the embedded store, at its edges: a call that waits too long gets
// queue_timeout; a client that leaves while waiting leaves the line at once, is never
// sent upstream and is not charged; a call that can never fit is refused at once; a
// stream waits, then streams; an upstream 429/5xx goes back in line with backoff a
// bounded number of times. And what operators see: /admin/queue, `tollgate queue`, metrics.
import OpenAI from 'openai'
import t from 'tap'
import { adminCall } from '../admin/helpers.ts'
import { runQueueCommand } from '../../src/cli/queue.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { ASYNC, chatBody, embeddedGateway, MODEL, post, sleep, until, type QueueView } from './helpers.ts'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const withFake = (doc: Record<string, unknown>): void => {
  ;(doc.backends as Record<string, unknown>).fake = { type: 'openai', baseUrl: upstream.url }
  ;(doc.models as unknown[]).push({ name: 'fake-model', kind: 'chat', deployments: [{ backend: 'fake' }] })
}
// Short windows, so waits end soon; and a gateway whose window outlasts its longest wait.
const gw = await embeddedGateway(t, { windowMs: 1000, queue: { upstreamRetries: 2 }, config: withFake })
// Its calls wait out maxWaitMs rather than being refused at once on a predicted wait (deadline.ts).
const gwT = await embeddedGateway(t, { windowMs: 5000, queue: { maxWaitMs: 800, deadlines: 'wait' } })
const admin = adminCall(gw.url, gw.adminToken)
const adminT = adminCall(gwT.url, gwT.adminToken)
const queued = `${gw.url}/queue/chat/completions`
const queuedT = `${gwT.url}/queue/chat/completions`
const oneAtATime = (model = MODEL): Record<string, unknown> => ({
  tier: 'Standard4000',
  limits: { [model]: { rpm: 1 } },
})
const lineOf = async (keyId: string, via = admin): Promise<{ depth: number; oldest_wait_ms: number } | undefined> =>
  (await via('GET', '/admin/queue'))
    .json<{ data: Array<{ key_id: string; depth: number; oldest_wait_ms: number }> }>()
    .data.find((l) => l.key_id === keyId)

t.test('a call that waits longer than queue.maxWaitMs gets queue_timeout, uncharged', async (t) => {
  // A first call of another key warms the gateway up: on a loaded machine the first call
  // after a start can outlast the 5 s window, and the second would then be admitted at once.
  const warm = await gwT.createKey({ tier: 'Standard4000' })
  t.equal((await post(queuedT, warm.key, chatBody('warm'))).status, 200)
  const { id, key } = await gwT.createKey(oneAtATime())
  t.equal((await post(queuedT, key, chatBody('first'))).status, 200)
  const started = Date.now()
  const timedOut = await post(queuedT, key, chatBody('second'))
  const waited = Date.now() - started
  t.equal(timedOut.status, 504)
  const error = timedOut.json().error
  t.equal(error.code, 'queue_timeout')
  t.equal(error.type, 'server_error')
  t.match(error.message, /waited 0\.[89] s in line for Mistral-Small-24B-Instruct-2501/)
  t.match(error.message, /nothing was charged/)
  t.equal(timedOut.headers.get('x-should-retry'), 'false', 'SDKs do not retry it')
  t.ok(waited >= 750 && waited < 4000, `answered after ${waited} ms`)
  t.equal((await lineOf(id, adminT))?.depth ?? 0, 0, 'it left the line')
  const usage = (await adminT('GET', `/admin/keys/${id}/usage`)).json<{ totals: { requests: number } }>()
  t.equal(usage.totals.requests, 1, 'only the first call was charged')
})

t.test('a client that leaves while waiting leaves the line at once: no upstream call, nothing charged', async (t) => {
  const { id, key } = await gw.createKey(oneAtATime('fake-model'))
  const before = upstream.requests.length
  t.equal(
    (await post(queued, key, { model: 'fake-model', messages: [{ role: 'user', content: 'first' }] })).status,
    200,
  )
  const controller = new AbortController()
  const leaving = post(
    queued,
    key,
    { model: 'fake-model', messages: [{ role: 'user', content: 'leaves' }] },
    {},
    controller.signal,
  ).catch((e: unknown) => e)
  for (let i = 0; i < 100 && (await lineOf(id))?.depth !== 1; i++) await sleep(10)
  t.equal((await lineOf(id))?.depth, 1, 'the second call waits in line')
  controller.abort()
  t.ok((await leaving) instanceof Error, 'the client gave up')
  let depth = 1
  for (let i = 0; i < 50 && depth !== 0; i++) {
    depth = (await lineOf(id))?.depth ?? 0
    if (depth !== 0) await sleep(10)
  }
  t.equal(depth, 0, 'its place is gone at once')
  await sleep(1500)
  t.equal(
    upstream.requests.length - before,
    1,
    'after the window reset, still only the first call reached the upstream',
  )
  const usage = (await admin('GET', `/admin/keys/${id}/usage`)).json<{ totals: { requests: number } }>()
  t.equal(usage.totals.requests, 1, 'and only it was charged')
})

t.test('a call that can never fit is refused at once, even behind a waiting line', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 1, output_tpm: 100 } } })
  t.equal((await post(queued, key, chatBody('first'))).status, 200)
  const waiting = post(queued, key, chatBody('waits'))
  await sleep(100)
  const started = Date.now()
  const refused = await post(queued, key, chatBody('too big', { max_tokens: 500 }))
  t.ok(Date.now() - started < 1000, 'answered without waiting')
  t.equal(refused.status, 429)
  t.match(refused.json().error.message, /can never fit/)
  t.equal(refused.headers.get('x-should-retry'), 'false')
  const asyncRefused = await post(queued, key, chatBody('too big', { max_tokens: 500 }), ASYNC)
  t.equal(asyncRefused.status, 429, 'an asynchronous one is refused at once too, not stored')
  t.equal((await waiting).status, 200, 'the waiting call went through')

  const spent = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { quota: 5 } } })
  t.equal((await post(queued, spent.key, chatBody('uses the quota'))).status, 200)
  const quota = await post(queued, spent.key, chatBody('over'))
  t.equal(quota.status, 429)
  t.equal(quota.json().error.code, 'insufficient_quota')
})

t.test('a stream through /queue waits for capacity, then streams', async (t) => {
  const { key } = await gw.createKey(oneAtATime())
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/queue`, maxRetries: 0 })
  await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'first' }], max_tokens: 3 })
  const started = Date.now()
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'stream it' }],
    max_tokens: 12,
    stream: true,
    stream_options: { include_usage: true },
  })
  let text = ''
  let usage: OpenAI.CompletionUsage | null | undefined
  let chunks = 0
  for await (const chunk of stream) {
    chunks++
    text += chunk.choices[0]?.delta?.content ?? ''
    if (chunk.usage) usage = chunk.usage
  }
  t.ok(Date.now() - started > 300, 'it waited for the window first')
  t.ok(chunks > 5, `${chunks} chunks`)
  t.ok(text.length > 0, 'with content')
  t.equal(usage?.completion_tokens, 12)
})

t.test('an upstream 5xx goes back in line with backoff; after upstreamRetries it is answered', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const body = { model: 'fake-model', messages: [{ role: 'user', content: 'flaky' }] }
  const before = upstream.requests.length
  // A 500: a failure. (A 503 is a refusal, like a 429: the call waits for room instead.)
  upstream.options.failWith = 500
  const healer = (async () => {
    for (let i = 0; i < 500 && upstream.requests.length - before < 2; i++) await sleep(5)
    delete upstream.options.failWith
  })()
  const recovered = await post(queued, key, body)
  await healer
  t.equal(recovered.status, 200, 'succeeded after two 500s')
  t.equal(upstream.requests.length - before, 3, 'three upstream calls')

  upstream.options.failWith = 500
  t.teardown(() => {
    delete upstream.options.failWith
  })
  const mark = upstream.requests.length
  const failed = await post(queued, key, body)
  t.equal(failed.status, 500, "retries exhausted: the upstream's answer")
  t.equal(upstream.requests.length - mark, 3, 'one call and two retries')
  const id = (await post(queued, key, body, ASYNC)).json<QueueView>().id
  const view = await until(`${gw.url}/queue/requests/${id}`, key, ['failed', 'completed'])
  t.equal(view.status, 'failed')
  t.equal(view.response?.status_code, 500)
  t.equal(view.attempts, 3, 'an asynchronous one too: three tries')
})

t.test('operators see the lines: /admin/queue, tollgate queue, metrics', async (t) => {
  // A first call of another key warms the gateway up: on a loaded machine the first call
  // after a start can outlast the 5 s window, and the second would then be admitted at once.
  const warm = await gwT.createKey({ tier: 'Standard4000' })
  t.equal((await post(queuedT, warm.key, chatBody('warm'))).status, 200)
  const { id, key } = await gwT.createKey(oneAtATime())
  t.equal((await post(queuedT, key, chatBody('first'))).status, 200)
  const asyncId = (await post(queuedT, key, chatBody('stored'), ASYNC)).json<QueueView>().id
  await sleep(200)
  const line = await lineOf(id, adminT)
  t.equal(line?.depth, 1)
  t.ok((line?.oldest_wait_ms ?? 0) >= 150, `oldest wait ${line?.oldest_wait_ms} ms`)

  const out: string[] = []
  const io = {
    env: { TOLLGATE_URL: gwT.url, TOLLGATE_ADMIN_TOKEN: gwT.adminToken },
    stdout: (s: string) => {
      out.push(s)
    },
    stderr: (s: string) => {
      out.push(s)
    },
  }
  t.equal(await runQueueCommand(['list'], io), 0)
  t.match(out.join(''), new RegExp(`${id}\\s+${MODEL}\\s+1\\s+`))
  out.length = 0
  t.equal(await runQueueCommand(['show', asyncId], io), 0)
  t.match(out.join(''), /Status:\s+queued/)
  t.match(out.join(''), /Position:\s+0/)
  out.length = 0
  t.equal(await runQueueCommand(['cancel', asyncId, '--json'], io), 0)
  t.equal(JSON.parse(out.join('')).status, 'cancelled')
  out.length = 0
  t.equal(await runQueueCommand(['show', 'qreq_missing'], io), 1, 'an unknown id: exit 1')
  t.match(out.join(''), /404/)
  t.equal(await runQueueCommand(['frobnicate'], io), 64)

  const waiting = post(queuedT, key, chatBody('waits for the metric'))
  await sleep(200)
  const metrics = await (await fetch(`${gwT.metricsUrl}/metrics`)).text()
  t.match(metrics, new RegExp(`tollgate_queue_depth\\{model="${MODEL}"\\} 1`))
  t.match(metrics, /tollgate_queue_worker_up 1/)
  t.equal((await waiting).status, 504, 'it waited past queue.maxWaitMs')
  const after = await (await fetch(`${gwT.metricsUrl}/metrics`)).text()
  t.match(after, /tollgate_queue_wait_seconds_count\{mode="dropin"\} [1-9]/)
  t.match(after, /tollgate_queue_requests_total\{mode="dropin",outcome="timeout"\} [1-9]/)
  const ready = (await (await fetch(`${gwT.url}/readyz`)).json()) as Record<string, unknown>
  t.equal(ready.queue_worker, 'running')
})

t.test('at shutdown, calls still waiting get 503 at once (they may go to another instance)', async (t) => {
  const own = await embeddedGateway(t, { windowMs: 30_000 })
  const { key } = await own.createKey(oneAtATime())
  t.equal((await post(`${own.url}/queue/chat/completions`, key, chatBody('first'))).status, 200)
  const waiting = post(`${own.url}/queue/chat/completions`, key, chatBody('waits'))
  await sleep(300)
  const started = Date.now()
  const stopped = own.stop()
  const answer = await waiting
  t.equal(answer.status, 503)
  t.equal(answer.json().error.code, 'shutting_down')
  t.ok(Date.now() - started < 5000, 'answered at once, not after the grace')
  t.equal(await stopped, 0)
})

// Priority classes and deadlines on /queue, over two gateways on one Redis: under
// contention a priority call joins ahead of the flex calls waiting in its key's line (sent
// through the other gateway) and is admitted before every one of them, flex calls keep
// their order among themselves; uncontended, every class is admitted at once. A call whose
// predicted wait (the line ahead of it, or the limiter's retry-after at its head) is longer
// than its x-tollgate-max-wait-ms is answered 429 queue_deadline at once, with the
// prediction as its retry-after-ms, and leaves nothing in line; one that may wait is served,
// and the prediction's error shows in the metrics.
import OpenAI from 'openai'
import t from 'tap'
import { adminCall } from '../admin/helpers.ts'
import { chatBody, cluster, MODEL, post } from './helpers.ts'

const WINDOW_MS = 3000
const c = await cluster(t)
const a = await c.start({ windowMs: WINDOW_MS })
const b = await c.start({ windowMs: WINDOW_MS })
const admin = adminCall(a.url, c.adminToken)

const depthOf = async (keyId: string): Promise<number> =>
  (await admin('GET', '/admin/queue'))
    .json<{ data: Array<{ key_id: string; depth: number }> }>()
    .data.find((l) => l.key_id === keyId)?.depth ?? 0
/** Until the key's line holds `depth` calls (bounded). */
const joined = async (keyId: string, depth: number): Promise<void> => {
  const until = Date.now() + 20_000
  while ((await depthOf(keyId)) < depth) {
    if (Date.now() > until) throw new Error(`the line never held ${depth}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}
const oneAtATime = { tier: 'Standard4000', limits: { [MODEL]: { rpm: 1 } } }

// Both gateways warmed up (tokenizer, key cache) with a key of their own.
const warm = (await admin('POST', '/admin/keys', { tier: 'Standard4000' })).json<{ key: string }>().key
for (const gw of [a, b]) {
  const res = await post(`${gw.url}/queue/chat/completions`, warm, chatBody('warm'))
  if (res.status !== 200) throw new Error(`warm-up: ${res.status}`)
}

t.test('under contention priority overtakes the flex calls waiting in line; flex keeps its order', async (t) => {
  const { id, key } = (await admin('POST', '/admin/keys', oneAtATime)).json<{ id: string; key: string }>()
  const done: string[] = []
  const send = (gw: typeof a, name: string, tier: string): Promise<number> =>
    post(`${gw.url}/queue/chat/completions`, key, chatBody(name, { service_tier: tier })).then((r) => {
      t.equal(r.json<{ service_tier: string }>().service_tier, tier, `${name} says ${tier}`)
      done.push(name)
      return r.status
    })
  // The window's one request is spent: everything after waits in line.
  t.equal(await send(a, 'first', 'default'), 200)
  const calls: Array<Promise<number>> = []
  for (const name of ['flex-0', 'flex-1', 'flex-2']) {
    calls.push(send(a, name, 'flex'))
    await joined(id, calls.length)
  }
  calls.push(send(b, 'priority', 'priority'))
  await joined(id, 4)
  // Flex calls still waiting now (a window may have rolled while they joined) come after it.
  const waiting = ['flex-0', 'flex-1', 'flex-2'].filter((n) => !done.includes(n))
  t.ok(waiting.length >= 2, `${waiting.length} flex calls were waiting when priority joined`)
  t.same(await Promise.all(calls), [200, 200, 200, 200])
  const order = done.slice(1)
  t.ok(
    waiting.every((n) => order.indexOf(n) > order.indexOf('priority')),
    `priority before every flex call that waited: ${order.join(', ')}`,
  )
  const flexOrder = order.filter((n) => n.startsWith('flex'))
  t.same(flexOrder, ['flex-0', 'flex-1', 'flex-2'], 'flex calls in the order they joined')
})

t.test('uncontended, every class is admitted at once, within a short deadline', async (t) => {
  const { key } = (await admin('POST', '/admin/keys', { tier: 'Standard4000' })).json<{ key: string }>()
  const tiers = ['flex', 'priority', 'default', 'flex', 'priority', 'default']
  const replies = await Promise.all(
    tiers.map((tier, i) =>
      // A short deadline too: a line that forms for an instant, with room for all, refuses none.
      post(`${(i % 2 === 0 ? a : b).url}/queue/chat/completions`, key, chatBody(`u${i}`, { service_tier: tier }), {
        'x-tollgate-max-wait-ms': '1000',
      }),
    ),
  )
  t.same(
    replies.map((r) => r.status),
    tiers.map(() => 200),
  )
  const waits = replies.map((r) => Number(r.headers.get('x-queue-wait-ms')))
  // Nobody waited for anyone: far less than the window any wait for room would take.
  t.ok(
    waits.every((w) => w < WINDOW_MS / 2),
    `waits ${waits.join(', ')} ms`,
  )
})

t.test('a deadline shorter than the predicted wait is refused at once, with the prediction as its hint', async (t) => {
  const { id, key } = (await admin('POST', '/admin/keys', oneAtATime)).json<{ id: string; key: string }>()
  const sdk = (gw: typeof a): OpenAI => new OpenAI({ apiKey: key, baseURL: `${gw.url}/queue`, maxRetries: 0 })
  const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 5 }
  await sdk(a).chat.completions.create(ask)

  // At the head: the limiter's retry-after (the window's end) is beyond the caller's 500 ms.
  let started = Date.now()
  const atHead = await sdk(b)
    .chat.completions.create(ask, { headers: { 'x-tollgate-max-wait-ms': '500' } })
    .catch((e: unknown) => e)
  let took = Date.now() - started
  t.ok(atHead instanceof OpenAI.RateLimitError, '429')
  const headError = atHead as InstanceType<typeof OpenAI.RateLimitError>
  t.equal((headError.error as { code?: string }).code, 'queue_deadline')
  const hint = Number(headError.headers?.get('retry-after-ms'))
  t.ok(hint > 500 && hint <= WINDOW_MS, `retry-after-ms ${hint}: past the deadline, within the window`)
  t.ok(took < 2000, `answered in ${took} ms, not held to its deadline and beyond`)
  t.equal(await depthOf(id), 0, 'nothing left in line')

  // Behind one waiting call: one window per call ahead (rpm 1) is beyond 2 s.
  const waiter = sdk(a).chat.completions.create(ask)
  await joined(id, 1)
  started = Date.now()
  const behind = await sdk(b)
    .chat.completions.create(ask, { headers: { 'x-tollgate-max-wait-ms': '2000' } })
    .catch((e: unknown) => e)
  took = Date.now() - started
  t.ok(behind instanceof OpenAI.RateLimitError, '429')
  const behindError = behind as InstanceType<typeof OpenAI.RateLimitError>
  t.equal((behindError.error as { code?: string }).code, 'queue_deadline')
  t.match((behindError.error as { message?: string }).message, /1 ahead of it/)
  const behindHint = Number(behindError.headers?.get('retry-after-ms'))
  // The window's end for the call ahead, then a whole window for this one (rpm 1).
  t.ok(
    behindHint > WINDOW_MS && behindHint <= 2 * WINDOW_MS,
    `retry-after-ms ${behindHint}: this window, then the next`,
  )
  t.ok(took < 1500, `answered in ${took} ms`)

  // One that may wait long enough waits and is served; its prediction's error is measured.
  const patient = sdk(b).chat.completions.create(ask, { headers: { 'x-tollgate-max-wait-ms': '20000' } })
  const [first, second] = await Promise.all([waiter, patient])
  t.equal(first.object, 'chat.completion')
  t.equal(second.object, 'chat.completion')
  const metrics = await (await fetch(`${b.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_queue_wait_prediction_ratio_count\{class="default"\} [1-9]/)
  const sum = Number(/tollgate_queue_wait_prediction_ratio_sum\{class="default"\} ([\d.e+-]+)/.exec(metrics)?.[1])
  const count = Number(/tollgate_queue_wait_prediction_ratio_count\{class="default"\} (\d+)/.exec(metrics)?.[1])
  t.ok(sum / count > 0.5 && sum / count < 1.5, `actual ÷ predicted wait: ${(sum / count).toFixed(3)} over ${count}`)
  t.match(metrics, /tollgate_queue_requests_total\{mode="dropin",outcome="deadline"\} 2/)
  const usage = (await admin('GET', `/admin/keys/${id}/usage`)).json<{ totals: { requests: number } }>()
  t.equal(usage.totals.requests, 3, 'the refused calls were not charged')
})

t.test('a deadline that is not a whole number of milliseconds is a 400', async (t) => {
  const res = await post(`${a.url}/queue/chat/completions`, warm, chatBody('bad'), { 'x-tollgate-max-wait-ms': 'soon' })
  t.equal(res.status, 400)
  t.equal(res.json<{ error: { code: string } }>().error.code, 'invalid_header')
})

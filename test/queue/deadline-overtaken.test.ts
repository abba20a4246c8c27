// A deadline predicted with the calls that will overtake the call (issue #39, item 4), on a
// running gateway with one deployment of one slot whose upstream holds every call until the
// test lets it go. A default call waits while priority calls of its key keep arriving behind
// it and going ahead of it, each admitted within moments of arriving. A second default call
// with a deadline then joins: the calls ahead of it at arrival (one) and how fast the priority
// calls passed would predict a short wait, but its class has not moved at all meanwhile, so
// its wait is predicted from that (the default call still waiting bounds its class's pace)
// and it is refused at once with 429 queue_deadline and a retry hint beyond its deadline,
// instead of waiting until its deadline and ending 504. (Before wait-predictor.ts, it waited.)
import t from 'tap'
import { startGatedUpstream } from '../helpers/gated-upstream.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'
import { startTollgate } from '../helpers/gateway.ts'

const MODEL = 'one-slot-model'
const MAX_WAIT_MS = 60_000
/** The second default call's deadline; the first has waited longer than this before it joins. */
const DEADLINE_MS = 1000

const up = await startGatedUpstream()
t.teardown(() => up.close())
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), gated: { type: 'openai', baseUrl: up.url } }
    doc.models = [
      ...(doc.models as object[]),
      { name: MODEL, kind: 'chat', deployments: [{ backend: 'gated', maxConcurrent: 1 }] },
    ]
    doc.plans = { defaultTier: 'Open', tiers: { Open: { default: { rpm: 100_000 } } } }
    ;(doc.queue as Record<string, unknown>).maxWaitMs = MAX_WAIT_MS
  },
})
t.teardown(() => gw.stop())
const { key } = await gw.createKey({ name: 'overtaken' })

interface Answer {
  readonly status: number
  readonly code: string
  readonly retryMs: number
  readonly message: string
}

async function call(name: string, tier: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: name }],
      max_tokens: 5,
      service_tier: tier,
    }),
  })
  const json = (await res.json()) as { error?: { code?: string; message?: string } }
  return {
    status: res.status,
    code: json.error?.code ?? '',
    retryMs: Number(res.headers.get('retry-after-ms')),
    message: json.error?.message ?? '',
  }
}

/** Until `n` calls wait for the deployment to have room (the capacity line). */
async function waitingForRoom(n: number): Promise<void> {
  const seen = await pollUntil(
    () => counterSum(gw, 'tollgate_queue_capacity_waiting'),
    (count) => count >= n,
    500,
    5,
  )
  if (!seen.met) throw new Error(`only ${seen.value} calls waited for room, not ${n}`)
}

t.test('a default call overtaken while it waits: the next one with a short deadline is refused at once', async (t) => {
  // The slot is taken, then a default call waits for it.
  const answers: Array<Promise<Answer>> = [call('holder', 'priority')]
  await up.arrived(1)
  const firstAt = Date.now()
  const first = call('default-1', 'default')
  await waitingForRoom(1)
  // Priority calls keep coming behind it and each goes ahead of it: one waits beside it when
  // the slot frees, and takes it.
  let overtakers = 0
  while (Date.now() - firstAt <= 1.5 * DEADLINE_MS) {
    answers.push(call(`priority-${overtakers}`, 'priority'))
    await waitingForRoom(2)
    up.release(1)
    await up.arrived(overtakers + 2)
    t.equal(up.received.at(-1), `priority-${overtakers}`, 'the priority call went ahead of the default one')
    overtakers++
  }
  t.ok(overtakers >= 2, `${overtakers} priority calls overtook it`)

  // One call ahead of it now (the first default call); the priority calls passed in moments.
  const started = Date.now()
  const second = await call('default-2', 'default', { 'x-tollgate-max-wait-ms': String(DEADLINE_MS) })
  const took = Date.now() - started
  t.equal(second.status, 429, `refused, not let wait (${second.status} ${second.code} after ${took} ms)`)
  t.equal(second.code, 'queue_deadline')
  t.match(second.message, /1 ahead of it/)
  t.ok(took < DEADLINE_MS / 2, `answered at once: ${took} ms`)
  t.ok(
    second.retryMs > DEADLINE_MS && second.retryMs <= MAX_WAIT_MS,
    `retry-after-ms ${second.retryMs}: beyond its deadline, within the queue's longest wait`,
  )
  t.notOk(up.received.includes('default-2'), 'it never reached the upstream')

  // Everyone else is served once the priority calls stop.
  up.release()
  const released = await pollUntil(
    async () => {
      up.release()
      return up.received.includes('default-1')
    },
    (done) => done,
    500,
    5,
  )
  t.ok(released.met, 'the first default call reached the upstream')
  up.release()
  t.equal((await first).status, 200, 'the first default call is served')
  t.same(
    (await Promise.all(answers)).map((a) => a.status),
    answers.map(() => 200),
  )
})

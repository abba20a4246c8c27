// Upstream capacity end to end (issue #22), with the official openai SDK against a running
// gateway in front of test upstreams that keep their own quota as Azure does
// (test/helpers/quota-upstream.ts): an upstream 429 before any body moves the call to the
// next deployment and the client never sees it; the refusing deployment gets nothing until
// its retry-after-ms has passed; every deployment full is the gateway's own 429
// (upstream_capacity_exceeded) with retry-after-ms and the key's x-ratelimit-* headers; and
// a /queue call with every deployment cooling down waits, then succeeds.
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { counterSum as counter } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'
import { ASYNC, post, until, type QueueView } from '../queue/helpers.ts'
import { startQuotaUpstream, type QuotaUpstream } from '../helpers/quota-upstream.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'
const ask = { model: CHAT, messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 5 }

/** The model served by the given deployments (backend name → upstream, plus what each declares). */
function deployTo(deployments: Record<string, { upstream: QuotaUpstream; declare?: Record<string, number> }>) {
  return (doc: Record<string, unknown>): void => {
    const backends = doc.backends as Record<string, unknown>
    for (const [name, d] of Object.entries(deployments)) backends[name] = { type: 'openai', baseUrl: d.upstream.url }
    const models = doc.models as Array<{ name: string; deployments: unknown[] }>
    const model = models.find((m) => m.name === CHAT)
    if (model === undefined) throw new Error(`${CHAT} is not in the default config`)
    model.deployments = Object.entries(deployments).map(([backend, d]) => ({ backend, ...d.declare }))
  }
}

/** One call straight to the upstream, spending its quota. */
async function spend(upstream: QuotaUpstream): Promise<void> {
  const res = await fetch(`${upstream.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'fill' }], max_tokens: 5 }),
  })
  await res.arrayBuffer()
}

async function client(gw: RunningTollgate): Promise<OpenAI> {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  return new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
}

t.test(
  'a 429 before any body: served by the next deployment; the refusing one cools down for its retry-after-ms',
  async (t) => {
    // One call per 3 s on the first deployment; the second has no quota.
    const windowMs = 3000
    const first = await startQuotaUpstream({ rpm: 20, windowMs })
    const second = await startQuotaUpstream()
    t.teardown(() => Promise.all([first.close(), second.close()]))
    const gw = await startTollgate({ config: deployTo({ first: { upstream: first }, second: { upstream: second } }) })
    t.teardown(() => gw.stop())
    const openai = await client(gw)

    const spentAt = Date.now()
    await spend(first)
    const refusedBefore = first.stats().rateLimited
    const reply = await openai.chat.completions.create(ask)
    t.ok(reply.choices[0]?.message.content, 'the SDK call succeeds')
    t.equal(first.stats().rateLimited - refusedBefore, 1, 'the first deployment refused it (429 with retry-after-ms)')
    t.equal(second.stats().served, 1, 'the second served it')
    t.equal(
      await counter(gw, 'tollgate_upstream_refusals_total', { deployment: `first/${CHAT}`, kind: 'rate_limited' }),
      1,
    )
    t.equal(
      await counter(gw, 'tollgate_deployment_moves_total', {
        model: CHAT,
        from: `first/${CHAT}`,
        to: `second/${CHAT}`,
      }),
      1,
    )

    // Until the named wait is over, the refusing deployment gets no call at all.
    const before = first.stats().requests
    // The spent call left the upstream's window no sooner than windowMs after spentAt, and the
    // refusal's retry-after-ms named that moment: the cooldown lasts at least until then. (Not
    // counted from refusedAt: on a loaded machine the refused call may take half the window.)
    const cooldownEnds = spentAt + windowMs
    let calls = 0
    let reachedFirst = 0
    // Bounded: a quiet machine answers hundreds a second, and the key's own limit is 600 a minute.
    while (Date.now() < cooldownEnds && calls < 100) {
      await openai.chat.completions.create(ask)
      calls++
      if (Date.now() < cooldownEnds && first.stats().requests !== before) reachedFirst++
    }
    t.ok(calls > 0, `${calls} calls during the cooldown`)
    t.equal(reachedFirst, 0, 'none of them reached the cooling deployment')
    // Then it gets traffic again.
    const back = await pollUntil(
      async () => {
        await openai.chat.completions.create(ask)
        return first.stats().served
      },
      (served) => served > 1,
      200,
      20,
    )
    t.ok(back.met, 'the first deployment serves again once its cooldown is over')
    t.equal(first.stats().rateLimited - refusedBefore, 1, 'and it was never refused again')
  },
)

t.test(
  'every deployment full: the gateway 429 upstream_capacity_exceeded, retry-after-ms, the key headers',
  async (t) => {
    const a = await startQuotaUpstream()
    const b = await startQuotaUpstream()
    t.teardown(() => Promise.all([a.close(), b.close()]))
    const gw = await startTollgate({
      config: deployTo({ a: { upstream: a, declare: { rpm: 1 } }, b: { upstream: b, declare: { rpm: 1 } } }),
    })
    t.teardown(() => gw.stop())
    const openai = await client(gw)
    await openai.chat.completions.create(ask)
    await openai.chat.completions.create(ask)
    t.equal(a.stats().served + b.stats().served, 2, 'one call on each')
    const refused = await openai.chat.completions.create(ask).catch((e: unknown) => e)
    t.ok(refused instanceof OpenAI.APIError, 'the SDK (maxRetries 0) gets an error')
    const error = refused as InstanceType<typeof OpenAI.APIError>
    t.equal(error.status, 429)
    t.equal(error.code, 'upstream_capacity_exceeded')
    t.equal(error.type, 'requests')
    const ms = Number(error.headers?.get('retry-after-ms'))
    // The count covers a window and one bucket (capacity/port.ts): never sooner than the upstream allows.
    t.ok(ms > 0 && ms <= 70_000, `retry-after-ms ${ms}`)
    t.equal(error.headers?.get('retry-after'), String(Math.ceil(ms / 1000)))
    t.ok(error.headers?.get('x-ratelimit-limit-requests'), "the key's x-ratelimit-* headers")
    t.ok(error.headers?.get('x-ratelimit-remaining-requests'))
    t.equal(a.stats().requests + b.stats().requests, 2, 'nothing reached an upstream')
  },
)

t.test('/queue: with every deployment cooling down, a drop-in call waits, then succeeds', async (t) => {
  // One call per 3 s each (sliding): a loaded machine's pauses between spending and asking stay inside it.
  const a = await startQuotaUpstream({ rpm: 20, windowMs: 3000 })
  const b = await startQuotaUpstream({ rpm: 20, windowMs: 3000 })
  t.teardown(() => Promise.all([a.close(), b.close()]))
  const gw = await startTollgate({ config: deployTo({ a: { upstream: a }, b: { upstream: b } }) })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const v2 = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  const queue = new OpenAI({ apiKey: key, baseURL: `${gw.url}/queue`, maxRetries: 0 })

  await Promise.all([spend(a), spend(b)])
  // Both refuse this one: now both cool down (up to 3 s).
  await v2.chat.completions.create(ask).catch(() => undefined)
  t.equal(a.stats().rateLimited + b.stats().rateLimited, 2, 'both deployments refused')
  const onV2 = await v2.chat.completions.create(ask).catch((e: unknown) => e)
  t.ok(onV2 instanceof OpenAI.APIError && onV2.code === 'upstream_capacity_exceeded', '/v2 answers the gateway 429')

  const started = Date.now()
  const { data, response } = await queue.chat.completions.create(ask).withResponse()
  t.ok(data.choices[0]?.message.content, 'the /queue call succeeds')
  t.ok(Date.now() - started > 100, 'after waiting for a deployment with room')
  t.ok(response.headers.get('x-queue-wait-ms') !== null)
  t.equal(a.stats().rateLimited + b.stats().rateLimited, 2, 'no further refusal: it waited out the cooldown')

  // A stored request too: both cool down again, and it waits without using up its retries.
  await Promise.all([spend(a), spend(b)])
  await v2.chat.completions.create(ask).catch(() => undefined)
  t.equal(a.stats().rateLimited + b.stats().rateLimited, 4, 'both deployments refused again')
  const stored = await post(`${gw.url}/queue/chat/completions`, key, ask, ASYNC)
  const id = stored.json<QueueView>().id
  const view = await until(`${gw.url}/queue/requests/${id}`, key, ['completed', 'failed'])
  t.equal(view.status, 'completed', 'the asynchronous request completes')
  t.equal(view.attempts, 1, 'in one attempt: waiting for room is not an upstream retry')
  t.equal(a.stats().rateLimited + b.stats().rateLimited, 4, 'and no further refusal')
})

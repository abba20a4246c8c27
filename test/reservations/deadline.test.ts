// A /queue call's deadline is predicted on the reservation admission makes (issue #39): a
// call without max_tokens, on a key whose calls are known to be short, is predicted to fit
// in the room its window has left, and so is served within a short deadline; on a tier that
// keeps the fixed reservation the same call is predicted to wait for the window's end and is
// refused at once (429 queue_deadline), as every such call was before. A wait predicted on
// the learned reservation is measured in tollgate_queue_wait_prediction_ratio (near 1).
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const MODEL = 'learn-model'
const OUTPUT_TPM = 1500
/** What the upstream writes per reply (the gateway sends it a cap of 1,024: the fixed reservation). */
const SHORT = 40
const words = (n: number): string => Array.from({ length: n }, () => 'w').join(' ')

const up = await startFakeUpstream({ replyText: words(SHORT) })
t.teardown(() => up.close())
const gw: RunningTollgate = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: up.url } }
    doc.models = [...(doc.models as object[]), { name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
    doc.plans = {
      defaultTier: 'Learned',
      tiers: {
        Learned: { outputReservation: { mode: 'learned', minSamples: 5 }, default: { output_tpm: OUTPUT_TPM } },
        Fixed: { outputReservation: { mode: 'fixed' }, default: { output_tpm: OUTPUT_TPM } },
      },
    }
  },
})
t.teardown(() => gw.stop())

async function call(
  path: '/v2' | '/queue',
  key: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; code: string; remaining: number; retryMs: number }> {
  const res = await fetch(`${gw.url}${path}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
  })
  const json = (await res.json()) as { error?: { code?: string } }
  return {
    status: res.status,
    code: json.error?.code ?? '',
    remaining: Number(res.headers.get('x-ratelimit-remaining-output-tokens')),
    retryMs: Number(res.headers.get('retry-after-ms')),
  }
}

/** Twelve short calls: 480 of the window's 1,500 output tokens used, 1,020 left (less than 1,024). */
async function fill(key: string): Promise<void> {
  for (let i = 0; i < 12; i++) {
    const c = await call('/v2', key)
    if (c.status !== 200) throw new Error(`filling call ${i}: ${c.status} ${c.code}`)
  }
}

t.test('a call that fits on its learned reservation is served within a short deadline', async (t) => {
  const { key } = await gw.createKey({ tier: 'Learned' })
  await fill(key)
  const served = await call('/queue', key, { 'x-tollgate-max-wait-ms': '1000' })
  t.equal(served.status, 200, `served, not refused (${served.code})`)
  t.ok(served.remaining >= OUTPUT_TPM - 13 * SHORT - 2 * SHORT, `reserved about ${SHORT}: ${served.remaining} left`)
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_queue_requests_total\{mode="dropin",outcome="admitted"\} 1/)
  t.notMatch(metrics, /outcome="deadline"/, 'no deadline refusal')
})

t.test('on the fixed reservation the same call is predicted to wait for the window and refused at once', async (t) => {
  const { key } = await gw.createKey({ tier: 'Fixed' })
  await fill(key)
  const started = Date.now()
  const refused = await call('/queue', key, { 'x-tollgate-max-wait-ms': '1000' })
  t.equal(refused.status, 429)
  t.equal(refused.code, 'queue_deadline')
  t.ok(refused.retryMs > 1000, `retry-after-ms ${refused.retryMs}: the window's end`)
  t.ok(Date.now() - started < 1000, 'answered at once')
})

t.test('a wait predicted on the learned reservation is measured: actual ÷ predicted near 1', async (t) => {
  // A gateway of its own with a 3 s window, so a call waits for the window's end.
  const small = await startTollgate({
    config: (doc) => {
      doc.limits = { windowMs: 3000 }
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: up.url } }
      doc.models = [...(doc.models as object[]), { name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      doc.plans = {
        defaultTier: 'Learned',
        tiers: {
          Learned: { outputReservation: { mode: 'learned', minSamples: 5 }, default: { output_tpm: 400 } },
          // Calls here teach the model's sketch, which the Learned tier falls back to.
          Open: { default: { rpm: 1000 } },
        },
      }
    },
  })
  t.teardown(() => small.stop())
  const send = (key: string, headers: Record<string, string> = {}, path = '/v2'): Promise<Response> =>
    fetch(`${small.url}${path}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    })
  // The model's calls teach its length on another tier (each call then reserves about 40:
  // the fixed 1,024 would never fit in 400).
  const learner = await small.createKey({ tier: 'Open' })
  for (let i = 0; i < 6; i++) await (await send(learner.key)).arrayBuffer()
  const { key } = await small.createKey({ tier: 'Learned' })
  // Calls of about 40 until the window's 400 refuses one: the next waits for the window's end.
  let filled = 0
  for (let i = 0; i < 40; i++) {
    const res = await send(key)
    await res.arrayBuffer()
    if (res.status !== 200) break
    filled++
  }
  const res = await send(key, { 'x-tollgate-max-wait-ms': '10000' }, '/queue')
  const body = await res.text()
  t.equal(res.status, 200, `served at the window’s end: ${body.slice(0, 300)} (filled ${filled})`)
  const waited = Number(res.headers.get('x-queue-wait-ms'))
  const metrics = await (await fetch(`${small.metricsUrl}/metrics`)).text()
  const sum = Number(/tollgate_queue_wait_prediction_ratio_sum\{class="default"\} ([\d.e+-]+)/.exec(metrics)?.[1])
  const count = Number(/tollgate_queue_wait_prediction_ratio_count\{class="default"\} (\d+)/.exec(metrics)?.[1])
  t.equal(count, 1, `the one predicted wait is measured (waited ${waited} ms)`)
  t.ok(sum > 0.5 && sum < 1.5, `actual ÷ predicted: ${sum.toFixed(3)}`)
})

// The quota-keeping test upstream, driven by the openai SDK: it enforces its RPM and TPM
// exactly (sliding window, tokens counted at arrival as Azure does), answers 429 with the
// waits and headers a real one sends, keeps count of what it saw, and plays an Ollama
// whose queue is full. The gateway's capacity tests lean on all of it.
import t, { type Test } from 'tap'
import OpenAI from 'openai'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'
import { pollUntil } from '../helpers/poll.ts'
import {
  chargedTokensOf,
  startQuotaUpstream,
  type QuotaUpstream,
  type QuotaUpstreamOptions,
} from '../helpers/quota-upstream.ts'

const T0 = 1_800_000_000_000
const ask = { model: 'gpt-4o', messages: [{ role: 'user' as const, content: 'hello world' }] }

async function upstream(
  t: Test,
  options: QuotaUpstreamOptions,
): Promise<{ up: QuotaUpstream; client: OpenAI; clock: { now: number } }> {
  const clock = { now: T0 }
  const up = await startQuotaUpstream({ now: () => clock.now, ...options })
  t.teardown(() => up.close())
  return { up, clock, client: new OpenAI({ apiKey: 'sk-test', baseURL: up.url, maxRetries: 0 }) }
}

async function refusal(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call
  } catch (error) {
    if (error instanceof OpenAI.APIError) return error
    throw error
  }
  throw new Error('the call was not refused')
}

t.test('serves JSON and SSE, with its quota in x-ratelimit-* on every response', async (t) => {
  const { up, client } = await upstream(t, { rpm: 60, tpm: 1000, replyTokens: 3 })
  const { data, response } = await client.chat.completions.create({ ...ask, max_tokens: 10 }).withResponse()
  t.equal(data.choices[0]?.message.content, 'ok ok ok')
  t.same(data.usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })
  t.equal(response.headers.get('x-ratelimit-limit-requests'), '60')
  t.equal(response.headers.get('x-ratelimit-remaining-requests'), '59')
  t.equal(response.headers.get('x-ratelimit-limit-tokens'), '1000')
  t.equal(response.headers.get('x-ratelimit-remaining-tokens'), '985', 'prompt 5 + max_tokens 10, at arrival')
  t.equal(response.headers.get('x-ratelimit-reset-requests'), '1m0s')
  const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } })
  let text = ''
  let usage: unknown = null
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage) usage = chunk.usage
  }
  t.equal(text, 'ok ok ok')
  t.same(usage, { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })
  t.same(up.stats(), {
    requests: 2,
    served: 2,
    rateLimited: 0,
    queueFull: 0,
    perMinute: [2],
    rateLimitedPerMinute: [],
    refusals: [],
    peakInFlight: 1,
    overConcurrency: 0,
  })
})

t.test('RPM: exactly the limit in any sliding minute, then 429 with the exact wait', async (t) => {
  const { up, client, clock } = await upstream(t, { rpm: 3 })
  for (const at of [0, 1000, 2000]) {
    clock.now = T0 + at
    await client.chat.completions.create(ask)
  }
  clock.now = T0 + 3000
  const refused = await refusal(client.chat.completions.create(ask))
  t.equal(refused.status, 429)
  t.equal(refused.headers?.get('retry-after-ms'), '57000', 'until the call at T0 leaves the window')
  t.equal(refused.headers?.get('retry-after'), '57')
  t.equal(refused.headers?.get('x-ratelimit-remaining-requests'), '0')
  t.equal(refused.headers?.get('x-ratelimit-reset-requests'), '57s')
  t.match(refused.message, /exceeded the call rate limit/)
  clock.now = T0 + 59_999
  t.equal((await refusal(client.chat.completions.create(ask))).headers?.get('retry-after-ms'), '1')
  clock.now = T0 + 60_000
  await client.chat.completions.create(ask)
  t.equal(
    (await refusal(client.chat.completions.create(ask))).headers?.get('retry-after-ms'),
    '1000',
    'the call at T0+1000 leaves next',
  )
  t.equal(up.stats().rateLimited, 3)
  t.equal(up.stats().served, 4)
})

t.test('TPM: prompt plus max_tokens counted at arrival; a refused call counts nothing', async (t) => {
  const { up, client, clock } = await upstream(t, { tpm: 100 })
  const body = { ...ask, max_tokens: 20 }
  t.equal(chargedTokensOf(body), 25)
  for (let i = 0; i < 4; i++) {
    clock.now = T0 + i * 10_000
    await client.chat.completions.create(body)
  }
  clock.now = T0 + 40_000
  const refused = await refusal(client.chat.completions.create(body))
  t.equal(refused.headers?.get('retry-after-ms'), '20000')
  t.equal(refused.headers?.get('x-ratelimit-remaining-tokens'), '0')
  t.match(refused.message, /token rate limit/)
  clock.now = T0 + 60_000
  t.equal(
    (await client.chat.completions.create(body).withResponse()).response.status,
    200,
    'the first call left the window: 25 tokens fit',
  )
  t.equal(up.stats().rateLimited, 1)
})

t.test('fixed window: the quota is whole again at the boundary', async (t) => {
  const { client, clock } = await upstream(t, { rpm: 2, window: 'fixed' })
  clock.now = T0 + 59_000
  await client.chat.completions.create(ask)
  await client.chat.completions.create(ask)
  t.equal((await refusal(client.chat.completions.create(ask))).headers?.get('retry-after-ms'), '1000')
  clock.now = T0 + 60_000
  await client.chat.completions.create(ask)
  await client.chat.completions.create(ask)
})

t.test('Azure-like short window: rpm 60 over 10 s is 10 per 10 s', async (t) => {
  const { client } = await upstream(t, { rpm: 60, windowMs: 10_000 })
  const { response } = await client.chat.completions.create(ask).withResponse()
  t.equal(response.headers.get('x-ratelimit-limit-requests'), '10')
  t.equal(response.headers.get('x-ratelimit-reset-requests'), '10s')
})

t.test('counts calls and 429s per minute, and records each 429: when, and how early', async (t) => {
  const { up, client, clock } = await upstream(t, { rpm: 1 })
  await client.chat.completions.create(ask)
  clock.now = T0 + 45_000
  await refusal(client.chat.completions.create(ask))
  clock.now = T0 + 61_000
  await client.chat.completions.create(ask)
  t.same(up.stats().perMinute, [2, 1])
  t.same(up.stats().rateLimitedPerMinute, [1])
  t.same(up.stats().refusals, [{ at: 45_000, earlyMs: 15_000 }], 'refused 15 s before the first call left the minute')
})

t.test('records the most calls it had in flight, and those beyond maxConcurrent', async (t) => {
  const { up, client } = await upstream(t, { maxConcurrent: 4 })
  up.pause()
  const calls = Array.from({ length: 6 }, () => client.chat.completions.create(ask))
  t.ok(
    (
      await pollUntil(
        async () => up.inFlight(),
        (n) => n === 6,
      )
    ).met,
  )
  up.resume()
  await Promise.all(calls)
  t.equal(up.stats().peakInFlight, 6)
  t.equal(up.stats().overConcurrency, 2)
  t.equal(up.inFlight(), 0)
})

t.test('Ollama with a full queue: 503, its message, no wait named', async (t) => {
  const { up, client } = await upstream(t, { ollamaFull: true })
  const refused = await refusal(client.chat.completions.create(ask))
  t.equal(refused.status, 503)
  t.match(refused.message, 'server busy, please try again.  maximum pending requests exceeded')
  t.equal(refused.headers?.get('retry-after'), null)
  t.equal(up.stats().queueFull, 1)
  const raw = await fetch(`${up.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(ask),
  })
  const observed = observeResponse(raw.status, Object.fromEntries(raw.headers), { now: T0, body: await raw.text() })
  t.same([observed.kind, observed.refused, observed.cooldownUntil], ['queue_full', true, T0 + 1000])
})

t.test('what the gateway reads from its 429 is the wait it named', async (t) => {
  const { client, clock } = await upstream(t, { rpm: 1, tpm: 1000 })
  await client.chat.completions.create(ask)
  clock.now = T0 + 250
  const refused = await refusal(client.chat.completions.create(ask))
  const headers = Object.fromEntries(refused.headers ?? new Headers())
  const o = observeResponse(429, headers, { now: clock.now })
  t.equal(o.cooldownUntil, T0 + 60_000)
  t.same(o.requests, { limit: 1, remaining: 0, resetAt: T0 + 60_000 })
})

t.test("the openai SDK's own retries honour retry-after-ms and then succeed", async (t) => {
  // Real time: one call per second, and the SDK waits out the 429 by itself.
  const up = await startQuotaUpstream({ rpm: 60, windowMs: 1000 })
  t.teardown(() => up.close())
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: up.url, maxRetries: 2 })
  await client.chat.completions.create(ask)
  const started = Date.now()
  await client.chat.completions.create(ask)
  const waited = Date.now() - started
  t.same([up.stats().served, up.stats().rateLimited], [2, 1])
  t.ok(waited < 1500, `waited ${waited} ms (the wait named, not the SDK's backoff)`)
})

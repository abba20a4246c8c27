// Anthropic's Messages API under /queue, on running gateways: the drop-in twin waits in the
// key's line where /v1/messages answers 429 (Anthropic's rate_limit_error with retry-after
// and anthropic-ratelimit-*), and answers in Anthropic's shape when the window resets,
// streams included; `Prefer: respond-async` stores it (202, its poll location) and polling
// shows an Anthropic message, an Anthropic stream or an Anthropic error; and a stored
// message accepted by one gateway and run by another one, started after the first stopped
// (on one Redis), is still shown in Anthropic's shape.
import Anthropic from '@anthropic-ai/sdk'
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { cluster, embeddedGateway, get, until, type QueueView } from '../queue/helpers.ts'

const MODEL = 'claude-sonnet-4.5'

const failing = await startFakeUpstream({ failWith: 400 })
t.teardown(() => failing.close())
const withFailing = (doc: Record<string, unknown>): void => {
  ;(doc.backends as Record<string, unknown>).failing = { type: 'openai', baseUrl: failing.url }
  ;(doc.models as unknown[]).push({ name: 'broken-claude', kind: 'chat', deployments: [{ backend: 'failing' }] })
}
// A one-second window: a drop-in call that waits for it is answered about a second later.
const gw = await embeddedGateway(t, { windowMs: 1000, config: withFailing })

const body = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  max_tokens: 5,
  messages: [{ role: 'user', content }],
  ...extra,
})

function send(path: string, key: string, payload: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  return request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...headers },
    body: JSON.stringify(payload),
  })
}

const sdk = (key: string): Anthropic => new Anthropic({ baseURL: `${gw.url}/queue`, apiKey: key, maxRetries: 0 })
const oneAMinute = { tier: 'Standard4000', limits: { [MODEL]: { rpm: 1 } } }

t.test('over its rpm, /queue/v1/messages waits for the window and answers in Anthropic shape', async (t) => {
  const { key } = await gw.createKey(oneAMinute)
  // Two at once with room for one a window: one is answered at once, the other when the
  // window resets (/v1/messages would have answered it 429: limits.test.ts).
  const both = await Promise.all(
    ['first', 'second'].map((content) =>
      sdk(key)
        .messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content }] })
        .withResponse(),
    ),
  )
  for (const { data, response } of both) {
    t.equal(data.type, 'message')
    t.equal(data.model, MODEL)
    t.ok(data.usage.output_tokens > 0, 'usage')
    t.equal(response.headers.get('anthropic-ratelimit-requests-limit'), '1', 'the limits as Anthropic names them')
  }
  const waits = both.map(({ response }) => Number(response.headers.get('x-queue-wait-ms'))).sort((x, y) => x - y)
  t.ok((waits[1] ?? 0) > 0, `one waited in line for the window (${waits.join(', ')} ms)`)
})

t.test('a drop-in stream waits for the window, then streams Anthropic events', async (t) => {
  const { key } = await gw.createKey(oneAMinute)
  // A plain message and the stream at once, room for one a window: one of them waits.
  const plain = send('/queue/v1/messages', key, body('first'))
  const stream = sdk(key).messages.stream({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'go' }] })
  const types: string[] = []
  stream.on('streamEvent', (event) => types.push(event.type))
  const message = await stream.finalMessage()
  t.equal(types[0], 'message_start')
  t.equal(types.at(-1), 'message_stop')
  t.ok(types.includes('content_block_delta'), 'text deltas')
  t.equal(message.stop_reason, 'max_tokens')
  t.ok(message.usage.output_tokens > 0)
  const { response } = await stream.withResponse()
  const other = await plain
  t.equal(other.status, 200)
  const waits = [response, other].map((r) => Number(r.headers.get('x-queue-wait-ms')))
  t.ok(Math.max(...waits) > 0, `one of them waited in line (${waits.join(', ')} ms)`)
})

t.test('Prefer: respond-async stores it; polling shows an Anthropic message or stream', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const accepted = await send('/queue/v1/messages', key, body('stored'), { prefer: 'respond-async' })
  t.equal(accepted.status, 202)
  const shown = accepted.json<QueueView>()
  t.equal(accepted.headers.get('location'), `/queue/requests/${shown.id}`)
  t.equal(accepted.headers.get('preference-applied'), 'respond-async')
  t.match(shown, { object: 'queue.request', endpoint: '/v1/messages', model: MODEL })
  const done = await until(`${gw.url}/queue/requests/${shown.id}`, key, ['completed', 'failed'])
  t.equal(done.status, 'completed')
  t.equal(done.endpoint, '/v1/messages')
  const stranger = await gw.createKey({ tier: 'Standard4000', owner: 'another-tenant' })
  const theirs = await get(`${gw.url}/queue/requests/${shown.id}`, stranger.key)
  t.equal(theirs.status, 404, "another owner's key: no such request")
  t.notMatch(theirs.text, /claude|v1\/messages|qreq_/, 'nothing of it is told')
  // Polled as Anthropic's SDKs would (x-api-key, anthropic-version): its errors in Anthropic's shape.
  const asAnthropic = await request(`${gw.url}/queue/requests/${shown.id}`, {
    headers: { 'x-api-key': stranger.key, 'anthropic-version': '2023-06-01' },
  })
  t.equal(asAnthropic.status, 404)
  t.match(asAnthropic.json(), { type: 'error', error: { type: 'not_found_error', message: String } })
  const cancelled = await request(`${gw.url}/queue/requests/${shown.id}`, {
    method: 'DELETE',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  })
  t.equal(cancelled.status, 409, 'a finished request cannot be cancelled')
  t.match(cancelled.json(), { type: 'error', error: { type: 'invalid_request_error' } })
  t.equal(cancelled.headers.get('x-should-retry'), 'false')
  const mine = await request(`${gw.url}/queue/requests/${shown.id}`, {
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  })
  t.match(mine.json(), { status: 'completed', response: { body: { type: 'message' } } })
  t.equal(done.response?.status_code, 200)
  t.match(done.response?.body, {
    type: 'message',
    role: 'assistant',
    model: MODEL,
    stop_reason: 'max_tokens',
    content: [{ type: 'text' }],
    usage: { input_tokens: Number, output_tokens: Number },
  })
  t.notOk((done.response?.body as Record<string, unknown>).choices, 'not the chat completion the worker ran it as')

  const streamed = await send('/queue/v1/messages', key, body('stored stream', { stream: true }), {
    prefer: 'respond-async',
  })
  t.equal(streamed.status, 202)
  const ran = await until(`${gw.url}/queue/requests/${streamed.json<QueueView>().id}`, key, ['completed', 'failed'])
  t.equal(ran.status, 'completed')
  t.equal(ran.response?.body_encoding, 'text')
  const events = [...String(ran.response?.body).matchAll(/^event: (\w+)$/gm)].map((m) => m[1])
  t.equal(events[0], 'message_start')
  t.equal(events.at(-1), 'message_stop')
  t.ok(events.includes('message_delta'), 'message_delta with stop_reason and usage')
  t.notMatch(String(ran.response?.body), /\[DONE\]|chat\.completion\.chunk/, 'no chat chunk left')
})

t.test('async errors: refused at the door, or failed upstream, are in Anthropic shape', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const refused = await send(
    '/queue/v1/messages',
    key,
    { model: MODEL, messages: [{ role: 'user', content: 'x' }] },
    { prefer: 'respond-async' },
  )
  t.equal(refused.status, 400)
  t.match(refused.json(), { type: 'error', error: { type: 'invalid_request_error', message: /max_tokens/ } })
  const noKey = await send('/queue/v1/messages', 'tg1_nothing', body('x'), { prefer: 'respond-async' })
  t.equal(noKey.status, 401)
  t.match(noKey.json(), { type: 'error', error: { type: 'authentication_error' } })

  const accepted = await send(
    '/queue/v1/messages',
    key,
    { ...body('x'), model: 'broken-claude' },
    {
      prefer: 'respond-async',
    },
  )
  t.equal(accepted.status, 202)
  const failed = await until(`${gw.url}/queue/requests/${accepted.json<QueueView>().id}`, key, ['completed', 'failed'])
  t.equal(failed.status, 'failed')
  t.equal(failed.response?.status_code, 400)
  t.match(failed.response?.body, { type: 'error', error: { type: 'invalid_request_error', message: String } })
  t.notOk((failed.response?.body as Record<string, unknown>).detail, "not OpenAI's shape")
})

t.test(
  'a stored message accepted before a restart is shown in Anthropic shape by the gateway that ran it',
  async (t) => {
    const redis = await cluster(t)
    // The first gateway only accepts (no worker): the request is run by the next one.
    const accepting = await redis.start({ queue: { concurrency: 0 } })
    const { key } = await accepting.createKey({ tier: 'Standard4000' })
    const res = await request(`${accepting.url}/queue/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'respond-async' },
      body: JSON.stringify(body('across a restart')),
    })
    t.equal(res.status, 202)
    const { id } = res.json<QueueView>()
    t.equal((await get(`${accepting.url}/queue/requests/${id}`, key)).json<QueueView>().status, 'queued')
    await accepting.stop()
    const running = await redis.start()
    const done = await until(`${running.url}/queue/requests/${id}`, key, ['completed', 'failed'], 30_000)
    t.equal(done.status, 'completed')
    t.equal(done.endpoint, '/v1/messages')
    t.match(done.response?.body, { type: 'message', model: MODEL, content: [{ type: 'text' }] })
  },
)

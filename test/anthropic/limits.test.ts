// What Tollgate keeps for every call holds on Anthropic's Messages API too, on running
// gateways on Redis: the key's rpm and tpm (Anthropic's 429 rate_limit_error, retry-after,
// anthropic-ratelimit-*; the SDK's RateLimitError), a spent budget (refused in Anthropic's
// shape, not retried by the SDK, nothing sent upstream), capacity learned from an upstream
// (its 429 cools the deployment down: /v1/messages answers Anthropic's 529 without sending,
// /queue/v1/messages waits it out) and configured (maxConcurrent), and tenant isolation:
// an id another owner's object has, named in a Messages request, never reaches an upstream
// and is answered exactly as an id nobody has.
import Anthropic from '@anthropic-ai/sdk'
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { onSharedRedis, startTollgate } from '../helpers/gateway.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { encodeMultipart } from '../helpers/multipart.ts'
import { startQuotaUpstream } from '../helpers/quota-upstream.ts'
import { deleteUnder } from '../helpers/redis.ts'
import { redisClient } from '../limits/helpers.ts'

/** Every reply is exactly its max_tokens long: a call's cost is known in advance. */
const upstream = await startFakeUpstream({ uncappedTokens: 50 })
const quota = await startQuotaUpstream({ rpm: 40, windowMs: 1500 })
const redis = redisClient()
const prefix = `tgtest:anthropic-limits:${randomBytes(6).toString('hex')}:`
t.teardown(async () => {
  await Promise.all([upstream.close(), quota.close()])
  await deleteUnder(redis, prefix)
  redis.disconnect()
})

const FAKE = 'fake-claude'
const QUOTA = 'quota-claude'
const shared = onSharedRedis(prefix)
const gw = await startTollgate({
  ...shared,
  config: (doc) => {
    shared.config?.(doc)
    const backends = doc.backends as Record<string, Record<string, unknown>>
    backends.fake = { type: 'openai', baseUrl: upstream.url }
    backends.quota = { type: 'openai', baseUrl: quota.url }
    const models = doc.models as Array<{ name: string; kind: string; deployments: Array<Record<string, unknown>> }>
    models.push({ name: FAKE, kind: 'chat', deployments: [{ backend: 'fake' }] })
    models.push({ name: QUOTA, kind: 'chat', deployments: [{ backend: 'quota' }] })
    // The built-in mock, one call at a time and slow enough that calls overlap.
    const sonnet = models.find((m) => m.name === 'claude-sonnet-4.5')
    if (sonnet === undefined) throw new Error('no claude-sonnet-4.5 in the default configuration')
    sonnet.deployments = [{ backend: 'mock', maxConcurrent: 1 }]
    backends.mock = { ...backends.mock, tokensPerSecond: 100 }
    ;(doc.queue as Record<string, unknown>).maxWaitMs = 60_000
  },
})
t.teardown(() => gw.stop())

const messages = (model: string, content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model,
  max_tokens: 10,
  messages: [{ role: 'user', content }],
  ...extra,
})

function send(path: string, key: string, body: unknown): Promise<RawResponse> {
  return request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

/** An SDK client that counts its HTTP exchanges (its retries included). */
function countingSdk(key: string, baseURL = gw.url, maxRetries = 2): { sdk: Anthropic; statuses: number[] } {
  const statuses: number[] = []
  const sdk = new Anthropic({
    baseURL,
    apiKey: key,
    maxRetries,
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(url, init)
      statuses.push(res.status)
      return res
    },
  })
  return { sdk, statuses }
}

const anthropicError = (res: RawResponse, type: string): Record<string, unknown> => ({
  type: 'error',
  error: { type, message: String },
  request_id: res.headers.get('request-id') ?? '',
})

t.test("the key's rpm: Anthropic's rate_limit_error with retry-after and anthropic-ratelimit-*", async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000', limits: { [FAKE]: { rpm: 2 } } })
  const before = upstream.requests.length
  t.equal((await send('/v1/messages', key, messages(FAKE, 'one'))).status, 200)
  t.equal((await send('/v1/messages', key, messages(FAKE, 'two'))).status, 200)
  const refused = await send('/v1/messages', key, messages(FAKE, 'three'))
  t.equal(refused.status, 429)
  t.match(refused.json(), anthropicError(refused, 'rate_limit_error'))
  t.notOk('detail' in refused.json<Record<string, unknown>>(), "not OpenAI's shape")
  t.match(refused.json<{ error: { message: string } }>().error.message, /requests per min/)
  const retryAfter = Number(refused.headers.get('retry-after'))
  t.ok(retryAfter >= 1 && retryAfter <= 60, `retry-after ${retryAfter}`)
  t.equal(refused.headers.get('anthropic-ratelimit-requests-limit'), '2')
  t.equal(refused.headers.get('anthropic-ratelimit-requests-remaining'), '0')
  const reset = Date.parse(refused.headers.get('anthropic-ratelimit-requests-reset') ?? '')
  t.ok(reset > Date.now() - 1000 && reset <= Date.now() + 61_000, 'the reset as an RFC 3339 instant, within the window')
  t.equal(upstream.requests.length - before, 2, 'the refused call was not sent upstream')

  // The SDK reads it as its RateLimitError; retry-after tells it to wait, so with retries off it gives up at once.
  const { sdk, statuses } = countingSdk(key, gw.url, 0)
  const error = await sdk.messages
    .create({ model: FAKE, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
    .catch((e: unknown) => e)
  t.ok(error instanceof Anthropic.RateLimitError, "the SDK's RateLimitError")
  t.same(statuses, [429])
})

t.test("the key's tpm: a message that would pass it is refused before it is sent", async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000', limits: { [FAKE]: { tpm: 500 } } })
  const before = upstream.requests.length
  const refused = await send('/v1/messages', key, messages(FAKE, 'hello', { max_tokens: 2000 }))
  t.equal(refused.status, 429)
  t.match(refused.json(), anthropicError(refused, 'rate_limit_error'))
  t.match(refused.json<{ error: { message: string } }>().error.message, /tokens/)
  t.equal(refused.headers.get('anthropic-ratelimit-tokens-limit'), '500')
  t.ok(refused.headers.get('anthropic-ratelimit-tokens-remaining') !== null)
  t.equal(upstream.requests.length, before, 'nothing was sent upstream')
  const fits = await send('/v1/messages', key, messages(FAKE, 'hello', { max_tokens: 10 }))
  t.equal(fits.status, 200, 'a message that fits is answered')
  t.equal(fits.headers.get('anthropic-ratelimit-tokens-limit'), '500')
})

t.test('a spent budget: refused in Anthropic shape, not retried by the SDK, nothing sent upstream', async (t) => {
  // Only output tokens cost: 1,000 EUR per million, 10 a call, so 0.01 EUR a call.
  const priced = { '*': { input_price: 0, output_price: 1000, rpm: 1_000_000, tpm: 1_000_000_000 } }
  const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: 'budgeted', limits: priced })
  const set = await fetch(`${gw.url}/admin/budgets/key/${id}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount: 0.02, period: 'month', time_zone: 'UTC' }),
  })
  t.equal(set.status, 200, await set.text())
  const { sdk, statuses } = countingSdk(key)
  for (let i = 0; i < 2; i++)
    await sdk.messages.create({ model: FAKE, max_tokens: 10, messages: [{ role: 'user', content: `call ${i}` }] })
  const before = upstream.requests.length
  const error = await sdk.messages
    .create({ model: FAKE, max_tokens: 10, messages: [{ role: 'user', content: 'over' }] })
    .catch((e: unknown) => e)
  t.ok(error instanceof Anthropic.APIError, 'the SDK gets an error')
  const apiError = error as InstanceType<typeof Anthropic.APIError>
  t.equal(apiError.status, 429)
  t.match(apiError.error, { type: 'error', error: { type: 'rate_limit_error', message: /budget/ } })
  t.same(statuses, [200, 200, 429], 'one exchange for the refused call: the SDK (maxRetries 2) did not retry it')
  t.equal(upstream.requests.length, before, 'nothing was sent upstream')

  // The /queue twin does not wait for the period's end: the same refusal, at once.
  const started = Date.now()
  const queued = await send('/queue/v1/messages', key, messages(FAKE, 'queued'))
  t.equal(queued.status, 429)
  t.match(queued.json(), anthropicError(queued, 'rate_limit_error'))
  t.equal(queued.headers.get('x-should-retry'), 'false')
  t.ok(Date.now() - started < 5000, 'answered without waiting in line')
  t.equal(upstream.requests.length, before, 'nothing was sent upstream')
})

t.test("capacity learned from the upstream's 429: 529 on /v1/messages, a wait on /queue/v1/messages", async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  // The upstream's quota (one call per 1.5 s) spent behind the gateway's back.
  const spent = await fetch(`${quota.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'fill' }], max_tokens: 5 }),
  })
  await spent.arrayBuffer()
  const first = await send('/v1/messages', key, messages(QUOTA, 'refused upstream'))
  t.equal(quota.stats().rateLimited, 1, 'the upstream refused it, with its retry-after-ms')
  t.ok(first.status === 429 || first.status === 529, `answered ${first.status}`)
  t.equal(first.json<{ type: string }>().type, 'error', "in Anthropic's shape")

  const requestsBefore = quota.stats().requests
  const cooling = await send('/v1/messages', key, messages(QUOTA, 'while it cools down'))
  t.equal(cooling.status, 529, "Anthropic's overloaded status: every deployment of the model is full")
  t.match(cooling.json(), anthropicError(cooling, 'overloaded_error'))
  t.ok(Number(cooling.headers.get('retry-after')) >= 1, 'retry-after: when the learned cooldown ends')
  t.equal(quota.stats().requests, requestsBefore, 'the learned cooldown kept it from the upstream')

  const started = Date.now()
  const { data, response } = await new Anthropic({ baseURL: `${gw.url}/queue`, apiKey: key, maxRetries: 0 }).messages
    .create({ model: QUOTA, max_tokens: 5, messages: [{ role: 'user', content: 'waits' }] })
    .withResponse()
  t.equal(data.type, 'message', 'the /queue caller is answered')
  t.ok(response.headers.get('x-queue-wait-ms') !== null)
  t.ok(Date.now() - started > 100, 'after waiting for the deployment to have room')
  t.equal(quota.stats().rateLimited, 1, 'no further upstream refusal: it waited out the cooldown')
})

t.test(
  'capacity configured (maxConcurrent 1): /v1/messages gets 529 while it is busy, /queue callers wait',
  async (t) => {
    const { key } = await gw.createKey({ tier: 'Standard4000' })
    const MODEL = 'claude-sonnet-4.5'
    // A long stream holds the one slot.
    const holding = send('/v1/messages', key, messages(MODEL, 'hold', { max_tokens: 200, stream: true }))
    let busy: RawResponse | undefined
    for (let i = 0; i < 100; i++) {
      busy = await send('/v1/messages', key, messages(MODEL, 'busy?', { max_tokens: 1 }))
      if (busy.status === 529) break
    }
    t.equal(busy?.status, 529, "a message with the deployment busy: Anthropic's overloaded_error")
    if (busy !== undefined) t.match(busy.json(), anthropicError(busy, 'overloaded_error'))
    const queue = new Anthropic({ baseURL: `${gw.url}/queue`, apiKey: key, maxRetries: 0 })
    const waiting = await Promise.all(
      [1, 2, 3].map((i) =>
        queue.messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: `q${i}` }] }),
      ),
    )
    t.same(
      waiting.map((m) => m.type),
      ['message', 'message', 'message'],
      'every /queue caller is answered, one at a time',
    )
    t.equal((await holding).status, 200)
  },
)

t.test(
  "tenant isolation: another owner's ids in a message never reach an upstream, and are not confirmed",
  async (t) => {
    const other = await gw.createKey({ tier: 'Standard4000', owner: 'other-tenant' })
    const upload = encodeMultipart([
      { name: 'purpose', value: 'user_data' },
      { name: 'file', filename: 'secret-plans.txt', data: Buffer.from("the other tenant's secret plans") },
    ])
    const made = await fetch(`${gw.url}/v2/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${other.key}`, 'content-type': upload.contentType },
      body: upload.bytes,
    })
    t.equal(made.status, 200)
    const foreign = ((await made.json()) as { id: string }).id
    const nobodys = `file-${randomBytes(12).toString('hex')}`
    const { key } = await gw.createKey({ tier: 'Standard4000', owner: 'me' })

    /** Every place a Messages request can name an object by id. */
    const naming = (id: string): Array<[string, Record<string, unknown>]> => [
      [
        'a document by file_id',
        messages(FAKE, '', {
          messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: id } }] }],
        }),
      ],
      [
        'an image by file_id',
        messages(FAKE, '', {
          messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: id } }] }],
        }),
      ],
      ['a container', { ...messages(FAKE, 'x'), container: id }],
      [
        'an MCP server',
        { ...messages(FAKE, 'x'), mcp_servers: [{ type: 'url', url: `http://127.0.0.1:1/${id}`, name: id }] },
      ],
      [
        'a file in a tool result',
        messages(FAKE, '', {
          messages: [
            { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 't', input: {} }] },
            {
              role: 'user',
              content: [
                {
                  type: 'tool_result',
                  tool_use_id: 'toolu_1',
                  content: [{ type: 'document', source: { type: 'file', file_id: id } }],
                },
              ],
            },
          ],
        }),
      ],
    ]
    const before = upstream.requests.length
    const shapes = (id: string) =>
      Promise.all(
        naming(id).map(async ([what, body]) => {
          const res = await send('/v1/messages', key, body)
          const queued = await send('/queue/v1/messages', key, body)
          return { what, res, queued }
        }),
      )
    const [theirs, none] = await Promise.all([shapes(foreign), shapes(nobodys)])
    for (const [i, { what, res, queued }] of theirs.entries()) {
      const unknown = none[i]
      t.ok(res.status >= 400 && res.status < 500, `${what}: refused (${res.status})`)
      t.equal(res.json<{ type: string }>().type, 'error', `${what}: in Anthropic's shape`)
      t.equal(queued.status, res.status, `${what}: refused alike on /queue`)
      t.equal(res.status, unknown?.res.status, `${what}: as an id nobody has`)
      const said = (r: RawResponse): string => r.json<{ error: { message: string } }>().error.message
      t.equal(
        said(res).replaceAll(foreign, '<id>'),
        unknown === undefined ? '' : said(unknown.res).replaceAll(nobodys, '<id>'),
        `${what}: in the same words`,
      )
      t.notMatch(res.text, /secret-plans|secret plans/, `${what}: nothing of the object is told`)
    }
    t.equal(upstream.requests.length, before, 'not one of them reached an upstream')
    const seen = upstream.requests.slice(before).map((r) => r.body.toString('utf8'))
    t.notOk(
      seen.some((b) => b.includes(foreign)),
      "the other owner's id was never sent",
    )
  },
)

// What a client sees when the upstream behind a model fails (issue #36, item 7), on a running
// gateway in front of a third-party-style upstream on loopback that answers as it is told:
// a 503 or 429 from the only deployment is the gateway's own refusal with its retry hint; a
// 401/403 (the gateway's own upstream credential is wrong) is a 502 upstream_auth_failed,
// never invalid_api_key; a call the gateway ends with 504 upstream_timeout is charged its
// input; the gateway's own refusals take nothing from the key's limits or usage; and only
// allowed upstream response headers reach the client.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'
const ask = { model: CHAT, messages: [{ role: 'user' as const, content: 'hello upstream' }], max_tokens: 5 }

/**
 * What the upstream answers next: a status, headers and a body; 'hold' (no headers until it
 * closes); or 'stall' (a 200's headers and the start of its body, then nothing).
 */
type Answer = { status: number; headers?: Record<string, string>; body: unknown } | 'hold' | 'stall'

interface Upstream {
  readonly url: string
  answer: Answer
  /** Requests received. */
  received: number
  close(): Promise<void>
}

const COMPLETION = {
  id: 'chatcmpl-vendor',
  object: 'chat.completion',
  created: 1700000000,
  model: CHAT,
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi there' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 },
}

async function startVendor(): Promise<Upstream> {
  const held: ServerResponse[] = []
  const up: Upstream = {
    url: '',
    answer: { status: 200, body: COMPLETION },
    received: 0,
    close: async () => {
      for (const res of held) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((done) => server.close(() => done()))
    },
  }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    req.on('end', () => {
      up.received++
      const answer = up.answer
      if (answer === 'hold' || answer === 'stall') {
        held.push(res)
        if (answer === 'stall') {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.write(JSON.stringify(COMPLETION).slice(0, 40))
        }
        return
      }
      const payload = JSON.stringify(answer.body)
      res.writeHead(answer.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        ...answer.headers,
      })
      res.end(payload)
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return Object.assign(up, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` })
}

/** CHAT on one deployment: the vendor upstream, giving up on response headers, or a quiet body, after 800 ms. */
function onVendor(up: Upstream) {
  return (doc: Record<string, unknown>): void => {
    const backends = doc.backends as Record<string, unknown>
    backends.vendor = {
      type: 'openai',
      baseUrl: up.url,
      apiKeyEnv: 'VENDOR_KEY',
      responseTimeoutMs: 800,
      idleTimeoutMs: 800,
    }
    const models = doc.models as Array<{ name: string; deployments: unknown[] }>
    const model = models.find((m) => m.name === CHAT)
    if (model === undefined) throw new Error(`${CHAT} is not in the default config`)
    model.deployments = [{ backend: 'vendor' }]
  }
}

interface Totals {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
}

async function usageOf(gw: RunningTollgate, id: string): Promise<Totals> {
  const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  return ((await res.json()) as { totals: Totals }).totals
}

function chat(gw: RunningTollgate, key: string): Promise<Response> {
  return fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(ask),
  })
}

let up: Upstream
let gw: RunningTollgate

/** Whether, once the deployment's cooldown is over, a call reaches the upstream again and is served. */
async function untilServed(key: string): Promise<boolean> {
  up.answer = { status: 200, body: COMPLETION }
  const polled = await pollUntil(
    async () => {
      const res = await chat(gw, key)
      await res.arrayBuffer()
      return res.status
    },
    (status) => status === 200,
    200,
    50,
  )
  return polled.met
}

t.before(async () => {
  up = await startVendor()
  gw = await startTollgate({ config: onVendor(up), env: { VENDOR_KEY: 'sk-vendor-wrong-credential-0123456789' } })
})
t.teardown(async () => {
  await gw.stop()
  await up.close()
})

t.test(
  'a 503 or a 429 from the only deployment: the gateway 429 with its retry hint, none of the upstream’s',
  async (t) => {
    const { key } = await gw.createKey({ tier: 'Standard4000' })
    for (const status of [503, 429]) {
      up.answer = {
        status,
        headers: { 'retry-after-ms': '1500', 'x-powered-by': 'Express', 'x-vendor-region': 'eu-west-9' },
        body: { error: { message: 'The engine is currently overloaded', type: 'server_error', code: 'overloaded' } },
      }
      const res = await chat(gw, key)
      const body = (await res.json()) as { error: { code: string; message: string } }
      t.equal(res.status, 429, `${status}: the gateway's 429`)
      t.equal(body.error.code, 'upstream_capacity_exceeded', `${status}: its own code, not the upstream's`)
      t.notMatch(body.error.message, /overloaded/, `${status}: not the upstream's message`)
      const retryMs = Number(res.headers.get('retry-after-ms'))
      t.ok(retryMs > 0 && retryMs <= 1500, `${status}: retry-after-ms ${retryMs}, to when the deployment frees up`)
      t.equal(res.headers.get('retry-after'), String(Math.ceil(retryMs / 1000)), `${status}: and retry-after`)
      t.equal(res.headers.get('x-powered-by'), null, `${status}: none of the upstream's headers`)
      t.equal(res.headers.get('x-vendor-region'), null)
      t.ok(res.headers.get('x-ratelimit-limit-requests'), "the key's own limits are still shown")
      t.ok(await untilServed(key), 'the deployment serves again once its cooldown is over')
    }
  },
)

t.test('the gateway’s own refusals take no request from the key’s rpm and are not metered as requests', async (t) => {
  const { id, key } = await gw.createKey({ tier: 'Standard4000' })
  up.answer = { status: 503, headers: { 'retry-after-ms': '3000' }, body: { error: { message: 'busy', code: null } } }
  const remaining: number[] = []
  const before = up.received
  for (let i = 0; i < 4; i++) {
    const res = await chat(gw, key)
    t.equal(res.status, 429)
    t.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_capacity_exceeded')
    remaining.push(Number(res.headers.get('x-ratelimit-remaining-requests')))
  }
  t.equal(up.received - before, 1, 'one call reached the upstream; the rest were refused by the gateway')
  const limit = remaining[0] === undefined ? Number.NaN : remaining[0] + 1
  t.same(
    remaining,
    [limit - 1, limit - 1, limit - 1, limit - 1],
    'each refusal gave its request back: the next one finds the same room',
  )
  t.ok((remaining[0] ?? 0) > 0, `the key has an rpm (${limit})`)
  const totals = await usageOf(gw, id)
  t.equal(totals.requests, 0, 'no refusal is a request in usage')
  t.equal(totals.input_tokens + totals.output_tokens, 0)
  t.ok(await untilServed(key))
})

t.test('a 401 or 403 from the upstream: 502 upstream_auth_failed, an error line naming the backend', async (t) => {
  const { id, key } = await gw.createKey({ tier: 'Standard4000' })
  // Default retries: the SDK would retry a 502, but the gateway says a retry will not help.
  const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2` })
  const authLines = (): Array<Record<string, unknown>> =>
    gw.logs().filter((l) => l.level === 50 && l.backend === 'vendor' && l.reason === 'upstream_auth_failed')
  for (const status of [401, 403]) {
    const reached = up.received
    up.answer = {
      status,
      headers: { 'www-authenticate': 'Bearer realm="vendor"' },
      body: {
        error: {
          message: 'Incorrect API key provided: sk-vendo***6789.',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      },
    }
    const linesBefore = authLines().length
    const error = await openai.chat.completions.create(ask).catch((e: unknown) => e)
    t.ok(error instanceof OpenAI.APIError, `${status}: the SDK raises an APIError`)
    t.notOk(
      error instanceof OpenAI.AuthenticationError,
      `${status}: not AuthenticationError (the caller's key is fine)`,
    )
    t.notOk(error instanceof OpenAI.PermissionDeniedError, `${status}: nor PermissionDeniedError`)
    const apiError = error as InstanceType<typeof OpenAI.APIError>
    t.equal(apiError.status, 502)
    t.equal(apiError.code, 'upstream_auth_failed')
    t.notMatch(
      apiError.message,
      /sk-vendo|Incorrect API key/,
      "the upstream's message (and the credential it quotes) stays out",
    )
    t.equal(apiError.headers?.get('www-authenticate') ?? null, null)
    t.equal(up.received - reached, 1, `${status}: tried once, not retried`)
    const lines = await pollUntil(
      async () => authLines().length,
      (n) => n === linesBefore + 1,
      200,
      10,
    )
    t.ok(lines.met, `${status}: one error line names the backend`)
    t.notMatch(JSON.stringify(authLines()), /sk-vendor/, 'and never the credential')
  }
  t.equal((await usageOf(gw, id)).requests, 0, 'the caller is not charged for the gateway’s credential')
})

t.test('a call the gateway ends with upstream_timeout is metered its reserved input', async (t) => {
  for (const how of ['hold', 'stall'] as const) {
    const { id, key } = await gw.createKey({ tier: 'Standard4000' })
    up.answer = how
    const res = await chat(gw, key)
    const text = await res.text().catch(() => '')
    // No response headers in time, or a JSON body gone quiet before the gateway had it whole.
    t.equal(res.status, 504, `${how}: 504`)
    t.equal((JSON.parse(text) as { error: { code: string } }).error.code, 'upstream_timeout')
    up.answer = { status: 200, body: COMPLETION }
    const totals = await pollUntil(
      () => usageOf(gw, id),
      (u) => u.requests === 1,
      200,
      10,
    )
    t.equal(totals.value.requests, 1, `${how}: the call is a request in usage`)
    t.ok(
      totals.value.input_tokens > 0,
      `${how}: its input is charged (${totals.value.input_tokens} tokens), as the upstream will bill it`,
    )
    t.equal(totals.value.output_tokens, 0, `${how}: no output was relayed`)
  }
})

t.test('upstream response headers reach the client only from the allow-list', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  up.answer = {
    status: 200,
    headers: {
      'x-powered-by': 'Express',
      server: 'nginx/1.25',
      via: '1.1 vendor-proxy',
      'x-vendor-trace': 'trace-123',
      'cf-ray': '8abc-AMS',
      'x-envoy-upstream-service-time': '12',
      'openai-processing-ms': '42',
      'openai-version': '2020-10-01',
      'openai-organization': 'org-gateway-account',
      'x-ratelimit-remaining-requests': '9999',
      'x-request-id': 'req_upstream',
    },
    body: COMPLETION,
  }
  const res = await chat(gw, key)
  await res.arrayBuffer()
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /application\/json/)
  t.equal(res.headers.get('openai-processing-ms'), '42', 'openai-* an SDK reads passes')
  t.equal(res.headers.get('openai-version'), '2020-10-01')
  for (const dropped of [
    'x-powered-by',
    'via',
    'x-vendor-trace',
    'cf-ray',
    'x-envoy-upstream-service-time',
    'openai-organization',
  ])
    t.equal(res.headers.get(dropped), null, `${dropped} is dropped`)
  t.not(res.headers.get('server'), 'nginx/1.25', "the upstream's server header is dropped")
  t.not(res.headers.get('x-request-id'), 'req_upstream', "the gateway's request id wins")
  t.not(res.headers.get('x-ratelimit-remaining-requests'), '9999', "the key's own limits, not the upstream account's")
})

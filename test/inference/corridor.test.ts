// The corridor on buildApp, in this process: a gateway built the way main.ts builds it
// (startGateway: the embedded store, the mock backend, an OpenAI-compatible upstream on
// loopback, and a deployment that is down), its handler on 127.0.0.1:0, driven with fetch.
// Each test names what the corridor decides: who may call, what is refused and how the
// refusal still says where the key's limits stand, what the upstream is sent, and what is
// charged once the reply is over.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import t from 'tap'
import { buildConfig } from '../../src/config/load.ts'
import { startGateway } from '../../src/main.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { closedPort, defaultConfigDoc } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { dataOf } from '../proxy/gateway-harness.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const ADMIN_TOKEN = 'adm_corridor_test_token_1234567890abcdef'

const upstream = await startFakeUpstream({ promptTokens: 17 })
t.teardown(() => upstream.close())
const dead = await closedPort()

const doc = defaultConfigDoc()
doc.backends = {
  mock: { type: 'mock', tokensPerSecond: 100_000, fineTuneStepMs: 50 },
  down: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 },
  up: { type: 'openai', baseUrl: upstream.url },
}
doc.resourceBackend = 'mock'
doc.models = [
  { name: 'chat-mock', kind: 'chat', deployments: [{ backend: 'mock' }] },
  { name: 'chat-upstream', kind: 'chat', deployments: [{ backend: 'up', model: 'upstream-chat' }] },
  // Weighted so that the deployment that is down leads (pickOrder), whatever calls came before.
  {
    name: 'chat-failover',
    kind: 'chat',
    deployments: [
      { backend: 'down', model: 'down-chat', weight: 1000 },
      { backend: 'up', model: 'upstream-chat' },
    ],
  },
]
doc.plans = {
  defaultTier: 'Open',
  tiers: {
    Open: { default: { rpm: 10_000, tpm: 10_000_000 } },
    Tight: { default: { rpm: 1 } },
  },
}
doc.auth = { maxFailures: 1_000_000 }
const env = {
  TOLLGATE_DATA_DIR: mkdtempSync(join(tmpdir(), 'tollgate-corridor-')),
  PORT: '0',
  METRICS_PORT: '0',
  TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
}
const config = buildConfig(doc, join(ROOT, 'config/default.yaml'), env)
const lines: string[] = []
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
    done()
  },
})
const gateway = await startGateway(config, createLogger('info', sink))
t.teardown(() => gateway.shutdown())

const logs = (): Array<Record<string, unknown>> =>
  lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>]
    } catch {
      return []
    }
  })

/** The access log line of a request, once the corridor is done with it (it is written after the reply). */
async function requestLine(res: Response): Promise<Record<string, unknown> | undefined> {
  const id = res.headers.get('x-request-id')
  const found = await pollUntil(
    async () => logs().find((l) => l.msg === 'request' && l.reqId === id),
    (l) => l !== undefined,
  )
  return found.value
}

async function createKey(body: Record<string, unknown> = {}): Promise<{ key: string; id: string }> {
  const res = await fetch(`${gateway.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status !== 201) throw new Error(`create key: ${res.status} ${await res.text()}`)
  return (await res.json()) as { key: string; id: string }
}

function chat(key: string | null, body: Record<string, unknown>, path = '/v2/chat/completions'): Promise<Response> {
  return fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 5, ...body }),
  })
}

const open = await createKey()

t.test('a chat call is served, with its usage and the key’s limits', async (t) => {
  const res = await chat(open.key, { model: 'chat-mock' })
  t.equal(res.status, 200)
  const body = (await res.json()) as {
    object: string
    model: string
    usage: { prompt_tokens: number; completion_tokens: number }
  }
  t.equal(body.object, 'chat.completion')
  t.equal(body.model, 'chat-mock')
  t.ok(body.usage.prompt_tokens > 0 && body.usage.completion_tokens > 0, 'usage reported')
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '10000')
  t.ok(Number(res.headers.get('x-ratelimit-remaining-requests')) < 10_000, 'the call was counted')
  t.ok(res.headers.has('x-ratelimit-remaining-tokens'))
  const line = await requestLine(res)
  t.match(line, {
    route: 'chat.completions',
    status: 200,
    keyId: open.id,
    tier: 'Open',
    model: 'chat-mock',
    backend: 'mock',
    stream: false,
    inputTokens: body.usage.prompt_tokens,
    outputTokens: body.usage.completion_tokens,
  })
  t.type(line?.upstreamMs, 'number', 'the upstream phase is timed')
})

t.test('the upstream is sent the deployment’s model name; the client sees the public one', async (t) => {
  const before = upstream.requests.length
  const res = await chat(open.key, { model: 'chat-upstream', temperature: 0.5 })
  t.equal(res.status, 200)
  t.equal(((await res.json()) as { model: string }).model, 'chat-upstream')
  const sent = upstream.requests.slice(before)
  t.equal(sent.length, 1)
  t.match(sent[0]?.json, { model: 'upstream-chat', temperature: 0.5, max_tokens: 5 })
  t.equal(sent[0]?.headers['x-request-id'], res.headers.get('x-request-id'), 'the request id goes upstream')
})

t.test('a stream asks the upstream for usage, hides it from a client that did not ask, and settles it', async (t) => {
  const key = await createKey()
  const before = upstream.requests.length
  const res = await chat(key.key, { model: 'chat-upstream', stream: true })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/event-stream/)
  t.ok(res.headers.has('x-ratelimit-remaining-requests'))
  const events = dataOf(await res.text())
  t.equal(events.at(-1), '[DONE]')
  t.notOk(
    events.some((e) => e !== '[DONE]' && (JSON.parse(e) as { usage?: unknown }).usage),
    'no usage chunk for a client that did not ask',
  )
  t.match(upstream.requests[before]?.json, {
    model: 'upstream-chat',
    stream: true,
    stream_options: { include_usage: true },
  })
  const line = await requestLine(res)
  t.match(
    line,
    { status: 200, stream: true, backend: 'up', inputTokens: 17 },
    'the usage the upstream reported is charged',
  )
  t.ok(Number(line?.outputTokens) > 0)
  const usage = (await (
    await fetch(`${gateway.url}/admin/keys/${key.id}/usage`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  ).json()) as { totals: { requests: number; input_tokens: number } }
  t.match(usage.totals, { requests: 1, input_tokens: 17 }, 'and metered')
})

t.test('a stream whose client asked for usage gets it', async (t) => {
  const res = await chat(open.key, { model: 'chat-upstream', stream: true, stream_options: { include_usage: true } })
  const events = dataOf(await res.text())
    .filter((e) => e !== '[DONE]')
    .map((e) => JSON.parse(e) as { usage?: { prompt_tokens: number } | null })
  t.equal(events.at(-1)?.usage?.prompt_tokens, 17)
})

t.test('an unknown model: 404, and the refusal still says where the key stands', async (t) => {
  const res = await chat(open.key, { model: 'no-such-model' })
  t.equal(res.status, 404)
  t.match(await res.json(), { error: { code: 'model_not_found', param: 'model' } })
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '10000')
  t.match(await requestLine(res), { status: 404, keyId: open.id })
})

t.test('no key: 401, nothing about limits', async (t) => {
  const res = await chat(null, { model: 'chat-mock' })
  t.equal(res.status, 401)
  t.match(await res.json(), { error: { code: 'invalid_api_key' } })
  t.notOk(res.headers.has('x-ratelimit-limit-requests'))
  const wrong = await chat('tg_not-a-real-key', { model: 'chat-mock' })
  t.equal(wrong.status, 401)
})

t.test('a model the key may not use: 403, never sent upstream', async (t) => {
  const narrow = await createKey({ models: ['chat-mock'] })
  const before = upstream.requests.length
  const res = await chat(narrow.key, { model: 'chat-upstream' })
  t.equal(res.status, 403)
  t.match(await res.json(), { error: { code: 'model_not_allowed', param: 'model' } })
  t.ok(res.headers.has('x-ratelimit-limit-requests'), 'the refusal says where the key stands')
  t.equal(upstream.requests.length, before)
  t.equal((await chat(narrow.key, { model: 'chat-mock' })).status, 200, 'its own model is served')
})

t.test('an endpoint the key may not use: 403', async (t) => {
  const chatOnly = await createKey({ endpoints: ['chat.completions'] })
  const res = await fetch(`${gateway.url}/v2/embeddings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${chatOnly.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat-mock', input: 'x' }),
  })
  t.equal(res.status, 403)
  t.match(await res.json(), { error: { code: 'endpoint_not_allowed' } })
  const models = await fetch(`${gateway.url}/v2/models`, { headers: { authorization: `Bearer ${chatOnly.key}` } })
  t.equal(models.status, 403, 'the model list is an endpoint too')
})

t.test('over the limit: 429 with retry-after and the limit headers', async (t) => {
  const tight = await createKey({ tier: 'Tight' })
  t.equal((await chat(tight.key, { model: 'chat-mock' })).status, 200)
  const res = await chat(tight.key, { model: 'chat-mock' })
  t.equal(res.status, 429)
  t.match(await res.json(), { error: { code: 'rate_limit_exceeded' } })
  t.ok(Number(res.headers.get('retry-after')) > 0, 'retry-after')
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '1')
  t.equal(res.headers.get('x-ratelimit-remaining-requests'), '0')
  t.match(await requestLine(res), { status: 429, keyId: tight.id, tier: 'Tight' })
})

t.test('two deployments, the first down: the call fails over and is served', async (t) => {
  const before = upstream.requests.length
  const res = await chat(open.key, { model: 'chat-failover' })
  t.equal(res.status, 200)
  t.equal(((await res.json()) as { model: string }).model, 'chat-failover')
  t.match(
    upstream.requests[before]?.json,
    { model: 'upstream-chat' },
    'the second deployment is sent its own model name',
  )
  const failovers = await gateway.metrics.failovers.get()
  t.same(
    failovers.values.map((v) => [v.labels.backend, v.value]),
    [['down', 1]],
    'one failover, away from the deployment that is down',
  )
  const errors = await gateway.metrics.upstreamErrors.get()
  t.same(
    errors.values.map((v) => [v.labels.backend, v.labels.reason, v.value]),
    [['down', 'upstream_unreachable', 1]],
  )
  t.match(
    logs().find((l) => l.msg === 'upstream attempt failed; trying the next deployment'),
    { backend: 'down', next: 'up', reason: 'upstream_unreachable' },
  )
  t.match(await requestLine(res), { status: 200, backend: 'up' })
})

t.test('the model lists and the queue’s stored requests open the same way: key, scope, limits', async (t) => {
  for (const path of ['/v2/models', '/queue/models', '/v2/models/chat-mock', '/v2/audio/models', '/queue/requests']) {
    const res = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${open.key}` } })
    t.equal(res.status, 200, path)
    t.equal(res.headers.get('x-ratelimit-limit-requests'), '10000', `${path}: the key's limits`)
    await res.arrayBuffer()
    t.match(await requestLine(res), { keyId: open.id, status: 200 }, `${path}: the key on the log line`)
    t.equal((await fetch(`${gateway.url}${path}`)).status, 401, `${path}: no key, no answer`)
  }
})

t.test('/queue walks the same corridor as /v2', async (t) => {
  const res = await chat(open.key, { model: 'chat-mock' }, '/queue/chat/completions')
  t.equal(res.status, 200)
  t.ok(res.headers.has('x-ratelimit-remaining-requests'))
  t.match(await requestLine(res), { route: 'queue.chat.completions', status: 200, model: 'chat-mock' })
})

// Tollgate in front of a separate OpenAI-compatible server process (as it would stand in
// front of vLLM): every /v2 endpoint through the SDK, what the upstream receives, and
// failover between two upstreams when one is down or failing.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import OpenAI from 'openai'
import t from 'tap'
import {
  closedPort,
  startTollgate,
  startUpstream,
  type RunningTollgate,
  type UpstreamProcess,
} from '../helpers/gateway.ts'
import { freshKeyClient, sdkClient } from '../helpers/sdk-gateway.ts'
import { endpointTests } from './endpoints.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'
const UPSTREAM_KEY = 'upstream-secret-not-a-tollgate-key'

/** Points every model (and files/fine-tuning) at the given backends, in order. */
function routeEverythingTo(backends: Record<string, Record<string, unknown>>, rewrite = true) {
  return (doc: Record<string, unknown>): void => {
    doc.backends = { ...(doc.backends as object), ...backends }
    doc.resourceBackend = Object.keys(backends)[0]
    const models = doc.models as Array<{ name: string; deployments: unknown[] }>
    for (const model of models) {
      model.deployments = Object.keys(backends).map((backend) => ({
        backend,
        ...(rewrite && model.name === CHAT ? { model: 'mistralai/Mistral-Small-24B' } : {}),
      }))
    }
  }
}

t.test('every endpoint through an OpenAI-compatible upstream process', async (t) => {
  const upstream = await startUpstream(['--require-key', UPSTREAM_KEY])
  t.teardown(() => upstream.stop())
  const gw = await startTollgate({
    config: routeEverythingTo({ up: { type: 'openai', baseUrl: `${upstream.url}/v1`, apiKeyEnv: 'UPSTREAM_KEY' } }),
    env: { UPSTREAM_KEY },
  })
  t.teardown(() => gw.stop())
  const key = (await gw.createKey({ tier: 'Standard4000' })).key
  const client = sdkClient(gw, key)

  await t.test('endpoints', async (t) => endpointTests(t, () => ({ gw, client, key, capsSent: true })))

  await t.test('what the upstream received', async (t) => {
    await client.chat.completions
      .create({ model: CHAT, messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 3 })
      .then(async (s) => {
        for await (const _ of s) void _
      })
    const seen = await upstream.requests()
    const chats = seen.filter((r) => r.path === '/v1/chat/completions')
    t.ok(chats.length > 0)
    t.ok(
      chats.every((r) => r.model === 'mistralai/Mistral-Small-24B'),
      'the model name was rewritten',
    )
    t.ok(
      seen.every((r) => r.headers.authorization === `Bearer ${UPSTREAM_KEY}`),
      'the upstream key, never the client key',
    )
    t.notOk(JSON.stringify(seen).includes(key), 'the Tollgate key never reached the upstream')
    const streamed = chats.at(-1)
    t.same(streamed?.streamOptions, { include_usage: true }, "usage asked for on the client's behalf")
    t.ok(
      seen.every((r) => typeof r.headers['x-request-id'] === 'string'),
      'request id forwarded',
    )
  })
})

t.test('an upstream error without a JSON body reaches the SDK as an error it can read', async (t) => {
  // Node answers a header section over its limit with a bare 431; a proxy in front of a
  // model server answers with an HTML page.
  const bare = createServer((req, res) => {
    if (req.url?.includes('embeddings')) {
      res.writeHead(503, { 'content-type': 'text/html', 'retry-after': '2' })
      res.end('<html><body>nginx</body></html>')
    } else {
      res.writeHead(431, { connection: 'close' })
      res.end()
    }
  })
  await new Promise<void>((done) => bare.listen(0, '127.0.0.1', done))
  t.teardown(() => {
    bare.closeAllConnections()
    bare.close()
  })
  const gw = await startTollgate({
    config: routeEverythingTo({
      bare: { type: 'openai', baseUrl: `http://127.0.0.1:${(bare.address() as AddressInfo).port}/v1` },
    }),
  })
  t.teardown(() => gw.stop())
  const client = await freshKeyClient(gw)

  const refused = await client.chat.completions
    .create({ model: CHAT, messages: [{ role: 'user', content: 'hi' }] })
    .catch((e: unknown) => e)
  t.ok(refused instanceof OpenAI.APIError, 'the SDK raises its APIError')
  const e431 = refused as InstanceType<typeof OpenAI.APIError>
  t.equal(e431.status, 431, "with the upstream's status")
  t.equal(e431.code, 'upstream_error')
  t.equal(e431.type, 'invalid_request_error')
  t.match(e431.message, /upstream model server answered 431 \(Request Header Fields Too Large\)/)

  // A 503 is a refusal (the upstream did not act): from the only deployment, the gateway's own 429.
  const busy = await client.embeddings.create({ model: 'text-embedding-ada-002', input: 'x' }).catch((e: unknown) => e)
  const e503 = busy as InstanceType<typeof OpenAI.APIError>
  t.equal(e503.status, 429)
  t.equal(e503.code, 'upstream_capacity_exceeded')
  t.equal(e503.headers?.get('retry-after'), '2', 'the wait it named')
  t.notMatch(e503.message, /nginx/, 'the page itself stays out')
})

t.test('failover between two upstreams', async (t) => {
  const live = await startUpstream()
  const failing = await startUpstream(['--fail-status', '503'])
  t.teardown(async () => {
    await live.stop()
    await failing.stop()
  })
  const dead = await closedPort()

  const run = async (first: string, label: string): Promise<void> => {
    const gw = await startTollgate({
      config: routeEverythingTo(
        {
          first: { type: 'openai', baseUrl: first, connectTimeoutMs: 500 },
          second: { type: 'openai', baseUrl: `${live.url}/v1` },
        },
        false,
      ),
    })
    t.teardown(() => gw.stop())
    const client = await freshKeyClient(gw)
    for (let i = 0; i < 6; i++) {
      const res = await client.chat.completions.create({
        model: CHAT,
        messages: [{ role: 'user', content: `call ${i}` }],
        max_tokens: 3,
      })
      t.equal(res.object, 'chat.completion', `${label}: call ${i} served`)
    }
    let streamed = ''
    for await (const chunk of await client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: 'stream' }],
      max_tokens: 3,
      stream: true,
    })) {
      streamed += chunk.choices[0]?.delta.content ?? ''
    }
    t.ok(streamed.length > 0, `${label}: a stream is served too`)
    const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
    t.match(metrics, /tollgate_failovers_total\{backend="first"\} [1-9]/, `${label}: failovers counted`)
  }
  await run(`http://127.0.0.1:${dead}/v1`, 'first upstream down')
  await run(`${failing.url}/v1`, 'first upstream answers 503')
})

t.test('upstream down, upstream timeout', async (t) => {
  const slow = await startUpstream(['--delay-ms', '3000'])
  t.teardown(() => slow.stop())
  const dead = await closedPort()
  const gw = await startTollgate({
    config: (doc) => {
      doc.backends = {
        ...(doc.backends as object),
        dead: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 },
        slow: { type: 'openai', baseUrl: `${slow.url}/v1`, responseTimeoutMs: 300 },
      }
      const models = doc.models as Array<{ name: string; deployments: unknown[] }>
      models.find((m) => m.name === CHAT)!.deployments = [{ backend: 'dead' }]
      models.find((m) => m.name === 'gpt-oss-120b')!.deployments = [{ backend: 'slow' }]
    },
  })
  t.teardown(() => gw.stop())
  const key = (await gw.createKey({ tier: 'Standard4000' })).key
  const post = (model: string) =>
    fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    })
  const down = await post(CHAT)
  t.equal(down.status, 502)
  t.match(await down.json(), { error: { code: 'upstream_unreachable', type: 'server_error' } })
  const late = await post('gpt-oss-120b')
  t.equal(late.status, 504)
  t.match(await late.json(), { error: { code: 'upstream_timeout' } })
  const ok = await post('Llama-3.3-70B-Instruct')
  t.equal(ok.status, 200, 'other models still served by the mock')
})

t.test('a client that leaves mid-stream: upstream aborted, streamed tokens still count', async (t) => {
  const upstream: UpstreamProcess = await startUpstream(['--tokens-per-second', '40'])
  t.teardown(() => upstream.stop())
  const gw: RunningTollgate = await startTollgate({
    config: routeEverythingTo({ up: { type: 'openai', baseUrl: `${upstream.url}/v1` } }, false),
  })
  t.teardown(() => gw.stop())
  const client = await freshKeyClient(gw)
  const controller = new AbortController()
  const stream = await client.chat.completions.create(
    { model: CHAT, messages: [{ role: 'user', content: 'a long story please' }], max_tokens: 400, stream: true },
    { signal: controller.signal },
  )
  let chunks = 0
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) chunks++
      if (chunks === 5) controller.abort()
    }
  } catch {
    // the SDK throws an abort error: expected
  }
  t.ok(chunks >= 5)
  let line: Record<string, unknown> | undefined
  for (let i = 0; i < 50 && !line; i++) {
    await new Promise((r) => setTimeout(r, 100))
    line = gw.logs().find((l) => l.msg === 'request' && l.route === 'chat.completions' && l.aborted === true)
  }
  t.ok(line, 'the request is logged as aborted')
  t.ok(Number(line?.inputTokens) > 0, 'prompt tokens counted')
  t.ok(
    Number(line?.outputTokens) >= 5 && Number(line?.outputTokens) < 400,
    `streamed tokens counted (${line?.outputTokens})`,
  )
})

t.test('SIGTERM with a stream in flight: the stream finishes, then exit 0', async (t) => {
  // A slow mock, so that the stream is still running when the signal arrives.
  const gw = await startTollgate({
    config: (doc) => {
      Object.assign((doc.backends as Record<string, object>).mock ?? {}, { tokensPerSecond: 300 })
    },
  })
  t.teardown(() => gw.stop())
  const client = await freshKeyClient(gw)
  const stream = await client.chat.completions.create({
    model: CHAT,
    messages: [{ role: 'user', content: 'go' }],
    max_tokens: 600,
    stream: true,
  })
  let text = ''
  let finish: string | null | undefined
  let signalled = false
  const exit = new Promise<number | null>((done) => gw.child.once('exit', (code) => done(code)))
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
    if (!signalled && text.length > 0) {
      signalled = true
      gw.child.kill('SIGTERM')
      // A new request while draining is refused.
      const during = await fetch(`${gw.url}/healthz`).then(
        (r) => r.status,
        () => 0,
      )
      t.ok(during === 200 || during === 0, 'health answers or the listener is closed')
    }
  }
  t.ok(signalled)
  t.equal(finish, 'length', 'the in-flight stream ran to its end')
  t.equal(await exit, 0, 'exit code 0 after draining')
  t.match(gw.output(), /draining/)
})

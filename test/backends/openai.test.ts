import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import http, { type IncomingMessage } from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { createOpenAIBackend } from '../../src/backends/openai.ts'
import type { BackendAdapter, UpstreamResponse } from '../../src/backends/port.ts'
import type { OpenAIBackendConfig } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { readJsonBody, type MultipartBody, type RequestBody } from '../../src/http/body.ts'
import { sendError } from '../../src/http/reply.ts'
import { upstreamBodyOf } from '../../src/inference/upstream-request.ts'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { call, dataOf, open, startGateway, upstreamRequestFor, type Gateway } from '../proxy/gateway-harness.ts'

function configFor(baseUrl: string, overrides: Partial<OpenAIBackendConfig> = {}): OpenAIBackendConfig {
  return {
    type: 'openai',
    baseUrl,
    connectTimeoutMs: 1_000,
    responseTimeoutMs: 2_000,
    idleTimeoutMs: 2_000,
    maxSockets: 4,
    headers: {},
    ...overrides,
  }
}

interface Seen {
  response?: UpstreamResponse
  error?: unknown
  bodyError?: unknown
}

/**
 * A gateway that sends every request through `adapter` and pipes the upstream's answer
 * back; errors before headers become OpenAI error replies, as the real app does.
 */
async function gatewayFor(
  t: Test,
  adapter: BackendAdapter,
  route: (
    req: IncomingMessage,
  ) => Promise<{ path: string; body: RequestBody; method?: 'GET' | 'POST' | 'DELETE'; signal?: AbortSignal }>,
): Promise<{ gateway: Gateway; seen: Seen[] }> {
  const seen: Seen[] = []
  const gateway = await startGateway(async (req, res) => {
    const record: Seen = {}
    seen.push(record)
    try {
      const fields = await route(req)
      const response = await adapter.send(upstreamRequestFor(req, res, fields))
      record.response = response
      res.writeHead(response.status, { 'content-type': response.headers['content-type'] ?? 'application/octet-stream' })
      try {
        for await (const chunk of response.body) res.write(chunk)
        res.end()
      } catch (err) {
        record.bodyError = err
        res.end()
      }
    } catch (err) {
      record.error = err
      sendError({ res }, err)
    }
  })
  t.teardown(() => gateway.close())
  return { gateway, seen }
}

async function jsonRoute(
  req: IncomingMessage,
  path = '/chat/completions',
): Promise<{ path: string; body: RequestBody }> {
  const body = await readJsonBody(req, 1 << 20)
  // The gateway rewrites the model before the adapter sees the body.
  return { path, body: { kind: 'json', value: { ...body.value, model: 'upstream-model' } } }
}

/** A GET with no body to `path`, whatever the client sent (its body is read and dropped). */
function bodilessGet(
  path: string,
): (req: IncomingMessage) => Promise<{ path: string; method: 'GET'; body: RequestBody }> {
  return async (req) => {
    for await (const _ of req) {
      /* drain */
    }
    return { path, method: 'GET', body: { kind: 'none' } }
  }
}

async function fake(t: Test): Promise<FakeUpstream> {
  const upstream = await startFakeUpstream()
  t.teardown(() => upstream.close())
  return upstream
}

function backend(
  t: Test,
  config: OpenAIBackendConfig,
  key: { apiKey: string | undefined } = { apiKey: 'sk-upstream-secret' },
): BackendAdapter {
  const adapter = createOpenAIBackend('test', config, key.apiKey)
  t.teardown(() => adapter.close())
  return adapter
}

const chatBody = JSON.stringify({ model: 'public-model', messages: [{ role: 'user', content: 'hi' }] })

t.test('the upstream gets the gateway key, the rewritten model and none of the client credentials', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url, { headers: { 'api-version': '2024-10-21' } }))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))

  const reply = await call(gateway.url, {
    path: '/v1/chat/completions',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer tg-client-key',
      cookie: 'session=abc',
      'x-api-key': 'tg-client-key',
      'x-tollgate-debug': '1',
      'accept-encoding': 'gzip, br',
      'openai-organization': 'org-client',
      'x-forwarded-for': '203.0.113.9',
      'x-custom': 'kept',
    },
    body: chatBody,
  })
  t.equal(reply.status, 200)
  t.equal((JSON.parse(reply.body) as { usage: { prompt_tokens: number } }).usage.prompt_tokens, 17)

  t.equal(upstream.requests.length, 1)
  const seen = upstream.requests[0]!
  t.equal(seen.method, 'POST')
  t.equal(seen.path, '/v1/chat/completions')
  t.equal(seen.headers.authorization, 'Bearer sk-upstream-secret')
  t.notOk(seen.headers.cookie, 'cookie removed')
  t.notOk(seen.headers['x-api-key'], 'x-api-key removed')
  t.notOk(seen.headers['x-tollgate-debug'], 'x-tollgate-* removed')
  t.notOk(seen.headers['openai-organization'], 'client organization removed')
  t.notOk(seen.headers['x-forwarded-for'], 'client address claims removed')
  t.equal(seen.headers['accept-encoding'], 'identity')
  t.equal(seen.headers['x-request-id'], 'req_test123')
  t.equal(seen.headers['api-version'], '2024-10-21')
  t.equal(seen.headers['x-custom'], 'kept')
  t.equal(seen.headers.host, `127.0.0.1:${upstream.port}`)
  t.equal(seen.headers['content-type'], 'application/json')
  t.equal(seen.headers['content-length'], String(seen.body.length))
  t.notOk(seen.headers['transfer-encoding'])
  t.same(seen.json, { model: 'upstream-model', messages: [{ role: 'user', content: 'hi' }] })
})

t.test('a JSON body goes upstream as the client sent it, patched only where the model changes', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, async (req) => ({
    path: '/chat/completions',
    body: upstreamBodyOf('chat.completions', await readJsonBody(req, 1 << 20), 'upstream-model', false),
  }))
  // Formatting and a number beyond a double, which a parse and serialise would lose.
  const sent =
    '{\n  "model": "public-model",\n  "messages": [{"role": "user", "content": "hi"}],\n  "seed": 12345678901234567890\n}'
  const reply = await call(gateway.url, {
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: sent,
  })
  t.equal(reply.status, 200)
  t.equal(upstream.requests[0]?.body.toString('utf8'), sent.replace('"public-model"', '"upstream-model"'))
  t.equal(upstream.requests[0]?.headers['content-length'], String(Buffer.byteLength(sent) + 2))
})

t.test('without a configured key the upstream gets no authorization at all', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url), { apiKey: undefined })
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json', authorization: 'Bearer tg-client-key' },
    body: chatBody,
  })
  t.equal(reply.status, 200)
  t.equal(upstream.requests[0]?.headers.authorization, undefined)
})

t.test('a client Expect: 100-continue does not let its headers out early', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json', authorization: 'Bearer tg-client-key', expect: '100-continue' },
    body: chatBody,
  })
  t.equal(reply.status, 200)
  t.equal(upstream.requests[0]?.headers.authorization, 'Bearer sk-upstream-secret')
  t.notOk(upstream.requests[0]?.headers.expect)
})

t.test("the method is the request's, not the client's, and a bodiless request sends no body", async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, bodilessGet('/models?limit=2'))
  const reply = await call(gateway.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"ignored":true}',
  })
  t.equal(reply.status, 200)
  const seen = upstream.requests[0]!
  t.equal(seen.method, 'GET')
  t.equal(seen.path, '/v1/models?limit=2')
  t.equal(seen.body.length, 0)
  t.notOk(seen.headers['content-type'])
  t.notOk(seen.headers['transfer-encoding'])
})

t.test('a multipart upload arrives byte for byte, streamed from its spool file', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const dir = await mkdtemp(join(tmpdir(), 'tollgate-openai-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const boundary = '----tollgate-test-boundary'
  const file = randomBytes(6 * 1024 * 1024)
  const bytes = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-large-v3\r\n`),
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
    ),
    file,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ])
  const path = join(dir, 'upload')
  await writeFile(path, bytes)
  let opened = 0
  const multipart: MultipartBody = {
    kind: 'multipart',
    fields: { model: 'whisper-large-v3' },
    files: [{ field: 'file', filename: 'a.wav', mimeType: 'audio/wav', size: file.length }],
    contentType: `multipart/form-data; boundary=${boundary}`,
    size: bytes.length,
    open: () => {
      opened += 1
      return createReadStream(path, { highWaterMark: 64 * 1024 })
    },
    dispose: async () => undefined,
  }
  const { gateway } = await gatewayFor(t, adapter, async (req) => {
    for await (const _ of req) {
      /* the real gateway spooled it */
    }
    return { path: '/audio/transcriptions', body: multipart }
  })
  const reply = await call(gateway.url, { headers: { 'content-type': 'text/plain' }, body: 'x' })
  t.equal(reply.status, 200)
  const echo = JSON.parse(reply.body) as { bytes: number; sha256: string; content_type: string }
  const expected = createHash('sha256').update(bytes).digest('hex')
  t.equal(echo.bytes, bytes.length)
  t.equal(echo.sha256, expected)
  t.equal(echo.content_type, multipart.contentType)
  t.equal(upstream.requests[0]?.headers['content-length'], String(bytes.length))
  t.equal(opened, 1)
})

t.test('a refused connection is upstream_unreachable (502)', async (t) => {
  const closed = http.createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const { port } = closed.address() as AddressInfo
  await new Promise<void>((resolve) => closed.close(() => resolve()))

  const adapter = backend(t, configFor(`http://127.0.0.1:${port}/v1`))
  const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody })
  t.equal(reply.status, 502)
  t.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'upstream_unreachable')
  t.ok(seen[0]?.error instanceof GatewayError)
  t.equal((seen[0]?.error as GatewayError).errorName, 'upstream_unreachable')
  t.notMatch(reply.body, /sk-upstream-secret/)
})

t.test(
  'no response headers within responseTimeoutMs is upstream_timeout (504), and the upstream request is dropped',
  async (t) => {
    const upstream = await fake(t)
    upstream.options.headerDelayMs = 1_500
    const adapter = backend(t, configFor(upstream.url, { responseTimeoutMs: 100 }))
    const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
    const reply = await call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody })
    t.equal(reply.status, 504)
    t.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'upstream_timeout')
    t.equal(await upstream.requests[0]?.ended, 'closed')
  },
)

t.test('an upstream that goes quiet mid-stream has its body destroyed with upstream_timeout', async (t) => {
  const upstream = await fake(t)
  upstream.options.stallAfterEvents = 2
  const adapter = backend(t, configFor(upstream.url, { idleTimeoutMs: 150 }))
  const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [], stream: true }),
  })
  t.equal(reply.status, 200)
  t.equal(dataOf(reply.body).length, 2, 'the events before the stall came through')
  t.ok(seen[0]?.bodyError instanceof GatewayError)
  t.equal((seen[0]?.bodyError as GatewayError).errorName, 'upstream_timeout')
  t.equal(await upstream.requests[0]?.ended, 'closed', 'the stalled upstream socket was closed')
})

t.test('a stream longer than the idle timeout, never quiet that long, comes through whole', async (t) => {
  const upstream = await fake(t)
  // 24 events 100 ms apart: 2.4 s in all against a 1 s idle timeout that each event pushes back.
  upstream.options.replyText = Array.from({ length: 24 }, (_, i) => `word${i}`).join(' ')
  upstream.options.eventDelayMs = 100
  const adapter = backend(t, configFor(upstream.url, { idleTimeoutMs: 1_000 }))
  const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const started = performance.now()
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [], stream: true }),
  })
  t.equal(reply.status, 200)
  t.ok(performance.now() - started > 1_000, 'the stream outlasted the idle timeout')
  t.equal(seen[0]?.bodyError, undefined, 'the body was not cut')
  t.ok(reply.body.includes('data: [DONE]'), 'every event came through')
  t.equal(dataOf(reply.body).filter((d) => d.includes('word23')).length, 1, 'the last word came')
})

t.test('an upstream that cuts the connection mid-stream ends the body with upstream_bad_response', async (t) => {
  const upstream = await fake(t)
  upstream.options.dropAfterEvents = 3
  const adapter = backend(t, configFor(upstream.url))
  const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [], stream: true }),
  })
  t.equal(reply.status, 200)
  t.equal(dataOf(reply.body).length, 3)
  t.equal((seen[0]?.bodyError as GatewayError | undefined)?.errorName, 'upstream_bad_response')
})

t.test('an upstream 5xx is a response, not an error: failover decides what to do with it', async (t) => {
  const upstream = await fake(t)
  upstream.options.failWith = 503
  const adapter = backend(t, configFor(upstream.url))
  const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody })
  t.equal(reply.status, 503)
  t.equal(seen[0]?.response?.status, 503)
  t.equal(seen[0]?.response?.headers['content-type'], 'application/json')
  t.notOk(seen[0]?.response?.headers.connection, 'hop-by-hop headers removed')
})

t.test('aborting the signal before headers drops the upstream request', async (t) => {
  const upstream = await fake(t)
  upstream.options.headerDelayMs = 2_000
  const adapter = backend(t, configFor(upstream.url))
  const controller = new AbortController()
  const { gateway, seen } = await gatewayFor(t, adapter, async (req) => ({
    ...(await jsonRoute(req)),
    signal: controller.signal,
  }))
  const pending = call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody })
  for (let i = 0; i < 200 && upstream.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
  controller.abort()
  const reply = await pending
  t.equal(reply.status, 504)
  t.ok(seen[0]?.error instanceof GatewayError)
  t.equal(await upstream.requests[0]?.ended, 'closed')
})

t.test('a client that disconnects mid-stream closes the upstream exchange', async (t) => {
  const upstream = await fake(t)
  upstream.options.stallAfterEvents = 2
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const { req, res } = await open(gateway.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [], stream: true }),
  })
  await new Promise((resolve) => res.once('data', resolve))
  req.destroy()
  t.equal(await upstream.requests[0]?.ended, 'closed')
})

t.test('keep-alive: consecutive requests share one upstream connection', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  for (let i = 0; i < 3; i++) {
    const reply = await call(gateway.url, {
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: chatBody,
    })
    t.equal(reply.status, 200)
  }
  t.equal(upstream.requests.length, 3)
  t.equal(upstream.connections(), 1)
  t.notOk(upstream.requests[2]?.headers.connection === 'close', "the client's connection header is not forwarded")
})

t.test(
  'a kept-alive connection the upstream dropped as the request went out: sent once more on a new one',
  async (t) => {
    // Each connection answers its first request and, as a server closing an idle connection
    // at that very moment would, drops it when a second request arrives on it.
    let connections = 0
    let answered = 0
    const server = net.createServer((socket) => {
      connections++
      let requests = 0
      let buffered = ''
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1')
        const end = buffered.indexOf('\r\n\r\n')
        if (end < 0) return
        const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0)
        if (buffered.length < end + 4 + length) return
        buffered = buffered.slice(end + 4 + length)
        if (++requests > 1) {
          socket.resetAndDestroy()
          return
        }
        answered++
        const body = JSON.stringify({ id: `c${answered}`, object: 'chat.completion', choices: [] })
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`,
        )
      })
      socket.on('error', () => undefined)
    })
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    t.teardown(() => server.close())
    const adapter = backend(t, configFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`))
    const { gateway, seen } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
    const replies = []
    for (let i = 0; i < 3; i++)
      replies.push(await call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody }))
    t.same(
      replies.map((r) => r.status),
      [200, 200, 200],
      'every call answered',
    )
    t.same(
      replies.map((r) => (JSON.parse(r.body) as { id: string }).id),
      ['c1', 'c2', 'c3'],
      "each by a fresh connection's first answer",
    )
    t.equal(connections, 3, 'the dropped ones were not retried on the same socket')
    t.notOk(
      seen.some((s) => s.error !== undefined),
      'no error reached the caller',
    )
  },
)

t.test('a fresh connection reset before any answer is not sent again: upstream_unreachable', async (t) => {
  let connections = 0
  const server = net.createServer((socket) => {
    connections++
    socket.once('data', () => socket.resetAndDestroy())
    socket.on('error', () => undefined)
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  t.teardown(() => server.close())
  const adapter = backend(t, configFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const reply = await call(gateway.url, { headers: { 'content-type': 'application/json' }, body: chatBody })
  t.equal(reply.status, 502)
  t.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'upstream_unreachable')
  t.equal(connections, 1, 'one attempt only (failover, not this adapter, decides about others)')
})

t.test('a path with dot segments is refused before anything is sent', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(upstream.url))
  const { gateway } = await gatewayFor(t, adapter, bodilessGet('/files/../fine_tuning/jobs'))
  const reply = await call(gateway.url, { method: 'GET' })
  t.equal(reply.status, 404)
  t.equal(upstream.requests.length, 0)
})

t.test('a trailing slash on baseUrl does not double the slash', async (t) => {
  const upstream = await fake(t)
  const adapter = backend(t, configFor(`${upstream.url}/`))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req, '/embeddings'))
  const reply = await call(gateway.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'e', input: 'x' }),
  })
  t.equal(reply.status, 200)
  t.equal(upstream.requests[0]?.path, '/v1/embeddings')
})

t.test('requests queued behind maxSockets still have their headers rewritten', async (t) => {
  const upstream = await fake(t)
  upstream.options.headerDelayMs = 30
  const adapter = backend(t, configFor(upstream.url, { maxSockets: 1 }))
  const { gateway } = await gatewayFor(t, adapter, (req) => jsonRoute(req))
  const replies = await Promise.all(
    [0, 1, 2].map(() =>
      call(gateway.url, {
        headers: { 'content-type': 'application/json', authorization: 'Bearer tg-client-key' },
        body: chatBody,
      }),
    ),
  )
  t.same(
    replies.map((r) => r.status),
    [200, 200, 200],
  )
  t.same(
    upstream.requests.map((r) => r.headers.authorization),
    Array(3).fill('Bearer sk-upstream-secret'),
  )
  t.equal(upstream.connections(), 1, 'they waited for the one socket')
})

t.test('a client that leaves before the upstream answers ends the attempt for good', async (t) => {
  const upstream = await fake(t)
  upstream.options.headerDelayMs = 1_000
  const adapter = backend(t, configFor(upstream.url))
  // A signal that never fires: only the client's own disconnect can end this.
  const { gateway, seen } = await gatewayFor(t, adapter, async (req) => ({
    ...(await jsonRoute(req)),
    signal: new AbortController().signal,
  }))
  const { req } = await new Promise<{ req: http.ClientRequest }>((resolve) => {
    const req = http.request(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      agent: false,
    })
    req.on('error', () => undefined)
    req.end(chatBody)
    resolve({ req })
  })
  for (let i = 0; i < 200 && upstream.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
  req.destroy()
  t.equal(await upstream.requests[0]?.ended, 'closed')
  for (let i = 0; i < 200 && seen[0]?.error === undefined; i++) await new Promise((r) => setTimeout(r, 5))
  t.equal(
    (seen[0]?.error as GatewayError | undefined)?.errorName,
    'upstream_timeout',
    'final: failover will not try another deployment for nobody',
  )
})

// Every refusal of the RAG gateway in FastAPI's shape {"detail"}: 401 (with
// WWW-Authenticate: Bearer), 403 from the route rules, 404, 429 with the /v2 limiter's
// headers, 502 for a backend that is down, 504 for one that does not answer in time.
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { closedPort } from '../helpers/gateway.ts'
import { ResponseReader } from '../helpers/http-reader.ts'
import { rawRequest, serveBackend, startRagHarness } from './harness.ts'
import { readText } from '../helpers/http.ts'

async function detailOf(res: Response, status: number): Promise<string> {
  const body = (await res.json()) as { detail?: unknown }
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(body)}`)
  if (typeof body.detail !== 'string' || Object.keys(body).length !== 1)
    throw new Error(`not {"detail"}: ${JSON.stringify(body)}`)
  return body.detail
}

t.test('401: no token, a bad one, an expired one; a public route needs none', async (t) => {
  const h = await startRagHarness(t)
  const url = `${h.url}/chat-session-manager/api/v1/sessions/`
  const none = await fetch(url)
  t.equal(await detailOf(none, 401), 'Not authenticated')
  t.equal(none.headers.get('www-authenticate'), 'Bearer')
  for (const authorization of [
    'Bearer not-a-jwt',
    'Basic dXNlcjpwYXNz',
    `Bearer ${await h.tokens.sign({ sub: 'u', expiresIn: -60 })}`,
  ]) {
    const res = await fetch(url, { headers: { authorization } })
    t.ok(
      res.status === 401 && res.headers.get('www-authenticate') === 'Bearer',
      `${authorization.slice(0, 12)}…: 401 with the challenge`,
    )
    t.match(await detailOf(res, 401), /^(Not authenticated|Could not validate credentials)$/)
  }
  // A token signed with another key.
  const { createTestTokens } = await import('../helpers/rag-tokens.ts')
  const stranger = await (await createTestTokens()).sign({ sub: 'u' })
  t.equal(
    await detailOf(await fetch(url, { headers: { authorization: `Bearer ${stranger}` } }), 401),
    'Could not validate credentials',
  )
  t.equal((await fetch(`${h.url}/chat-session-manager/openapi.json`)).status, 200, 'public')
  t.equal((await fetch(`${h.url}/chat-session-manager/docs`)).status, 200, 'public')
  t.equal((await fetch(`${h.url}/chat-session-manager/redoc`, { method: 'POST' })).status, 401, 'public only for GET')

  const lines = h.logs().filter((l) => l.msg === 'request')
  t.ok(lines.length >= 7, 'one access-log line per request')
  const everything = JSON.stringify(h.logs())
  t.notOk(everything.includes(stranger.slice(-20)), 'no token in the log')
})

t.test('403: route rules by role, method and path prefix', async (t) => {
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['chat-session-manager'] = {
        ...rag.services['chat-session-manager'],
        rules: [{ methods: ['GET'], prefix: '/api/v1/sessions/', roles: ['reader'] }],
      }
    },
  })
  const user = await h.auth({ sub: 'u1', roles: ['user'] })
  const admin = await h.auth({ sub: 'a1', roles: ['admin'] })
  const write = (headers: Record<string, string>): Promise<Response> =>
    fetch(`${h.url}/config-manager/api/v1/configurations/`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'c1', top_k: 3 }),
    })
  t.equal(
    await detailOf(await write(user), 403),
    'Not enough permissions for this route',
    'a write to config-manager needs admin',
  )
  t.equal((await write(admin)).status, 201, 'an admin may')
  t.equal(
    (await fetch(`${h.url}/config-manager/api/v1/configurations/c1`, { headers: user })).status,
    200,
    'anyone signed in may read',
  )
  t.equal(
    (await fetch(`${h.url}/config-manager/api/v1/configurations/c1`, { method: 'DELETE', headers: user })).status,
    403,
  )

  const reader = await h.auth({ sub: 'r1', roles: ['reader'] })
  t.equal(
    (await fetch(`${h.url}/chat-session-manager/api/v1/sessions/`, { headers: user })).status,
    403,
    'the prefix rule',
  )
  t.equal((await fetch(`${h.url}/chat-session-manager/api/v1/sessions/`, { headers: reader })).status, 200)
  t.equal(
    (await rawRequest(h.url, '/chat-session-manager/api/v1/sessions', { headers: user })).status,
    403,
    'without the trailing slash too',
  )
  t.equal(
    (await rawRequest(h.url, '/chat-session-manager/api/v1/%73essions/', { headers: user })).status,
    403,
    'an encoded letter does not slip past the rule',
  )
  t.equal(
    (await rawRequest(h.url, '/chat-session-manager/api/v1/sessions/', { method: 'HEAD', headers: user })).status,
    405,
    "HEAD is not routed (so it cannot slip past GET's rule)",
  )
  t.equal(
    (await fetch(`${h.url}/chat-session-manager/api/v1/sessionsx`, { headers: user })).status,
    404,
    "prefixes end at a segment: the backend's own 404",
  )
})

t.test("404: an unknown service, and a backend's own 404 passes through", async (t) => {
  const h = await startRagHarness(t)
  const headers = await h.auth()
  t.equal(await detailOf(await fetch(`${h.url}/search-manager/api/v1/x`, { headers }), 404), 'Not Found')
  t.equal(await detailOf(await fetch(`${h.url}/search-manager`, { headers }), 404), 'Not Found')
  t.equal(
    await detailOf(await fetch(`${h.url}/file-manager/`, { headers }), 404),
    'Not Found',
    "a service's root is not routed",
  )
  t.equal(await detailOf(await fetch(`${h.url}/file-manager?x=1`, { headers }), 404), 'Not Found')
  const upper = await fetch(`${h.url}/Chat-Session-Manager/api/v1/sessions/`, { headers })
  t.equal(upper.status, 404, 'service paths are case-sensitive')
  t.equal(
    ((await upper.json()) as { error?: { code?: string } }).error?.code,
    'unknown_url',
    "and what does not look like a service path keeps the inference side's 404",
  )
  t.equal(await detailOf(await fetch(`${h.url}/file-manager/api/v1/nothing-here`, { headers }), 404), 'Not Found')
  const v2 = (await (await fetch(`${h.url}/v2/nope`)).json()) as { error?: { code?: string } }
  t.equal(v2.error?.code, 'unknown_url', '/v2 keeps its OpenAI-shaped 404')
})

t.test('429: requests per minute per user and per tenant, with the x-ratelimit-* headers', async (t) => {
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as Record<string, unknown>
      rag.limits = { userRpm: 3, tenantRpm: 100, tenants: { small: { tenantRpm: 4 } } }
    },
  })
  const url = `${h.url}/chat-session-manager/api/v1/sessions/`
  const headers = await h.auth({ sub: 'limited', roles: ['user'], tenant: 'acme' })
  const first = await fetch(url, { headers })
  t.equal(first.status, 200)
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '3')
  t.equal(first.headers.get('x-ratelimit-remaining-requests'), '2')
  t.match(first.headers.get('x-ratelimit-reset-requests'), /^\d+(\.\d+)?(ms|s)|^\d+m/)
  await fetch(url, { headers })
  await fetch(url, { headers })
  const refused = await fetch(url, { headers })
  t.match(await detailOf(refused, 429), /^Rate limit reached for the RAG gateway \(per user\)/)
  t.ok(Number(refused.headers.get('retry-after')) >= 1, 'retry-after')
  t.ok(Number(refused.headers.get('retry-after-ms')) > 0, 'retry-after-ms')
  t.equal(refused.headers.get('x-ratelimit-remaining-requests'), '0')
  t.equal(
    (await fetch(url, { headers: await h.auth({ sub: 'other', tenant: 'acme' }) })).status,
    200,
    'another user has their own count',
  )

  // Tenant "small": 4 a minute across its users.
  const statuses: number[] = []
  for (const sub of ['s1', 's2', 's3', 's4', 's5'])
    statuses.push((await fetch(url, { headers: await h.auth({ sub, tenant: 'small' }) })).status)
  t.same(statuses, [200, 200, 200, 200, 429], "the tenant's limit spans its users")
  t.match(
    await detailOf(await fetch(url, { headers: await h.auth({ sub: 's6', tenant: 'small' }) }), 429),
    /^Rate limit reached for the RAG gateway \(per tenant\)/,
  )
  t.equal(
    (await fetch(`${h.url}/chat-session-manager/redoc`)).status,
    200,
    'public routes are not counted against users',
  )
})

t.test('429: public routes (no token) per client address', async (t) => {
  const h = await startRagHarness(t, {
    config: (doc) => {
      ;(doc.rag as Record<string, unknown>).limits = { publicRpm: 2 }
    },
  })
  const first = await fetch(`${h.url}/config-manager/redoc`)
  t.equal(first.status, 200)
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '2')
  t.equal(first.headers.get('x-ratelimit-remaining-requests'), '1')
  t.equal((await fetch(`${h.url}/file-manager/openapi.json`)).status, 200, 'one count across the services')
  const refused = await fetch(`${h.url}/config-manager/docs`)
  t.match(
    await detailOf(refused, 429),
    /^Rate limit reached for the RAG gateway's public routes \(per client address\)/,
  )
  t.ok(Number(refused.headers.get('retry-after')) >= 1, 'retry-after')
  t.equal(
    (await fetch(`${h.url}/chat-session-manager/api/v1/sessions/`, { headers: await h.auth() })).status,
    200,
    'a call with a token is not on that counter',
  )
})

t.test('502 when a backend is down, 504 when it does not answer in time', async (t) => {
  const silentUrl = await serveBackend(t, () => {
    /* never answers */
  })
  const down = await closedPort()
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['ingest-master'] = { baseUrl: `http://127.0.0.1:${down}` }
      rag.services['file-manager'] = {
        baseUrl: `${silentUrl}/base`,
        responseTimeoutMs: 300,
      }
    },
  })
  const headers = await h.auth()
  t.equal(
    await detailOf(await fetch(`${h.url}/ingest-master/api/v1/ingest`, { method: 'POST', headers, body: '{}' }), 502),
    'The ingest-master service is unavailable',
  )
  const started = performance.now()
  t.equal(
    await detailOf(await fetch(`${h.url}/file-manager/api/v1/files/`, { headers }), 504),
    'The file-manager service did not answer in time',
  )
  t.ok(performance.now() - started < 10_000, 'within the service timeout (generously bounded)')
  t.equal(
    await detailOf(await fetch(`${h.url}/ingest-master/redoc`), 502),
    'The ingest-master service is unavailable',
    'public routes too',
  )

  const metrics = await (await fetch(`${h.gateway.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_rag_requests_total\{service="ingest-master",class="5xx"\} 2/)
  t.match(metrics, /tollgate_rag_requests_total\{service="file-manager",class="5xx"\} 1/)
  t.match(metrics, /tollgate_rag_request_duration_seconds_count\{service="file-manager"\} 1/)
  const line = h.logs().find((l) => l.msg === 'request' && l.route === 'rag.file-manager')
  t.equal(line?.status, 504)
  t.equal(line?.userId, 'user-1', 'the access log names the user')
  t.equal(line?.error, 'rag_service_timeout', "the error table's name of the refusal")
})

t.test('a backend error without a JSON body reaches the client as {"detail"}, its status kept', async (t) => {
  const oddUrl = await serveBackend(t, (req, res) => {
    if (req.url?.includes('headers')) {
      res.writeHead(431, { connection: 'close' })
      res.end()
    } else {
      res.writeHead(503, { 'content-type': 'text/html', 'retry-after': '9' })
      res.end('<html>upstream nginx at /srv/secret-path</html>')
    }
  })
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['file-manager'] = { baseUrl: oddUrl }
    },
  })
  const headers = await h.auth()
  t.equal(
    await detailOf(await fetch(`${h.url}/file-manager/api/v1/headers`, { headers }), 431),
    'The file-manager service answered 431 (Request Header Fields Too Large)',
  )
  const busy = await fetch(`${h.url}/file-manager/api/v1/busy`, { headers })
  t.equal(busy.headers.get('retry-after'), '9', 'Retry-After kept')
  const detail = await detailOf(busy, 503)
  t.equal(detail, 'The file-manager service answered 503 (Service Unavailable)')
  t.notMatch(detail, /secret-path/, "the backend's page stays out")
})

t.test(
  'a backend that answers before it read the whole body: the client reads the answer and its next request on the connection is answered too',
  async (t) => {
    // The mock answers feedback on an unknown session at once (404) and reads no more of
    // the 600 KB body; the gateway must take the rest of it off the connection itself.
    const h = await startRagHarness(t)
    const auth = (await h.auth()).authorization ?? ''
    const padding = `{"rating":1,"padding":"${'x'.repeat(600_000)}"}`
    const early = Buffer.from(
      `POST /chat-session-manager/api/v1/sessions/no-such-session/feedback HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${padding.length}\r\n\r\n${padding}`,
    )
    const next = Buffer.from(
      `GET /chat-session-manager/api/v1/sessions/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`,
    )
    for (let round = 0; round < 3; round++) {
      const socket = connect(Number(new URL(h.url).port), '127.0.0.1')
      socket.on('error', () => undefined)
      const reader = new ResponseReader(socket)
      await new Promise<void>((done) => socket.once('connect', () => done()))
      socket.write(early)
      const first = await reader.next('POST')
      t.equal(first?.status, 404, `round ${round}: the backend's early answer`)
      const started = performance.now()
      socket.write(next)
      const second = await reader.next('GET')
      t.equal(
        second?.status,
        200,
        `round ${round}: the next request on the connection is answered (${reader.error?.message ?? 'no socket error'})`,
      )
      t.ok(performance.now() - started < 4000, 'without waiting for the drain to give up')
      socket.destroy()
    }
  },
)

t.test(
  "413: a body over the service's maxBodyBytes, declared or streamed, never reaches the backend whole",
  async (t) => {
    const whole: number[] = []
    let started = 0
    const backendUrl = await serveBackend(t, (req, res) => {
      started++
      let n = 0
      req.on('data', (c: Buffer) => {
        n += c.length
      })
      req.once('end', () => {
        whole.push(n)
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ received: n }))
      })
    })
    const h = await startRagHarness(t, {
      config: (doc) => {
        const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
        rag.services['file-manager'] = {
          baseUrl: backendUrl,
          maxBodyBytes: 1024 * 1024,
        }
      },
    })
    const headers = await h.auth()
    const url = new URL(`${h.url}/file-manager/api/v1/files/upload`)
    /** Sends `total` bytes in 64 KiB chunks (chunked unless `declared`) and reads the reply, whatever happens to the upload. */
    const upload = (total: number, declared: boolean): Promise<{ status: number; body: string }> =>
      new Promise((done, fail) => {
        const req = httpRequest(
          url,
          {
            method: 'POST',
            headers: {
              ...headers,
              'content-type': 'application/octet-stream',
              ...(declared ? { 'content-length': String(total) } : {}),
            },
          },
          readText(done),
        )
        req.on('error', () => undefined)
        const chunk = Buffer.alloc(64 * 1024, 120)
        let sent = 0
        const more = (): void => {
          while (sent < total) {
            sent += chunk.length
            if (!req.write(chunk)) return void req.once('drain', more)
          }
          req.end()
        }
        more()
        setTimeout(() => fail(new Error('no reply in 10 s')), 10_000).unref()
      })

    const declared = await upload(2 * 1024 * 1024, true)
    t.equal(declared.status, 413, 'a declared length over the cap')
    t.match(JSON.parse(declared.body), { detail: /at most 1048576 bytes/ })
    t.equal(started, 0, 'and the backend was never asked')

    const streamed = await upload(2 * 1024 * 1024, false)
    t.equal(streamed.status, 413, 'a chunked body that grows past the cap')
    t.same(whole, [], 'the backend never got a whole body')

    const fits = await upload(512 * 1024, false)
    t.equal(fits.status, 200, 'under the cap it streams through')
    t.same(JSON.parse(fits.body), { received: 512 * 1024 })
  },
)

t.test('stalls: a body that stops arriving is refused (408), a reply that stops is cut', async (t) => {
  const stallingUrl = await serveBackend(t, (req, res) => {
    if (req.url?.startsWith('/stall-reply')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('event: token\ndata: {"token":"only"}\n\n')
      return
    }
    req.resume()
    req.once('end', () => res.writeHead(200).end('{}'))
  })
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['query-pipeline'] = {
        baseUrl: stallingUrl,
        idleTimeoutMs: 300,
      }
    },
  })
  const headers = await h.auth()
  const { request } = await import('node:http')
  const refused = await new Promise<{ status: number; body: string }>((done, fail) => {
    const req = request(
      `${h.url}/query-pipeline/upload`,
      { method: 'POST', headers: { ...headers, 'content-length': '1000' } },
      readText(done),
    )
    req.once('error', fail)
    req.write('only ten b')
  })
  t.equal(refused.status, 408)
  t.same(JSON.parse(refused.body), { detail: 'The request body stopped arriving' })

  const res = await fetch(`${h.url}/query-pipeline/stall-reply`, { headers })
  t.equal(res.status, 200)
  const cut = await res.text().then(
    () => 'ended',
    () => 'cut',
  )
  t.equal(cut, 'cut', 'the client sees the stream break off, not a clean end')
})

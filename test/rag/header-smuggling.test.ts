// Smuggled identity: a client that spells the gateway's identity headers another way
// (x_tollgate_user_id, X_TOLLGATE_TENANT, x-forwarded_user...) must not reach a backend,
// since CGI/WSGI-style servers fold `_` and `-` (and case) into one name and may read the
// client's copy. Sent as raw bytes on a socket (a client library may refuse or rewrite
// such names) to a backend that records the raw header lines it received.
import { createServer, type IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import t, { type Test } from 'tap'
import { startRagHarness } from './harness.ts'

interface Recorder {
  readonly url: string
  /** Raw header lines ([name, value]) of each request, in arrival order. */
  readonly seen: Array<Array<[string, string]>>
}

async function startRecorder(t: Test): Promise<Recorder> {
  const seen: Recorder['seen'] = []
  const server = createServer((req: IncomingMessage, res) => {
    const pairs: Array<[string, string]> = []
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2)
      pairs.push([req.rawHeaders[i] ?? '', req.rawHeaders[i + 1] ?? ''])
    seen.push(pairs)
    req.resume()
    req.once('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  t.teardown(
    () =>
      new Promise<void>((done) => {
        server.closeAllConnections()
        server.close(() => done())
      }),
  )
  const { port } = server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, seen }
}

/** One request as raw bytes; answers the status. */
function rawSend(base: string, target: string, lines: ReadonlyArray<readonly [string, string]>): Promise<number> {
  const url = new URL(base)
  return new Promise((done, fail) => {
    const socket = connect(Number(url.port), url.hostname)
    let reply = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      reply += chunk
    })
    socket.once('error', fail)
    socket.once('end', () => done(Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0)))
    const head = [
      `GET ${target} HTTP/1.1`,
      `Host: ${url.host}`,
      'Connection: close',
      ...lines.map(([n, v]) => `${n}: ${v}`),
    ]
    socket.write(`${head.join('\r\n')}\r\n\r\n`)
  })
}

/** The RAG gateway with user-manager's backend swapped for the recorder. */
function userManagerOn(t: Test, recorder: Recorder): ReturnType<typeof startRagHarness> {
  return startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['user-manager'] = { ...rag.services['user-manager'], baseUrl: recorder.url }
    },
  })
}

const fold = (name: string): string => name.toLowerCase().replaceAll('_', '-')

/** Every way a client might spell a header the gateway owns. */
function spellings(name: string): string[] {
  const underscored = name.replaceAll('-', '_')
  const title = name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase())
  return [
    underscored,
    underscored.toUpperCase(),
    title.replaceAll('-', '_'),
    name.replace('-', '_'),
    name.replace(/-([^-]*)$/, '_$1'),
  ]
}

const OWNED = [
  'x-tollgate-user-id',
  'x-tollgate-user-name',
  'x-tollgate-user-roles',
  'x-tollgate-user-groups',
  'x-tollgate-tenant',
  'x-tollgate-anything',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-prefix',
  'x-forwarded-user',
  'x-forwarded-port',
  'x-real-ip',
  'x-request-id',
  'x-remote-user',
  'x-user-id',
]

t.test("every spelling of an owned header is stripped; the gateway's own arrive intact", async (t) => {
  const recorder = await startRecorder(t)
  const h = await userManagerOn(t, recorder)
  const auth = await h.auth({ sub: 'usr_real', name: 'Real', roles: ['user'], groups: ['g'], tenant: 'acme' })
  const forged: Array<[string, string]> = []
  for (const name of OWNED)
    for (const spelled of spellings(name))
      forged.push([
        spelled,
        name.includes('roles') ? 'admin' : name.includes('tenant') ? 'victim-tenant' : 'usr_victim',
      ])
  t.ok(forged.length >= 60, `${forged.length} forged header lines`)
  const status = await rawSend(h.url, '/user-manager/api/v1/me', [
    ['Authorization', auth.authorization ?? ''],
    ...forged,
    ['X-Custom_Header', 'kept'],
  ])
  t.equal(status, 200)
  const lines = recorder.seen.at(-1) ?? []
  const byFolded = new Map<string, string[]>()
  for (const [name, value] of lines)
    byFolded.set(fold(name), [...(byFolded.get(fold(name)) ?? []), `${name}: ${value}`])
  for (const name of OWNED) {
    const got = byFolded.get(name) ?? []
    t.ok(
      got.every((line) => !/usr_victim|admin|victim-tenant/.test(line)),
      `${name}: no forged value (${got.join(' | ')})`,
    )
    t.ok(got.length <= 1, `${name}: at most one line, the gateway's`)
    t.ok(
      got.every((line) => line.startsWith(`${name}:`)),
      `${name}: only in the gateway's own spelling`,
    )
  }
  t.strictSame(byFolded.get('x-tollgate-user-id'), ['x-tollgate-user-id: usr_real'])
  t.strictSame(byFolded.get('x-tollgate-user-roles'), ['x-tollgate-user-roles: user'])
  t.strictSame(byFolded.get('x-tollgate-tenant'), ['x-tollgate-tenant: acme'])
  t.strictSame(byFolded.get('x-tollgate-user-name'), ['x-tollgate-user-name: Real'])
  t.strictSame(byFolded.get('x-forwarded-for'), ['x-forwarded-for: 127.0.0.1'])
  t.equal(byFolded.get('x-tollgate-anything'), undefined)
  t.equal(byFolded.get('x-forwarded-port'), undefined)
  t.strictSame(
    byFolded.get('x-custom-header'),
    ['x-custom_header: kept'],
    'a header the gateway does not own passes (lower-cased, as Node reads it)',
  )
})

t.test('an API key sent as api-key or x-api-key never reaches a RAG backend', async (t) => {
  const recorder = await startRecorder(t)
  const h = await userManagerOn(t, recorder)
  const auth = await h.auth({ sub: 'usr_real', roles: ['user'] })
  const secret = 'tg1_secretthatmustnotleave'
  const status = await rawSend(h.url, '/user-manager/api/v1/me', [
    ['Authorization', auth.authorization ?? ''],
    ['api-key', secret],
    ['X-Api-Key', secret],
    ['API_KEY', secret],
  ])
  t.equal(status, 200)
  const lines = recorder.seen.at(-1) ?? []
  t.notOk(
    lines.some(([, value]) => value.includes(secret)),
    `no key reached the backend: ${JSON.stringify(lines.map(([n]) => n))}`,
  )
})

t.test('configured identity and strip names are folded the same way', async (t) => {
  const recorder = await startRecorder(t)
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as {
        services: Record<string, Record<string, unknown>>
        identityHeaders: unknown
        stripHeaders: unknown
      }
      rag.services['config-manager'] = { ...rag.services['config-manager'], baseUrl: recorder.url }
      rag.identityHeaders = {
        userId: 'remote-user-id',
        username: 'remote-user-name',
        roles: 'remote-roles',
        groups: 'remote-groups',
        tenant: 'tenant-id',
      }
      rag.stripHeaders = ['x-impersonate']
    },
  })
  const auth = await h.auth({ sub: 'usr_real', roles: ['user'], tenant: 'acme' })
  const status = await rawSend(h.url, '/config-manager/api/v1/configs', [
    ['Authorization', auth.authorization ?? ''],
    ['remote_user_id', 'usr_victim'],
    ['REMOTE_ROLES', 'admin'],
    ['Tenant_Id', 'victim-tenant'],
    ['tenant_ID', 'victim-tenant'],
    ['X_Impersonate', 'usr_victim'],
    ['x-tollgate_user_id', 'usr_victim'],
  ])
  t.equal(status, 200)
  const lines = recorder.seen.at(-1) ?? []
  t.notOk(
    lines.some(([, value]) => /usr_victim|admin|victim-tenant/.test(value)),
    `no forged value reached the backend: ${JSON.stringify(lines)}`,
  )
  const folded = lines.map(([name, value]) => `${fold(name)}: ${value}`)
  t.ok(folded.includes('remote-user-id: usr_real'))
  t.ok(folded.includes('remote-roles: user'))
  t.ok(folded.includes('tenant-id: acme'))
})

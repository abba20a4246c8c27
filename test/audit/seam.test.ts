// The audit's seam: a route that changes state under /admin or /portal is audited by being
// declared, or the gateway does not start; the declarations and the API reference agree, so
// a route added without a declaration (or a declaration left behind) fails here.
import t from 'tap'
import { auditedRouter, type AuditSeamDeps } from '../../src/audit/audited-routes.ts'
import { AUDITED_ROUTES, NOT_CHANGES } from '../../src/audit/declarations.ts'
import { createAuditLog } from '../../src/audit/log.ts'
import { openEmbeddedAuditStore } from '../../src/audit/embedded-store.ts'
import { templateOf } from '../../src/openapi/operation.ts'
import { apiOperations } from '../../src/openapi/catalogue.ts'
import type { RouteHandler, Router } from '../../src/http/router.ts'
import type { RequestContext } from '../../src/http/context.ts'
import { clientIp } from '../../src/http/client-address.ts'
import type { IncomingMessage } from 'node:http'

function seam(registered: string[], overrides: Partial<AuditSeamDeps> = {}): Router {
  const router: Router = { on: (method, path) => registered.push(`${String(method)} ${path}`) }
  const subject = { type: 'thing', load: async () => null }
  return auditedRouter(router, {
    audit: createAuditLog({ store: openEmbeddedAuditStore(':memory:'), retentionDays: 1 }),
    subjects: Object.fromEntries(
      ['key', 'user', 'queue_request', 'budget', 'webhook', 'webhook_delivery', 'config', 'response_cache'].map(
        (type) => [type, subject],
      ),
    ),
    authenticateAdmin: () => undefined,
    portalUser: async () => null,
    trustProxyHops: 0,
    ...overrides,
  })
}
const noop: RouteHandler = async () => undefined

t.test('an undeclared route that changes state under /admin or /portal stops the boot', async (t) => {
  const registered: string[] = []
  const router = seam(registered)
  for (const [method, path] of [
    ['POST', '/admin/budgets'],
    ['PUT', '/admin/webhooks/:id'],
    ['DELETE', '/portal/keys/:id'],
    ['PATCH', '/admin/keys/:id/limits'],
  ] as const) {
    t.throws(() => router.on(method, path, noop), /not declared in src\/audit\/declarations\.ts/, `${method} ${path}`)
  }
  t.throws(
    () => router.on(['GET', 'POST'], '/admin/budgets', noop),
    /POST \/admin\/budgets/,
    'in a list of methods too',
  )
  router.on('GET', '/admin/budgets', noop)
  router.on('POST', '/v2/chat/completions', noop)
  router.on('POST', '/portal/sign-in', noop)
  router.on('POST', '/admin/keys', noop)
  t.same(
    registered,
    [
      'GET /admin/budgets',
      'GET /admin/budgets',
      'POST /v2/chat/completions',
      'POST /portal/sign-in',
      'POST /admin/keys',
    ],
    'reads, other rooms, declared non-changes and declared changes pass through',
  )
})

t.test('a declaration naming a subject nobody provides is refused at boot', async (t) => {
  t.throws(
    () =>
      seam([], {
        routes: [{ method: 'POST', path: '/admin/x', action: 'x.create', subject: 'x', id: { param: 'id' } }],
      }),
    /names subject x/,
  )
})

t.test('the declarations and the API reference agree', async (t) => {
  const changes = apiOperations()
    .filter((op) => op.method !== 'get' && /^\/(admin|portal)(\/|$)/.test(op.path))
    .map((op) => `${op.method.toUpperCase()} ${op.path}`)
    .sort()
  const declared = [...AUDITED_ROUTES, ...NOT_CHANGES].map((r) => `${r.method} ${templateOf(r.path)}`).sort()
  t.ok(changes.length >= 15, 'the reference lists the changes')
  t.same(
    declared,
    changes,
    'every documented change is declared (audited, or not a change with its reason), and nothing else',
  )
  t.equal(new Set(declared).size, declared.length, 'each once')
  for (const n of NOT_CHANGES) t.ok(n.reason.length > 20, `${n.method} ${n.path}: a reason`)
  for (const r of AUDITED_ROUTES) t.match(r.action, /^[a-z_]+\.[a-z_]+$/, `${r.action}: <object>.<verb>`)
})

/** A request and reply as far as the seam reads them. */
function fakeExchange(headers: Record<string, string>, status = 200) {
  const sent: unknown[] = []
  const res = {
    statusCode: status,
    end(body?: unknown) {
      sent.push(body)
      return res
    },
    getHeader: () => undefined,
  }
  const errors: unknown[] = []
  const ctx = {
    req: { headers, socket: { remoteAddress: '::ffff:192.0.2.7' } },
    res,
    id: 'req_1',
    log: { error: (o: unknown) => errors.push(o) },
  } as unknown as RequestContext
  return { ctx, sent, errors }
}

t.test('a wrapped change: the reply waits for its record; a failed one records nothing', async (t) => {
  const routes: Record<string, RouteHandler> = {}
  const router: Router = { on: (method, path, h) => (routes[`${String(method)} ${path}`] = h) }
  const store = openEmbeddedAuditStore(':memory:')
  let release: () => void = () => undefined
  const gate = new Promise<void>((done) => (release = done))
  const order: string[] = []
  const audit = createAuditLog({
    store: {
      ...store,
      append: async (e) => {
        await gate
        order.push('recorded')
        return store.append(e)
      },
    },
    retentionDays: 1,
  })
  let version = 1
  const thing = { type: 'key', load: async (id: string) => ({ id, version }) }
  const seamed = auditedRouter(router, {
    audit,
    subjects: Object.fromEntries(
      ['key', 'user', 'queue_request', 'budget', 'webhook', 'webhook_delivery', 'config', 'response_cache'].map(
        (type) => [type, thing],
      ),
    ),
    authenticateAdmin: (req) => {
      if (req.headers.authorization !== 'Bearer tok') throw new Error('refused')
    },
    portalUser: async () => null,
    trustProxyHops: 0,
  })
  seamed.on('PATCH', '/admin/keys/:id', async (ctx) => {
    version = 2
    ctx.res.end('{"id":"key_1"}')
    order.push('handler done')
  })
  const { ctx, sent } = fakeExchange({ authorization: 'Bearer tok', 'x-tollgate-client': 'cli' })
  const running = routes['PATCH /admin/keys/:id']?.(ctx, { id: 'key_1' }, new URLSearchParams())
  await new Promise((done) => setImmediate(done))
  t.same(sent, [], 'the handler replied, but nothing went out yet')
  release()
  await running
  t.same(order, ['handler done', 'recorded'])
  t.same(sent, ['{"id":"key_1"}'], 'then the reply, exactly as the handler wrote it')
  const [entry] = (await store.query({ limit: 5 })).data
  t.match(entry, {
    actor: { type: 'admin' },
    via: 'cli',
    action: 'key.update',
    objectType: 'key',
    objectId: 'key_1',
    before: { id: 'key_1', version: 1 },
    after: { id: 'key_1', version: 2 },
    address: '192.0.2.7',
    requestId: 'req_1',
  })
  t.match(entry?.actor.id, /^admin:[0-9a-f]{16}$/)

  // A refused credential: the route never runs, nothing is recorded.
  const refused = fakeExchange({ authorization: 'Bearer nope' })
  await t.rejects(
    routes['PATCH /admin/keys/:id']?.(refused.ctx, { id: 'key_1' }, new URLSearchParams()) ?? Promise.resolve(),
    /refused/,
  )
  // A route that answers an error: no record, its reply still goes out.
  const failing = fakeExchange({ authorization: 'Bearer tok' }, 404)
  await routes['PATCH /admin/keys/:id']?.(failing.ctx, { id: 'key_2' }, new URLSearchParams())
  t.same(failing.sent, ['{"id":"key_1"}'])
  t.equal((await store.query({ limit: 5 })).data.length, 1, 'still one record')
})

t.test(
  'the address recorded: the peer, or behind trusted proxies the one they report; never cut to a /64',
  async (t) => {
    const req = (remoteAddress: string, xff?: string) =>
      ({
        socket: { remoteAddress },
        headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
      }) as unknown as IncomingMessage
    t.equal(clientIp(req('::ffff:10.0.0.1'), 0), '10.0.0.1')
    t.equal(clientIp(req('2001:db8:1:2:3:4:5:6'), 0), '2001:db8:1:2:3:4:5:6')
    t.equal(clientIp(req('10.0.0.1', 'evil, 203.0.113.9'), 1), '203.0.113.9')
    t.equal(clientIp(req('10.0.0.1', '203.0.113.9'), 0), '10.0.0.1', 'no trusted proxy: the header is ignored')
  },
)

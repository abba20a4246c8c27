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

function seam(registered: string[], overrides: Partial<AuditSeamDeps> = {}): Router {
  const router: Router = { on: (method, path) => registered.push(`${String(method)} ${path}`) }
  const subject = { type: 'thing', load: async () => null }
  return auditedRouter(router, {
    audit: createAuditLog({ store: openEmbeddedAuditStore(':memory:'), retentionDays: 1 }),
    subjects: { key: subject, user: subject, queue_request: subject },
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

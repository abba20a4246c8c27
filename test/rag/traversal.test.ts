// Traversal and encoding tricks never leave a service's prefix: each is refused with 400
// {"detail"}, and the backend (a mock this test runs, serving every service under
// /<service>/) never sees a request outside the prefix it was addressed to.
import t from 'tap'
import { startRagMock } from '../../src/rag/mock/server.ts'
import { rawRequest, startRagHarness } from './harness.ts'

const TRICKS = [
  '/file-manager/../admin/keys',
  '/file-manager/..',
  '/file-manager/../',
  '/file-manager/./api/v1/echo',
  '/file-manager/api/v1/../../user-manager/api/v1/users/',
  '/file-manager/%2e%2e/user-manager/api/v1/users/',
  '/file-manager/%2E%2E/user-manager/api/v1/users/',
  '/file-manager/.%2e/user-manager/',
  '/file-manager/%2e/api/v1/echo',
  '/file-manager/%252e%252e/user-manager/',
  '/file-manager/%25252e%25252e/user-manager/',
  '/file-manager/..%2fuser-manager%2fapi',
  '/file-manager/api%2f..%2f..%2fuser-manager',
  '/file-manager/api%2F..%2F..%2Fuser-manager',
  '/file-manager/%2fuser-manager',
  '/file-manager/api%5c..%5cuser-manager',
  '/file-manager/api\\..\\user-manager',
  '/file-manager/..\\user-manager',
  '/file-manager//user-manager/api/v1/users/',
  '/file-manager/api//v1/echo',
  '/file-manager/..;/user-manager/',
  '/file-manager/%2e%2e;x/user-manager/',
  '/file-manager/api/v1/echo%00.txt',
  '/file-manager/api/v1/%zz',
  '/file-manager/%c0%ae%c0%ae/user-manager/',
  '/query-pipelines/../config-manager/api/v1/configurations/',
  '/chat-session-manager/api/v1/sessions/%2e%2e%2f%2e%2e%2fadmin',
]

t.test('traversal and encoded-slash tricks are refused and never leave the prefix', async (t) => {
  const mock = await startRagMock({ tokenDelayMs: 0 })
  t.teardown(() => mock.close())
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      for (const [name, service] of Object.entries(rag.services)) service.baseUrl = `${mock.url}/${name}`
    },
  })
  const headers = await h.auth()
  for (const target of TRICKS) {
    const reply = await rawRequest(h.url, target, { headers })
    t.equal(reply.status, 400, `${target}: 400`)
    t.same(JSON.parse(reply.body), { detail: 'The request path is not allowed' }, `${target}: FastAPI's shape`)
  }
  // Public routes are checked the same way before anything else.
  t.equal((await rawRequest(h.url, '/file-manager/redoc/../../admin/keys')).status, 400)
  t.equal(mock.mock.seen().length, 0, 'the backend saw none of them')

  // What is allowed goes through exactly as sent, inside its prefix.
  const fine = [
    '/file-manager/api/v1/echo/report%20v2.pdf?x=1&y=%2e%2e',
    '/file-manager/api/v1/echo/100%25.txt',
    '/file-manager/api/v1/echo/a.b/..c/.d',
    '/query-pipelines/api/v1/echo/',
  ]
  for (const target of fine) {
    const reply = await rawRequest(h.url, target, { headers })
    t.equal(reply.status, 200, `${target}: relayed`)
  }
  const seen = mock.mock.seen().map((r) => r.url)
  t.same(
    seen,
    [
      '/file-manager/api/v1/echo/report%20v2.pdf?x=1&y=%2e%2e',
      '/file-manager/api/v1/echo/100%25.txt',
      '/file-manager/api/v1/echo/a.b/..c/.d',
      '/query-pipeline/api/v1/echo/',
    ],
    'the backend saw each path as sent, under its own service, query kept',
  )
})

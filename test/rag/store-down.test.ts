// The store goes away under a running gateway: every RAG route that must check a token's
// session answers 503 in FastAPI's shape with retry-after (the client keeps its token and
// comes back), never a 500; the log gets one warning for the outage, not an error (and a
// stack) per request. When the store is back, the same token works again.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { eventually, startPrivateRedis } from '../limits/helpers.ts'
import { call, createUser, login } from '../jwt/helpers.ts'

const redis = await startPrivateRedis()
t.teardown(() => redis.kill())
const gw = await startTollgate({
  env: { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: `outage-${randomBytes(16).toString('hex')}` },
})
t.teardown(async () => {
  await gw.stop()
})

const ROUTES: ReadonlyArray<readonly [method: string, path: string]> = [
  ['GET', '/chat-session-manager/api/v1/sessions/'],
  ['POST', '/chat-session-manager/api/v1/sessions/'],
  ['GET', '/config-manager/api/v1/configs'],
  ['GET', '/user-manager/api/v1/users'],
  ['GET', '/file-manager/api/v1/files'],
  ['POST', '/query-pipeline/api/v1/echo'],
  ['DELETE', '/ingest-master/api/v1/jobs/1'],
]

t.test('a store outage is a 503 with retry-after on every RAG route, logged once', async (t) => {
  await createUser(gw, { username: 'olga', password: 'olga password', roles: ['user'], tenant: 'acme' })
  const pair = await login(gw.url, 'olga', 'olga password')
  const ask = (method: string, path: string) =>
    call(gw.url, method, path, { token: pair.access_token, ...(method === 'POST' ? { body: { q: 'x' } } : {}) })
  const before = await ask('GET', '/chat-session-manager/api/v1/sessions/')
  t.equal(before.status, 200, 'the store is up: the call goes through')

  await redis.kill()
  // What the instance read about the session is trusted for revocationCacheMs (0.5 s).
  t.ok(
    await eventually(async () => (await ask('GET', '/chat-session-manager/api/v1/sessions/')).status !== 200, 200, 25),
    'the session can no longer be checked',
  )
  const logsBefore = gw.logs().length
  for (let round = 0; round < 3; round++) {
    for (const [method, path] of ROUTES) {
      const reply = await ask(method, path)
      t.equal(reply.status, 503, `${method} ${path}: 503`)
      t.equal(reply.headers.get('retry-after'), '1', `${method} ${path}: retry-after`)
      t.strictSame(Object.keys(reply.json), ['detail'], `${method} ${path}: FastAPI's shape`)
      t.type(reply.json.detail, 'string')
    }
  }
  const me = await call(gw.url, 'GET', '/api/v1/auth/me', { token: pair.access_token })
  t.equal(me.status, 503, 'as /api/v1/auth/me answers')
  t.equal(me.headers.get('retry-after'), '1')

  const logs = gw.logs()
  const during = logs.slice(logsBefore)
  t.equal(
    during.filter((l) => typeof l.level === 'number' && l.level >= 50).length,
    0,
    'no error line while the store is down',
  )
  t.notMatch(gw.output(), /RAG gateway error|unhandled error|"stack"/, 'no error with a stack, ever')
  const warnings = logs.filter(
    (l) => typeof l.msg === 'string' && l.msg.startsWith('RAG gateway: the store did not answer'),
  )
  t.equal(warnings.length, 1, 'one warning for the outage')
  t.ok(
    during.filter((l) => l.msg === 'request' && l.status === 503).every((l) => l.level === 40),
    'the request lines of the 503s are warnings',
  )

  // The store comes back (empty: a fresh redis-server), so the session is gone: a 401 now, not a 503.
  await redis.start()
  t.ok(
    await eventually(async () => (await ask('GET', '/chat-session-manager/api/v1/sessions/')).status === 401, 200, 50),
    'back: the token is checked again',
  )
})

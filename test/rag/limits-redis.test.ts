// The RAG limits on Redis: two gateways on one Redis share each user's and each tenant's
// requests per minute, as /v2's limits are shared.
import t from 'tap'
import { createTestTokens } from '../helpers/rag-tokens.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { startRagHarness } from './harness.ts'

t.test('two instances on one Redis count the same user and tenant', async (t) => {
  const { namespace: prefix, admin: redis } = testNamespace(t, 'rag', 'tgtest-limits')
  const tokens = await createTestTokens()
  const options = {
    redisUrl: REDIS_URL,
    tokens,
    config: (doc: Record<string, unknown>) => {
      doc.store = { ...(doc.store as object), keyPrefix: prefix }
      const rag = doc.rag as Record<string, unknown>
      rag.limits = { userRpm: 3, tenantRpm: 5 }
    },
  }
  const a = await startRagHarness(t, options)
  const b = await startRagHarness(t, options)
  const path = '/chat-session-manager/api/v1/sessions/'
  const user = await a.auth({ sub: 'shared-user', tenant: 'shared-tenant' })
  const statuses = [
    (await fetch(a.url + path, { headers: user })).status,
    (await fetch(b.url + path, { headers: user })).status,
    (await fetch(a.url + path, { headers: user })).status,
  ]
  const fourth = await fetch(b.url + path, { headers: user })
  t.same(statuses, [200, 200, 200])
  t.equal(fourth.status, 429, "the fourth request, on the other instance, is over the user's 3 a minute")
  t.equal(fourth.headers.get('x-ratelimit-limit-requests'), '3')
  t.match(
    ((await fourth.json()) as { detail: string }).detail,
    /^Rate limit reached for the RAG gateway \(per user\) on requests per min \(RPM\): Limit 3, Used 3/,
  )
  t.equal((await fetch(a.url + path, { headers: user })).status, 429, 'and so does the first instance')

  const colleague = await a.auth({ sub: 'colleague', tenant: 'shared-tenant' })
  // The tenant has 3 of its 5 (refused calls are not counted against it).
  const more: number[] = []
  for (const gw of [b, a, b]) more.push((await fetch(gw.url + path, { headers: colleague })).status)
  t.same(more, [200, 200, 429], "the tenant's 5 a minute spans both users and both instances")
  t.ok(
    (await keysUnder(redis, prefix)).some((k) => k.includes('rag-user')),
    'the counters are in Redis',
  )
})

// The Redis audit store (one stream under the namespace) against the contract, on the shared Redis.
import t from 'tap'
import { createRedisAuditStore } from '../../src/audit/redis-store.ts'
import { testNamespace } from '../helpers/redis.ts'
import { auditContract, entry } from './contract.ts'

const space = testNamespace(t, 'audit', 'tollgate-audit-test')

auditContract(t, 'redis', async () => {
  const { prefix, cleanup } = space.fresh()
  return { open: async () => createRedisAuditStore(space.admin, prefix), cleanup }
})

t.test('redis: every record is in one stream under the namespace, nothing else', async (t) => {
  const { prefix, cleanup } = space.fresh()
  t.teardown(cleanup)
  const store = createRedisAuditStore(space.admin, prefix)
  await store.append(entry(1))
  t.same(await space.admin.keys(`${prefix}*`), [`${prefix}{tg}:audit`])
  t.equal(await space.admin.type(`${prefix}{tg}:audit`), 'stream')
})

t.test('redis: a writer whose clock is behind still appends, after the newer records', async (t) => {
  const { prefix, cleanup } = space.fresh()
  t.teardown(cleanup)
  const store = createRedisAuditStore(space.admin, prefix)
  const ahead = await store.append(entry(1, { at: Date.UTC(2026, 5, 1) }))
  const behind = await store.append(entry(2, { at: Date.UTC(2026, 4, 1) }))
  t.equal(behind.at, Date.UTC(2026, 4, 1), 'the record keeps its own time')
  t.same(
    (await store.query({ limit: 5 })).data.map((e) => e.id),
    [behind.id, ahead.id],
    'appended last, read first',
  )
})

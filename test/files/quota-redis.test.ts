// The file quota contract on the shared Redis (under a random prefix, deleted at the end).
import t from 'tap'
import { createRedisFileQuotaStore } from '../../src/files/redis-quota-store.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { fileQuotaContract } from './quota-contract.ts'

const { namespace: NAMESPACE, admin, fresh } = testNamespace(t, 'fq', 'tgtest-fq')

const space = async () => {
  const { prefix, cleanup } = fresh()
  return {
    open: async (now: () => number) =>
      createRedisFileQuotaStore(
        createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-fq' }),
        prefix,
        now,
      ),
    cleanup,
  }
}

fileQuotaContract(t, 'redis', space)

t.test('redis: every key is under the prefix and the {tg} hash tag', async (t) => {
  const s = await space()
  const store = await s.open(Date.now)
  t.teardown(async () => {
    await store.close()
    await s.cleanup()
  })
  await store.hold('key_a', 'h', 10, { files: 5, bytes: 100 }, 60_000)
  await store.commit('key_a', 'h', 'file-x', 10)
  const keys = await keysUnder(admin, NAMESPACE)
  t.ok(keys.length > 0)
  t.ok(
    keys.every((k) => k.includes('{tg}:fq:')),
    keys.join(', '),
  )
})

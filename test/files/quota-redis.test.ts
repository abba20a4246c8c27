// The file quota contract on the shared Redis (under a random prefix, deleted at the end).
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createRedisFileQuotaStore } from '../../src/files/redis-quota-store.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { deleteUnder, keysUnder, REDIS_URL } from '../helpers/redis.ts'
import { fileQuotaContract } from './quota-contract.ts'

const NAMESPACE = `tgtest:fq:${randomBytes(6).toString('hex')}:`
let n = 0
const admin = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-fq' })
t.teardown(async () => {
  await deleteUnder(admin, NAMESPACE)
  admin.disconnect()
})

const space = async () => {
  const prefix = `${NAMESPACE}${n++}:`
  return {
    open: async (now: () => number) => createRedisFileQuotaStore(createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-fq' }), prefix, now),
    cleanup: async () => deleteUnder(admin, prefix),
  }
}

fileQuotaContract(t, 'redis', space)

t.test('redis: every key is under the prefix and the {tg} hash tag', async (t) => {
  const s = await space()
  const store = await s.open(Date.now)
  t.teardown(async () => { await store.close(); await s.cleanup() })
  await store.hold('key_a', 'h', 10, { files: 5, bytes: 100 }, 60_000)
  await store.commit('key_a', 'h', 'file-x', 10)
  const keys = await keysUnder(admin, NAMESPACE)
  t.ok(keys.length > 0)
  t.ok(keys.every((k) => k.includes('{tg}:fq:')), keys.join(', '))
})

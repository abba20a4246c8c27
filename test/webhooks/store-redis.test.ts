// The webhook store contract on the shared Redis (under a random prefix, deleted at the end).
import t from 'tap'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { createRedisWebhookStore } from '../../src/webhooks/redis-store.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { endpointAt, eventOf, webhookStoreContract } from './store-contract.ts'

const { namespace: NAMESPACE, admin, fresh } = testNamespace(t, 'wh', 'tgtest-wh')

const space = async () => {
  const { prefix, cleanup } = fresh()
  return {
    open: async () =>
      createRedisWebhookStore(createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-wh' }), prefix),
    cleanup,
  }
}

webhookStoreContract(t, 'redis', space)

t.test('redis: every key is under the prefix and the {tg} hash tag', async (t) => {
  const s = await space()
  const store = await s.open()
  t.teardown(async () => {
    await store.close()
    await s.cleanup()
  })
  await store.createEndpoint(endpointAt('whe_a'))
  await store.append(eventOf('evt_1'), [{ id: 'whd_1', endpointId: 'whe_a' }], 'k', Date.now())
  const keys = await keysUnder(admin, NAMESPACE)
  t.ok(keys.length > 0)
  t.ok(
    keys.every((k) => k.includes('{tg}:wh:')),
    keys.join(', '),
  )
})

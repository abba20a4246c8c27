// Budgets set through the admin API, on Redis: one hash `<ns>bg:set` (field scope:id, the
// record as JSON) and a version counter `<ns>bg:version` bumped in the same MULTI, which
// every instance's book polls to know when to read the hash again.
import { closeRedis as disconnect, type RedisConnection } from '../store/redis-client.ts'
import { redisNamespace, withRedis } from '../store/redis-kit.ts'
import { isBudgetRecord, type BudgetRecord, type BudgetStore } from './port.ts'

export function budgetStoreKeys(prefix: string): { readonly set: string; readonly version: string } {
  const ns = redisNamespace(prefix)
  return { set: `${ns}bg:set`, version: `${ns}bg:version` }
}

const field = (scope: string, id: string): string => `${scope}:${id}`

export function createRedisBudgetStore(redis: RedisConnection, prefix: string, closeRedis = false): BudgetStore {
  const keys = budgetStoreKeys(prefix)
  return {
    kind: 'redis',
    list: () =>
      withRedis(redis, async () =>
        Object.values(await redis.hgetall(keys.set))
          .map((v) => JSON.parse(v) as unknown)
          .filter(isBudgetRecord)
          .sort((a, b) => a.scope.localeCompare(b.scope) || a.id.localeCompare(b.id)),
      ),
    version: () => withRedis(redis, async () => (await redis.get(keys.version)) ?? '0'),
    put: (record: BudgetRecord) =>
      withRedis(redis, async () => {
        await redis
          .multi()
          .hset(keys.set, field(record.scope, record.id), JSON.stringify(record))
          .incr(keys.version)
          .exec()
      }),
    remove: (scope, id) =>
      withRedis(redis, async () => {
        const reply = await redis.multi().hdel(keys.set, field(scope, id)).incr(keys.version).exec()
        return reply?.[0]?.[1] === 1
      }),
    async close() {
      if (closeRedis) await disconnect(redis)
    },
  }
}

// The lifetime counters a Tollgate before issue #25 kept in `{tg}` (a key's quota, a budget's
// spend and reported thresholds) are carried over to their owners' slots at start, once,
// however many instances start together; windowed counters are left to expire.
import t from 'tap'
import { budgetChargesOf, budgetCounter, firedName } from '../../src/limits/budget-charges.ts'
import { createLimiter } from '../../src/limits/limiter.ts'
import { migrateLimiterCounters } from '../../src/limits/limiter-migration.ts'
import { limiterKeys } from '../../src/limits/redis-counters.ts'
import { periodOf } from '../../src/budgets/period.ts'
import { pingRedis } from '../../src/store/redis-client.ts'
import { spec } from './budget-contract.ts'
import { captureLog, keysUnder, randomId, REDIS_URL, redisClient, redisSpace } from './helpers.ts'

const { namespace: NAMESPACE, admin, clients } = redisSpace(t)

const MODEL = 'm'
const AT = Date.parse('2026-11-27T12:00:00Z')

if (!(await pingRedis(admin))) {
  t.fail(`Redis does not answer at ${REDIS_URL}: the migration test needs it`)
} else {
  t.test(
    'lifetime counters of the {tg} layout count on after the upgrade, moved once by three instances',
    async (t) => {
      const prefix = `${NAMESPACE}a:`
      const old = `${prefix}{tg}:rl:`
      const owned = randomId()
      const alone = randomId()
      const owner = randomId('owner')
      const keyBudget = spec({ id: owned, amountNanos: 10_000_000 })
      const ownerBudget = spec({ scope: 'owner', id: owner, amountNanos: 10_000_000 })
      const tenantBudget = spec({ scope: 'tenant', id: randomId('tenant'), amountNanos: 10_000_000 })
      const counter = (s: typeof keyBudget): string => budgetCounter(s, periodOf(s.period, s.timeZone, AT))
      // As the old gateway left them: quotas, spends with the period's TTL, a fired set, and windows.
      await admin.set(`${old}${owned}:${MODEL}:q`, 900)
      await admin.set(`${old}${alone}:${MODEL}:q`, 40)
      await admin.set(`${old}${owned}:${MODEL}:r`, 3, 'PX', 60_000)
      await admin.set(`${old}${owned}:${MODEL}:h`, 50, 'PX', 60_000)
      for (const [s, spent] of [
        [keyBudget, 6_000_000],
        [ownerBudget, 7_000_000],
        [tenantBudget, 8_000_000],
      ] as const) {
        await admin.set(`${old}bg:${counter(s)}:s`, spent, 'PX', 86_400_000)
        await admin.set(`${old}bg:${counter(s)}:h`, 1, 'PX', 60_000)
      }
      await admin.hset(`${old}bg:${firedName({ counter: counter(keyBudget), spec: keyBudget })}`, '50', '1')
      // A new-layout quota the upgraded gateways counted already: the old one adds to it.
      const keys = limiterKeys(prefix)
      await admin.set(keys.counter({ keyId: owned, model: MODEL, owner }, { name: 'quota' }), 50)

      const ownerOf = async (id: string): Promise<string | null> => (id === owned ? owner : null)
      const moved = await Promise.all(
        [1, 2, 3].map(() => migrateLimiterCounters(admin, prefix, ownerOf, captureLog().log)),
      )
      t.equal(
        moved.reduce((a, b) => a + b, 0),
        6,
        'six lifetime counters moved, each by one instance: two quotas, three spends, a fired set',
      )
      t.strictSame(
        (await keysUnder(admin, `${prefix}{tg}:`)).sort(),
        [
          `${old}${owned}:${MODEL}:h`,
          `${old}${owned}:${MODEL}:r`,
          ...[keyBudget, ownerBudget, tenantBudget].map((s) => `${old}bg:${counter(s)}:h`),
        ].sort(),
        'only windows are left in {tg}, to expire',
      )
      t.equal(await migrateLimiterCounters(admin, prefix, ownerOf, captureLog().log), 0, 'a second start moves nothing')

      const redis = redisClient()
      clients.push(redis)
      await pingRedis(redis)
      const limiter = createLimiter({
        redis,
        prefix,
        log: captureLog().log,
        redisTimeoutMs: 2000,
        now: () => AT,
        budgets: { applicable: () => [keyBudget, ownerBudget, tenantBudget] },
      })
      t.teardown(() => limiter.close())
      const owners = new Map([[owned, owner]])
      const statuses = await limiter.budgetStatusOf?.([keyBudget, ownerBudget, tenantBudget], owners)
      t.same(
        statuses?.map((s) => [s.scope, s.spent]),
        [
          ['key', 0.006],
          ['owner', 0.007],
          ['tenant', 0.008],
        ],
        'each budget spent what it had spent',
      )
      const [charge] = budgetChargesOf([keyBudget], 0, AT, { keyId: owned, owner })
      if (charge === undefined) throw new Error('no charge')
      const ttl = await admin.pttl(keys.budget(charge).spent)
      t.ok(ttl > 86_000_000 && ttl <= 86_400_000, `a spend keeps its TTL (${ttl} ms)`)
      t.same(await admin.hgetall(keys.budget(charge).fired), { '50': '1' }, 'the thresholds reported stay reported')
      t.equal(
        await admin.get(keys.counter({ keyId: owned, model: MODEL, owner }, { name: 'quota' })),
        '950',
        "the owned key's quota: the old 900 and the new 50",
      )
      t.equal(
        await admin.get(keys.counter({ keyId: alone, model: MODEL }, { name: 'quota' })),
        '40',
        'a key without an owner',
      )
    },
  )
}

// Budgets on the shared Redis: the same contract as in memory, with three limiters (three
// gateways) on one Redis, plus what only Redis shows: a budget is no extra round trip.
import t, { type Test } from 'tap'
import type { BudgetSpec } from '../../src/budgets/port.ts'
import { createLimiter, type ManagedLimiter } from '../../src/limits/limiter.ts'
import { pingRedis } from '../../src/store/redis-client.ts'
import { pollUntil } from '../helpers/poll.ts'
import { callOn, budgetContract, refusal, setup, spec, type MakeLimiters } from './budget-contract.ts'
import { budgetOnceContract } from './budget-once.ts'
import { captureLog, countCommands, quietMetrics, REDIS_URL, redisClient, redisSpace } from './helpers.ts'

const { namespace: NAMESPACE, admin, clients } = redisSpace(t)
let n = 0

if (!(await pingRedis(admin))) {
  t.fail(`Redis does not answer at ${REDIS_URL}: the budget tests on Redis need it`)
} else {
  const makeRedis: MakeLimiters = async (count, options) => {
    const prefix = `${NAMESPACE}${n++}:`
    const out: ManagedLimiter[] = []
    for (let i = 0; i < count; i++) {
      const redis = redisClient()
      clients.push(redis)
      await pingRedis(redis)
      out.push(
        createLimiter({
          redis,
          prefix,
          log: captureLog().log,
          metrics: quietMetrics(),
          redisTimeoutMs: 2000,
          ...options,
        }),
      )
    }
    return out
  }
  budgetContract(t, 'redis', makeRedis, 3)
  budgetOnceContract(t, 'redis', makeRedis, 3)

  const scriptCalls = async (
    t: Test,
    budgets: readonly BudgetSpec[],
    owner: string,
  ): Promise<{ admit: number; settle: number; evalsha: number }> => {
    const redis = redisClient()
    clients.push(redis)
    await pingRedis(redis)
    const { options } = setup([...budgets], '2026-11-27T12:00:00Z')
    const limiter = createLimiter({
      redis,
      prefix: `${NAMESPACE}${n++}:`,
      log: captureLog().log,
      redisTimeoutMs: 2000,
      ...options,
    })
    t.teardown(() => limiter.close())
    const r = {
      keyId: budgets[0]?.id ?? '',
      owner,
      tier: 'T',
      model: 'm',
      limits: { rpm: 100, input_price: 1 },
      estimate: { inputTokens: 10, outputTokens: 0 },
    }
    await (await limiter.admit(r)).settle(r.estimate) // scripts cached
    const counted = countCommands(redis)
    t.teardown(() => counted.restore())
    const admission = await limiter.admit(r)
    const admit = counted.count()
    const evalsha = counted.count('evalsha')
    await admission.settle(r.estimate)
    return { admit, settle: counted.count() - admit, evalsha }
  }

  t.test('redis: a call with key and owner budgets is still one script call to admit and one to settle', async (t) => {
    const owner = 'owner_x'
    const calls = await scriptCalls(t, [spec(), spec({ scope: 'owner', id: owner })], owner)
    t.same(calls, { admit: 1, evalsha: 1, settle: 1 }, "one EVALSHA each: the budgets are on the owner's slot")
  })

  t.test('redis: a tenant budget, on its own slot, is the one second script of each step', async (t) => {
    const owner = 'owner_x'
    const budgets = [spec(), spec({ scope: 'owner', id: owner }), spec({ scope: 'tenant', id: 'acme' })]
    const calls = await scriptCalls(t, budgets, owner)
    t.same(calls, { admit: 2, evalsha: 2, settle: 2 }, 'the tenant reserves, then the key admits; two settles')
  })

  t.test(
    "redis: a running call's hold is renewed past its lease; a dead instance's lapses one lease later",
    async (t) => {
      const budget = spec({ amountNanos: 100_000 })
      const { options } = setup([budget], '2026-11-27T12:00:00Z')
      const prefix = `${NAMESPACE}${n++}:`
      const make = async () => {
        const redis = redisClient()
        clients.push(redis)
        await pingRedis(redis)
        return createLimiter({
          redis,
          prefix,
          log: captureLog().log,
          redisTimeoutMs: 2000,
          holdLeaseMs: 300,
          ...options,
        })
      }
      const [alive, dying, other] = [await make(), await make(), await make()]
      t.teardown(() => Promise.all([alive, dying, other].map((l) => l.close())))
      const r = callOn(budget)
      const leaseEnds = async (): Promise<number[]> => {
        const [name] = await admin.keys(`${prefix}*:hl`)
        if (name === undefined) return []
        const members = await admin.zrange(name, '0', '-1', 'WITHSCORES')
        return members.filter((_, i) => i % 2 === 1).map(Number)
      }
      // A call on `alive` runs for many leases: its lease end moves on and the budget stays held.
      const call = await alive.admit(r)
      const [first] = await leaseEnds()
      const renewed = await pollUntil(leaseEnds, (ends) => (ends[0] ?? 0) > (first ?? 0) + 900, 400, 25)
      t.ok(renewed.met, 'the lease was renewed past three leases')
      t.equal((await refusal(other, r)).errorName, 'budget_reserved', 'the running call still holds the budget')
      await call.settle({ inputTokens: 0, outputTokens: 0 })
      t.same(await leaseEnds(), [], 'the settle released it')
      // A call on `dying`, whose instance then dies without settling: nothing renews its hold.
      await dying.admit(r)
      await dying.close()
      t.equal((await refusal(other, r)).errorName, 'budget_reserved')
      const lapsed = await pollUntil(
        async () => (await other.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'T' }))?.[0]?.reserved,
        (reserved) => reserved === 0,
        400,
        25,
      )
      t.ok(lapsed.met, "the dead instance's hold lapsed with its lease")
      await (await other.admit(r)).settle(r.estimate)
    },
  )
}

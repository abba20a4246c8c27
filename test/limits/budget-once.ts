// What a settle under a once id (limits/port.ts OnceCharge: a stored request run again after
// a crash) must do on every limiter: the budgets are spent once per id, whichever limiter
// (gateway) settles it again, and every hold still goes. Run by budgets-memory.test.ts and
// budgets-redis.test.ts, beside the budget contract.
import type { Test } from 'tap'
import type { ManagedLimiter } from '../../src/limits/limiter.ts'
import type { AdmissionRequest, OnceCharge } from '../../src/limits/port.ts'
import { spec, setup, type MakeLimiters } from './budget-contract.ts'
import { randomId } from './helpers.ts'

const CALL = { inputTokens: 100, outputTokens: 0 }
/** 1 currency unit per million tokens: the call costs 100,000 nano-units. */
const CALL_NANOS = 100_000

export function budgetOnceContract(t: Test, name: string, make: MakeLimiters, gateways: number): void {
  t.test(`${name}: a settle under a once id spends once, on every budget, whichever gateway repeats it`, async (t) => {
    const owner = randomId('owner')
    const key = randomId()
    // A tenant budget lives on its own slot on Redis: its settle is a second script, with its own marker.
    const budgets = [
      spec({ id: key, amountNanos: 100 * CALL_NANOS }),
      spec({ scope: 'owner', id: owner, amountNanos: 100 * CALL_NANOS }),
      spec({ scope: 'tenant', id: randomId('tenant'), amountNanos: 100 * CALL_NANOS }),
    ]
    const { options } = setup(budgets, '2026-11-27T12:00:00Z')
    const limiters = await make(gateways, options)
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const r: AdmissionRequest = {
      keyId: key,
      owner,
      tier: 'Test',
      model: 'm',
      limits: { input_price: 1 },
      estimate: CALL,
    }
    const once: OnceCharge = { id: `queue:${randomId('req')}`, keepMs: 60_000 }
    const on = (i: number): ManagedLimiter => limiters[i % limiters.length] as ManagedLimiter
    // The first run, then a run again on another gateway (its admission held the budget again).
    await (await on(0).admit(r)).settle(CALL, { once })
    await (await on(1).admit(r)).settle(CALL, { once })
    const spent = async (): Promise<Array<[string, number, number]>> =>
      ((await on(0).budgetStatusOf?.(budgets, new Map([[key, owner]]))) ?? []).map((s) => [
        s.scope,
        Math.round(s.spent * 1e9),
        s.reserved,
      ])
    t.same(
      await spent(),
      [
        ['key', CALL_NANOS, 0],
        ['owner', CALL_NANOS, 0],
        ['tenant', CALL_NANOS, 0],
      ],
      'spent once on each budget, and nothing left held by the repeat',
    )
    // Another id is another charge; a plain settle is as ever.
    await (await on(2).admit(r)).settle(CALL, { once: { ...once, id: `${once.id}x` } })
    await (await on(0).admit(r)).settle(CALL)
    t.same(
      (await spent()).map(([, n]) => n),
      [3 * CALL_NANOS, 3 * CALL_NANOS, 3 * CALL_NANOS],
      'two more charges',
    )
    // A cached reply's share, spent under a once id twice: once.
    const share = { keyId: key, owner, tier: 'Test', model: 'm', costNanos: 12_345 }
    const shareOnce = { id: `queue:${randomId('req')}`, keepMs: 60_000 }
    await on(1).spendBudgets?.({ ...share, once: shareOnce })
    await on(2).spendBudgets?.({ ...share, once: shareOnce })
    t.same(
      (await spent()).map(([, n, held]) => [n, held]),
      [
        [3 * CALL_NANOS + 12_345, 0],
        [3 * CALL_NANOS + 12_345, 0],
        [3 * CALL_NANOS + 12_345, 0],
      ],
      'a share spent once',
    )
  })
}

// What budgets must do on every limiter, whichever store holds the counters. Run by
// budgets-memory.test.ts (the embedded store) and budgets-redis.test.ts (the shared Redis,
// where `make` may hand out several limiters on one Redis: several gateways).
import type { Test } from 'tap'
import type { BudgetSpec, BudgetThresholdEvent } from '../../src/budgets/port.ts'
import type { BudgetPeriod } from '../../src/budgets/period.ts'
import { GatewayError } from '../../src/errors.ts'
import type { LimiterOptions, ManagedLimiter } from '../../src/limits/limiter.ts'
import type { Admission, AdmissionRequest } from '../../src/limits/port.ts'
import { pollUntil } from '../helpers/poll.ts'
import { randomId } from './helpers.ts'

/** Limiters sharing one set of counters (one on memory; several on one Redis). */
export type MakeLimiters = (count: number, options: Partial<LimiterOptions>) => Promise<ManagedLimiter[]>

/** 1 currency unit per million tokens: one token costs 1,000 nano-units. */
const LIMITS = { input_price: 1, output_price: 1 }
const NANOS_PER_TOKEN = 1000
/** A call estimated at 100 tokens: 100,000 nano-units (0.0001 EUR). */
const CALL = { inputTokens: 100, outputTokens: 0 }
const CALL_NANOS = 100 * NANOS_PER_TOKEN

export function spec(over: Partial<BudgetSpec> = {}): BudgetSpec {
  return {
    scope: 'key',
    id: randomId(),
    amountNanos: 20 * CALL_NANOS,
    period: 'month',
    timeZone: 'UTC',
    thresholds: [50, 80, 100],
    revision: 'r1',
    origin: 'set',
    ...over,
  }
}

/** One call of 100 input tokens at 1 nano-unit a token on `budget`'s own key, its owner too. */
export function callOn(budget: BudgetSpec): AdmissionRequest {
  return {
    keyId: budget.id,
    owner: budget.id,
    tier: 'T',
    model: 'm',
    limits: { input_price: 1 },
    estimate: { inputTokens: 100, outputTokens: 0 },
  }
}

/** A settable clock, a book that applies `specs` to every call, and the events the hook got. */
export function setup(specs: BudgetSpec[], at: string) {
  let now = Date.parse(at)
  const events: BudgetThresholdEvent[] = []
  const options: Partial<LimiterOptions> = {
    now: () => now,
    budgets: { applicable: () => specs },
    onBudgetThreshold: (event) => void events.push(event),
  }
  return {
    options,
    events,
    set: (iso: string) => (now = Date.parse(iso)),
  }
}

function request(keyId: string, owner = keyId, estimate = CALL): AdmissionRequest {
  return { keyId, owner, tier: 'Test', model: 'm', limits: LIMITS, estimate }
}

export async function refusal(limiter: ManagedLimiter, r: AdmissionRequest): Promise<GatewayError> {
  try {
    await limiter.admit(r)
  } catch (error) {
    if (error instanceof GatewayError) return error
    throw error
  }
  throw new Error('the admission was not refused')
}

/** Admits and settles `n` calls at their estimate, one after another. */
async function spend(limiter: ManagedLimiter, r: AdmissionRequest, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await (await limiter.admit(r)).settle(r.estimate)
}

export function budgetContract(t: Test, name: string, make: MakeLimiters, gateways: number): void {
  t.test(`${name}: 200 concurrent calls against a budget that fits 20 admit exactly 20`, async (t) => {
    const budget = spec()
    const { options } = setup([budget], '2026-11-27T12:00:00Z')
    const limiters = await make(gateways, options)
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const r = request(budget.id)
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => (limiters[i % limiters.length] as ManagedLimiter).admit(r)),
    )
    const admitted = outcomes.filter((o): o is PromiseFulfilledResult<Admission> => o.status === 'fulfilled')
    t.equal(admitted.length, 20, 'exactly 20 admitted')
    const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason)
    t.ok(
      refused.every((e) => e instanceof GatewayError && e.errorName === 'budget_reserved' && e.status === 429),
      'the other 180: held by calls in flight (retry in a second)',
    )
    await Promise.all(admitted.map((a) => a.value.settle(CALL)))
    const [status] = (await limiters[0]?.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'Test' })) ?? []
    t.equal(status?.spent, 0.002, 'spent: 20 calls of 0.0001')
    t.equal(status?.reserved, 0, 'nothing held once all settled')
    t.equal(status?.remaining, 0)
    const error = await refusal(limiters[0] as ManagedLimiter, r)
    t.equal(error.errorName, 'budget_exhausted')
    t.equal(error.status, 429)
    t.equal(error.type, 'insufficient_quota')
    t.equal(error.code, 'insufficient_quota')
    t.equal(error.headers['x-should-retry'], 'false')
    t.equal(error.headers['retry-after'], undefined, 'no retry hint')
    t.match(error.message, `the monthly budget of key ${budget.id} (0.002 EUR per month, UTC)`)
    t.match(error.message, /It resets at 2026-12-01T00:00:00Z \(in 84h0m0s\)\./)
  })

  t.test(`${name}: the real cost is what stays spent; an estimate above it gives the difference back`, async (t) => {
    const budget = spec({ amountNanos: 10 * CALL_NANOS })
    const { options } = setup([budget], '2026-11-27T12:00:00Z')
    const [limiter] = await make(1, options)
    if (limiter === undefined) throw new Error('no limiter')
    t.teardown(() => limiter.close())
    const r = request(budget.id, budget.id, { inputTokens: 100, outputTokens: 900 })
    const a = await limiter.admit(r)
    const during = await limiter.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'Test' })
    t.equal(during?.[0]?.reserved, 0.001, 'the estimate (1,000 tokens) is held while the call runs')
    await a.settle({ inputTokens: 100, outputTokens: 50 })
    const after = await limiter.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'Test' })
    t.equal(after?.[0]?.spent, 0.00015, '150 tokens spent')
    t.equal(after?.[0]?.reserved, 0)
    t.equal(after?.[0]?.remaining, 0.00085)
    // A call larger than what is left is refused although something is left.
    const error = await refusal(limiter, r)
    t.equal(error.errorName, 'budget_exhausted')
    t.match(error.message, '0.00015 EUR spent, 0.00085 EUR left; this request is estimated at 0.001 EUR')
  })

  t.test(`${name}: every budget that applies must fit: key, owner and tenant at once`, async (t) => {
    const owner = randomId('owner')
    const keyA = randomId()
    const keyB = randomId()
    const ownerBudget = spec({ scope: 'owner', id: owner, amountNanos: 3 * CALL_NANOS })
    const keyBudget = spec({ id: keyA, amountNanos: 100 * CALL_NANOS })
    const specs = [ownerBudget, keyBudget]
    const { options } = setup(specs, '2026-11-27T12:00:00Z')
    const [limiter] = await make(1, options)
    if (limiter === undefined) throw new Error('no limiter')
    t.teardown(() => limiter.close())
    await spend(limiter, request(keyA, owner), 2)
    await spend(limiter, request(keyB, owner), 1)
    const error = await refusal(limiter, request(keyB, owner))
    t.equal(error.errorName, 'budget_exhausted', "the owner's budget counts both keys")
    t.match(error.message, `budget of owner ${owner}`)
    // keyA's budget is kept with its owner's counters: the admin view names the owner.
    const statuses = await limiter.budgetStatusOf?.(specs, new Map([[keyA, owner]]))
    t.same(
      statuses?.map((s) => [s.scope, s.spent]),
      [
        ['owner', 0.0003],
        ['key', 0.0003],
      ],
      'a refused call charged nothing anywhere',
    )
  })

  t.test(`${name}: a tenant budget spans owners: 200 concurrent calls of three owners admit exactly 20`, async (t) => {
    const tenant = spec({ scope: 'tenant', id: randomId('tenant'), amountNanos: 20 * CALL_NANOS })
    const clock = setup([tenant], '2026-11-27T12:00:00Z')
    const limiters = await make(gateways, clock.options)
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const requests = [1, 2, 3].map(() => request(randomId(), randomId('owner')))
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) =>
        (limiters[i % limiters.length] as ManagedLimiter).admit(requests[i % 3] as AdmissionRequest),
      ),
    )
    const admitted = outcomes.filter((o): o is PromiseFulfilledResult<Admission> => o.status === 'fulfilled')
    t.equal(admitted.length, 20, 'exactly 20 admitted, whichever owner asked')
    t.ok(
      outcomes.every((o) => o.status === 'fulfilled' || (o.reason as GatewayError).errorName === 'budget_reserved'),
      'the others held by calls in flight',
    )
    await Promise.all(admitted.map((a) => a.value.settle(CALL)))
    await new Promise((resolve) => setImmediate(resolve))
    const [status] = (await limiters[0]?.budgetStatusOf?.([tenant])) ?? []
    t.equal(status?.spent, 0.002, 'spent: 20 calls')
    t.equal(status?.reserved, 0, 'nothing held once all settled')
    t.same(
      clock.events.map((e) => [e.scope, e.threshold]).sort((a, b) => Number(a[1]) - Number(b[1])),
      [
        ['tenant', 50],
        ['tenant', 80],
        ['tenant', 100],
      ],
      'each threshold reported once',
    )
    t.equal(
      (await refusal(limiters[0] as ManagedLimiter, requests[1] as AdmissionRequest)).errorName,
      'budget_exhausted',
    )
  })

  t.test(
    `${name}: a call its key refuses holds nothing on its tenant, and one its tenant refuses nothing on its key`,
    async (t) => {
      const tenant = spec({ scope: 'tenant', id: randomId('tenant'), amountNanos: 3 * CALL_NANOS })
      const keyBudget = spec({ amountNanos: 100 * CALL_NANOS })
      const owner = randomId('owner')
      const clock = setup([keyBudget, tenant], '2026-11-27T12:00:00Z')
      const [limiter] = await make(1, {
        ...clock.options,
        budgets: { applicable: ({ keyId }) => (keyId === keyBudget.id ? [keyBudget, tenant] : [tenant]) },
      })
      if (limiter === undefined) throw new Error('no limiter')
      t.teardown(() => limiter.close())
      const r = { ...request(keyBudget.id, owner), limits: { ...LIMITS, rpm: 1 } }
      const first = await limiter.admit(r)
      t.equal((await refusal(limiter, r)).errorName, 'rate_limit_requests', 'the key refuses the second call')
      const status = async (): Promise<Array<[string, number, number]>> =>
        ((await limiter.budgetStatusOf?.([keyBudget, tenant], new Map([[keyBudget.id, owner]]))) ?? []).map((s) => [
          s.scope,
          s.spent,
          s.reserved,
        ])
      t.same(
        await status(),
        [
          ['key', 0, 0.0001],
          ['tenant', 0, 0.0001],
        ],
        "only the admitted call holds: the refused one's tenant reservation went back",
      )
      await first.settle(CALL)
      // Another owner's key of the same tenant spends the rest of it.
      await spend(limiter, request(randomId(), randomId('owner')), 2)
      const other = { ...request(keyBudget.id, owner), limits: LIMITS }
      t.equal((await refusal(limiter, other)).errorName, 'budget_exhausted', 'the tenant refuses')
      t.same(
        await status(),
        [
          ['key', 0.0001, 0],
          ['tenant', 0.0003, 0],
        ],
        'nothing held on the key for the call its tenant refused',
      )
    },
  )

  const resets = (
    label: string,
    period: BudgetPeriod,
    timeZone: string,
    last: string,
    first: string,
    resetsAt: RegExp,
  ): void => {
    t.test(`${name}: a ${period} budget in ${timeZone} resets at its boundary: ${label}`, async (t) => {
      const budget = spec({ amountNanos: 2 * CALL_NANOS, period, timeZone })
      const clock = setup([budget], last)
      const [limiter] = await make(1, clock.options)
      if (limiter === undefined) throw new Error('no limiter')
      t.teardown(() => limiter.close())
      const r = request(budget.id)
      await spend(limiter, r, 2)
      const error = await refusal(limiter, r)
      t.equal(error.errorName, 'budget_exhausted', `spent at ${last}`)
      t.match(error.message, resetsAt)
      clock.set(new Date(Date.parse(first) - 1).toISOString())
      t.equal(
        (await refusal(limiter, r)).errorName,
        'budget_exhausted',
        'a millisecond before the boundary: still spent',
      )
      clock.set(first)
      await spend(limiter, r, 2)
      t.pass(`at ${first}: a new period, the whole amount again`)
      t.equal((await refusal(limiter, r)).errorName, 'budget_exhausted', 'and spent again')
      const [status] = (await limiter.budgetStatusOf?.([budget])) ?? []
      t.equal(status?.period_start, new Date(first).toISOString())
    })
  }
  resets(
    'December → January',
    'month',
    'UTC',
    '2026-12-31T23:59:59.000Z',
    '2027-01-01T00:00:00.000Z',
    /resets at 2027-01-01T00:00:00Z/,
  )
  resets(
    'February of a leap year → March',
    'month',
    'UTC',
    '2028-02-29T23:00:00.000Z',
    '2028-03-01T00:00:00.000Z',
    /resets at 2028-03-01T00:00:00Z/,
  )
  resets(
    'January 31st → February, on Berlin time (an hour before UTC)',
    'month',
    'Europe/Berlin',
    '2027-01-31T22:30:00.000Z',
    '2027-01-31T23:00:00.000Z',
    /resets at 2027-02-01T00:00:00\+01:00/,
  )
  resets(
    'the 25-hour day summer time ends on (Berlin, 2026-10-25)',
    'day',
    'Europe/Berlin',
    '2026-10-25T22:59:00.000Z',
    '2026-10-25T23:00:00.000Z',
    /resets at 2026-10-26T00:00:00\+01:00/,
  )
  resets(
    'the 23-hour day summer time begins on (New York, 2026-03-08)',
    'day',
    'America/New_York',
    '2026-03-09T03:30:00.000Z',
    '2026-03-09T04:00:00.000Z',
    /resets at 2026-03-09T00:00:00-04:00/,
  )
  resets(
    'an ISO week, Sunday night → Monday (Tokyo)',
    'week',
    'Asia/Tokyo',
    '2026-11-29T14:59:00.000Z',
    '2026-11-29T15:00:00.000Z',
    /resets at 2026-11-30T00:00:00\+09:00/,
  )

  t.test(`${name}: a lifetime budget never resets, and says so`, async (t) => {
    const budget = spec({ amountNanos: CALL_NANOS, period: 'lifetime' })
    const clock = setup([budget], '2026-11-27T12:00:00Z')
    const [limiter] = await make(1, clock.options)
    if (limiter === undefined) throw new Error('no limiter')
    t.teardown(() => limiter.close())
    await spend(limiter, request(budget.id), 1)
    clock.set('2031-01-01T00:00:00Z')
    const error = await refusal(limiter, request(budget.id))
    t.match(error.message, 'lifetime budget of key')
    t.match(error.message, 'does not reset: ask an administrator to raise it')
  })

  t.test(
    `${name}: each threshold is reported once per period, across ${gateways} gateway(s), re-armed by a change`,
    async (t) => {
      const budget = spec({ amountNanos: 10 * CALL_NANOS })
      const specs = [budget]
      const clock = setup(specs, '2026-11-27T12:00:00Z')
      const limiters = await make(gateways, clock.options)
      t.teardown(() => Promise.all(limiters.map((l) => l.close())))
      const r = request(budget.id)
      // 10 calls of 10 % each, on every gateway at once.
      const admissions = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (limiters[i % limiters.length] as ManagedLimiter).admit(r)),
      )
      await Promise.all(admissions.map((a) => a.settle(CALL)))
      await new Promise((resolve) => setImmediate(resolve))
      t.same(
        clock.events.map((e) => e.threshold).sort((a, b) => a - b),
        [50, 80, 100],
        'each threshold once, whichever gateway settled the call that crossed it',
      )
      const hundred = clock.events.find((e) => e.threshold === 100)
      t.same(hundred, {
        scope: 'key',
        id: budget.id,
        period: 'month',
        periodStart: '2026-11-01T00:00:00.000Z',
        threshold: 100,
        spent: 0.001,
        amount: 0.001,
        currency: 'EUR',
      })
      const fifty = clock.events.find((e) => e.threshold === 50)
      t.ok(
        fifty !== undefined && fifty.spent >= 0.0005 && fifty.spent <= 0.001,
        'reported with the spend that reached it',
      )

      // The admin raises it (a new revision): 50 % is not reached anew, 80 and 100 are re-armed.
      specs[0] = { ...budget, amountNanos: 20 * CALL_NANOS, revision: 'r2' }
      clock.events.length = 0
      await spend(limiters[0] as ManagedLimiter, r, 7)
      await new Promise((resolve) => setImmediate(resolve))
      t.same(
        clock.events.map((e) => e.threshold),
        [50, 80],
        'under the new revision: 50 % at once (already past it), 80 % when reached',
      )
      clock.events.length = 0
      await spend(limiters[1 % limiters.length] as ManagedLimiter, r, 3)
      await new Promise((resolve) => setImmediate(resolve))
      t.same(
        clock.events.map((e) => [e.threshold, e.spent, e.amount]),
        [[100, 0.002, 0.002]],
      )
      t.equal((await refusal(limiters[0] as ManagedLimiter, r)).errorName, 'budget_exhausted')

      // The next month starts over: every threshold can be crossed again.
      clock.set('2026-12-01T00:00:00Z')
      clock.events.length = 0
      await spend(limiters[limiters.length - 1] as ManagedLimiter, r, 20)
      await new Promise((resolve) => setImmediate(resolve))
      t.same(
        clock.events.map((e) => [e.threshold, e.periodStart]),
        [
          [50, '2026-12-01T00:00:00.000Z'],
          [80, '2026-12-01T00:00:00.000Z'],
          [100, '2026-12-01T00:00:00.000Z'],
        ],
      )
    },
  )

  t.test(`${name}: spendBudgets (a cached reply's share): exact, atomic, refused when it does not fit`, async (t) => {
    const owner = randomId('owner')
    const key = randomId()
    const SHARE = 12_345
    const keyBudget = spec({ id: key, amountNanos: 20 * SHARE })
    const ownerBudget = spec({ scope: 'owner', id: owner, amountNanos: 1000 * SHARE })
    const { options, events } = setup([keyBudget, ownerBudget], '2026-11-27T12:00:00Z')
    const limiters = await make(gateways, options)
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const spendOn = (l: ManagedLimiter, costNanos: number): Promise<void> =>
      l.spendBudgets?.({ keyId: key, owner, tier: 'Test', model: 'm', costNanos }) ?? Promise.reject(new Error('none'))
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => spendOn(limiters[i % limiters.length] as ManagedLimiter, SHARE)),
    )
    t.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 20, 'exactly as many as fit')
    const names = new Set(
      outcomes.map((o) => (o.status === 'rejected' && o.reason instanceof GatewayError ? o.reason.errorName : 'ok')),
    )
    t.same(
      [...names].filter((n) => n !== 'ok' && n !== 'budget_exhausted' && n !== 'budget_reserved'),
      [],
      "refused with admission's own budget refusals (reserved while others held it)",
    )
    const late = await spendOn(limiters[0] as ManagedLimiter, SHARE).then(
      () => null,
      (e: unknown) => e,
    )
    t.equal(late instanceof GatewayError ? late.errorName : late, 'budget_exhausted', 'once all is spent: exhausted')
    const statuses = await limiters[0]?.budgetStatusOf?.([keyBudget, ownerBudget], new Map([[key, owner]]))
    t.same(
      statuses?.map((s) => [s.scope, Math.round(s.spent * 1e9), s.reserved]),
      [
        ['key', 20 * SHARE, 0],
        ['owner', 20 * SHARE, 0],
      ],
      'spent to the nano-unit on every budget, nothing left held, nothing of the refused',
    )
    await pollUntil(
      async () => events.length,
      (n) => n >= 3,
      100,
      50,
    )
    t.same(
      events.filter((e) => e.scope === 'key').map((e) => e.threshold),
      [50, 80, 100],
      'each threshold reported once',
    )
    await spendOn(limiters[0] as ManagedLimiter, 0)
    t.pass('a cost of 0 touches nothing, not even a spent budget')
  })

  t.test(`${name}: a budget of 0 admits nothing, not even a free call`, async (t) => {
    const budget = spec({ amountNanos: 0 })
    const { options } = setup([budget], '2026-11-27T12:00:00Z')
    const [limiter] = await make(1, options)
    if (limiter === undefined) throw new Error('no limiter')
    t.teardown(() => limiter.close())
    t.equal(
      (await refusal(limiter, request(budget.id, budget.id, { inputTokens: 0, outputTokens: 0 }))).errorName,
      'budget_exhausted',
    )
  })

  t.test(`${name}: check() refuses a spent budget at once (the queue's entry), consuming nothing`, async (t) => {
    const budget = spec({ amountNanos: 2 * CALL_NANOS })
    const { options } = setup([budget], '2026-11-27T12:00:00Z')
    const [limiter] = await make(1, options)
    if (limiter === undefined) throw new Error('no limiter')
    t.teardown(() => limiter.close())
    const r = request(budget.id)
    await limiter.check?.(r)
    await spend(limiter, r, 1)
    await limiter.check?.(r)
    await spend(limiter, r, 1)
    const error = await limiter.check?.(r).then(
      () => null,
      (e: unknown) => e,
    )
    t.equal(error instanceof GatewayError ? error.errorName : error, 'budget_exhausted')
  })

  t.test(`${name}: a call's hold lasts until it settles, not until its rate-limit window ends`, async (t) => {
    // Issue #36: holds were windowed counters, so a call that outlived its window freed its
    // budget while it ran, and the next window admitted the same money again.
    const budget = spec({ amountNanos: 2 * CALL_NANOS })
    const { options } = setup([budget], '2026-11-27T12:00:00Z')
    const limiters = await make(gateways, { ...options, windowMs: 300 })
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const first = limiters[0] as ManagedLimiter
    const last = limiters[limiters.length - 1] as ManagedLimiter
    const r: AdmissionRequest = { ...request(budget.id), limits: { ...LIMITS, rpm: 1000 } }
    const running = [await first.admit(r), await last.admit(r)]
    t.equal((await refusal(last, r)).errorName, 'budget_reserved', 'the budget is held by the two calls')
    // The window the two calls were admitted in ends (its request counter is whole again).
    const reset = await pollUntil(
      () => first.peek(r),
      (headers) => headers['x-ratelimit-remaining-requests'] === '1000',
      500,
    )
    t.ok(reset.met, 'the rate-limit window reset')
    t.equal((await refusal(first, r)).errorName, 'budget_reserved', 'the calls still hold the budget')
    const status = async () => (await last.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'Test' }))?.[0]
    t.match(await status(), { reserved: 2 * CALL_NANOS * 1e-9, spent: 0 })
    await running[0]?.settle(CALL)
    await running[0]?.settle(CALL)
    t.match(await status(), { reserved: CALL_NANOS * 1e-9, spent: CALL_NANOS * 1e-9 }, 'a settle twice charges once')
    await running[1]?.settle({ inputTokens: 0, outputTokens: 0 })
    const third = await last.admit(r)
    t.equal((await refusal(first, r)).errorName, 'budget_reserved', 'one spent and one held: nothing left')
    await third.settle(CALL)
    t.match(await status(), { reserved: 0, spent: 2 * CALL_NANOS * 1e-9 })
    t.equal((await refusal(first, r)).errorName, 'budget_exhausted')
  })
}

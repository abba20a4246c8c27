// What every limiter must do, whichever store holds its counters. Run by memory.test.ts
// (the embedded store) and redis.test.ts (the shared Redis).
import { pollUntil } from '../helpers/poll.ts'
import type { Test } from 'tap'
import type { Usage } from '../../src/backends/port.ts'
import type { ModelLimits } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { parseDuration } from '../../src/limits/duration.ts'
import type { LimiterOptions, ManagedLimiter } from '../../src/limits/limiter.ts'
import type { Admission, RateLimitHeaders } from '../../src/limits/port.ts'
import { eventually, randomId } from './helpers.ts'

export type MakeLimiter = (options?: Partial<LimiterOptions>) => Promise<ManagedLimiter>

const MODEL = 'Mistral-Small-24B-Instruct-2501'

export interface Caller {
  readonly keyId: string
  admit(estimate: Usage): Promise<Admission>
  /** The 429 (or other GatewayError) an admission is refused with. */
  refusal(estimate: Usage): Promise<GatewayError>
  peek(): Promise<RateLimitHeaders>
  /** Consumed per dimension, read back from the headers (limit − remaining). */
  used(): Promise<Record<string, number>>
}

export function caller(limiter: ManagedLimiter, limits: ModelLimits, model = MODEL, keyId = randomId()): Caller {
  const base = { keyId, tier: 'Test', model, limits }
  const peek = (): Promise<RateLimitHeaders> => limiter.peek(base)
  return {
    keyId,
    admit: (estimate) => limiter.admit({ ...base, estimate }),
    async refusal(estimate) {
      try {
        await limiter.admit({ ...base, estimate })
      } catch (error) {
        if (error instanceof GatewayError) return error
        throw error
      }
      throw new Error('the admission was not refused')
    },
    peek,
    async used() {
      const headers = await peek()
      const out: Record<string, number> = {}
      for (const suffix of ['requests', 'tokens', 'input-tokens', 'output-tokens']) {
        const limit = headers[`x-ratelimit-limit-${suffix}`]
        const remaining = headers[`x-ratelimit-remaining-${suffix}`]
        if (limit !== undefined && remaining !== undefined) out[suffix] = Number(limit) - Number(remaining)
      }
      return out
    },
  }
}

const use = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens })

export function limiterContract(t: Test, name: string, make: MakeLimiter): void {
  t.test(`${name}: rpm admits exactly the limit, then a 429 that says how long to wait`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 5 })
    for (let i = 1; i <= 5; i++) {
      const admission = await c.admit(use(10, 10))
      t.equal(admission.headers['x-ratelimit-limit-requests'], '5')
      t.equal(admission.headers['x-ratelimit-remaining-requests'], String(5 - i), `request ${i} counts down`)
      const reset = parseDuration(admission.headers['x-ratelimit-reset-requests'] ?? '')
      t.ok(reset !== null && reset > 0 && reset <= 60_000, 'reset parses as a duration within the window')
    }
    const refused = await c.refusal(use(10, 10))
    t.equal(refused.status, 429)
    t.equal(refused.errorName, 'rate_limit_requests')
    t.same(refused.toBody().error, {
      message: refused.message,
      type: 'requests',
      param: null,
      code: 'rate_limit_exceeded',
    })
    t.match(
      refused.message,
      new RegExp(
        `^Rate limit reached for ${MODEL} on requests per min \\(RPM\\): Limit 5, Used 5, Requested 1\\. Please try again in (\\S+)\\.$`,
      ),
    )
    const waitMs = Number(refused.headers['retry-after-ms'])
    t.ok(Number.isInteger(waitMs) && waitMs > 0 && waitMs <= 60_000, 'retry-after-ms is a positive whole number of ms')
    t.equal(
      refused.headers['retry-after'],
      String(Math.ceil(waitMs / 1000)),
      'retry-after is whole seconds, rounded up',
    )
    t.equal(
      parseDuration(/try again in (\S+)\.$/.exec(refused.message)?.[1] ?? ''),
      waitMs,
      'the message names the same wait',
    )
    t.equal(refused.headers['x-ratelimit-remaining-requests'], '0', 'the 429 carries the state')
    t.equal(refused.headers['x-should-retry'], undefined, 'a wait is worth retrying')
    t.same(await c.used(), { requests: 5 }, 'the refusal consumed nothing')
  })

  t.test(`${name}: headers count down request by request and match the counters`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 10, input_tpm: 1000, output_tpm: 500 })
    let last: RateLimitHeaders = {}
    for (let i = 1; i <= 4; i++) {
      last = (await c.admit(use(50, 20))).headers
      t.equal(last['x-ratelimit-remaining-requests'], String(10 - i))
      t.equal(last['x-ratelimit-remaining-input-tokens'], String(1000 - 50 * i))
      t.equal(last['x-ratelimit-remaining-output-tokens'], String(500 - 20 * i))
      t.equal(last['x-ratelimit-limit-tokens'], '1000', 'without tpm, -tokens shows the input limit')
      t.equal(last['x-ratelimit-remaining-tokens'], last['x-ratelimit-remaining-input-tokens'])
    }
    const peeked = await c.peek()
    for (const name of Object.keys(last).filter((h) => !h.startsWith('x-ratelimit-reset'))) {
      t.equal(peeked[name], last[name], `peek agrees on ${name}`)
    }
    for (const name of Object.keys(peeked).filter((h) => h.startsWith('x-ratelimit-reset'))) {
      const ms = parseDuration(peeked[name] ?? '')
      t.ok(ms !== null && ms > 0 && ms <= 60_000, `${name} parses: ${peeked[name]}`)
    }
    t.same(Object.keys(peeked).sort(), [
      'x-ratelimit-limit-input-tokens',
      'x-ratelimit-limit-output-tokens',
      'x-ratelimit-limit-requests',
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-input-tokens',
      'x-ratelimit-remaining-output-tokens',
      'x-ratelimit-remaining-requests',
      'x-ratelimit-remaining-tokens',
      'x-ratelimit-reset-input-tokens',
      'x-ratelimit-reset-output-tokens',
      'x-ratelimit-reset-requests',
      'x-ratelimit-reset-tokens',
    ])
  })

  t.test(`${name}: a fresh key is full, with nothing to wait for`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const peeked = await caller(limiter, { rpm: 7, tpm: 1000, input_tpm: 800 }).peek()
    t.same(
      peeked,
      {
        'x-ratelimit-limit-requests': '7',
        'x-ratelimit-remaining-requests': '7',
        'x-ratelimit-reset-requests': '0s',
        'x-ratelimit-limit-tokens': '1000',
        'x-ratelimit-remaining-tokens': '1000',
        'x-ratelimit-reset-tokens': '0s',
        'x-ratelimit-limit-input-tokens': '800',
        'x-ratelimit-remaining-input-tokens': '800',
        'x-ratelimit-reset-input-tokens': '0s',
      },
      'tpm is -tokens when set; unset dimensions have no headers',
    )
  })

  t.test(`${name}: reservations reconcile to the tokens that really flowed`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 100, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000 })
    const admissions = await Promise.all(Array.from({ length: 10 }, () => c.admit(use(100, 200))))
    t.same(
      await c.used(),
      { requests: 10, tokens: 3000, 'input-tokens': 1000, 'output-tokens': 2000 },
      'the estimates are reserved',
    )
    let input = 0
    let output = 0
    await Promise.all(
      admissions.map((a, i) => {
        // Some use less than reserved (given back), some more (charged).
        const real = use(90 + i * 3, i % 2 === 0 ? 50 + i : 250 + i)
        input += real.inputTokens
        output += real.outputTokens
        return a.settle(real)
      }),
    )
    t.same(await c.used(), { requests: 10, tokens: input + output, 'input-tokens': input, 'output-tokens': output })
    await admissions[0]?.settle(use(0, 0))
    t.same(
      await c.used(),
      { requests: 10, tokens: input + output, 'input-tokens': input, 'output-tokens': output },
      'a second settle is ignored',
    )
  })

  t.test(`${name}: an upstream failure settles with zero usage and gives every token back`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 10, tpm: 5000 })
    const a = await c.admit(use(300, 700))
    t.same(await c.used(), { requests: 1, tokens: 1000 })
    await a.settle(use(0, 0))
    t.same(await c.used(), { requests: 1, tokens: 0 }, 'the request still counts; the tokens do not')
  })

  t.test(`${name}: a withdrawn call (no upstream acted on it) gives back its request and every token`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 2, tpm: 5000, quota: 100_000 })
    const kept = await c.admit(use(10, 10))
    await kept.settle(use(10, 10))
    for (let i = 0; i < 3; i++) {
      const a = await c.admit(use(300, 700))
      t.same(await c.used(), { requests: 2, tokens: 1020 })
      await a.settle(use(0, 0), { withdrawn: true })
      t.same(await c.used(), { requests: 1, tokens: 20 }, `withdrawn ${i + 1}: as if it had never been admitted`)
    }
    await (await c.admit(use(10, 10))).settle(use(10, 10))
    t.equal((await c.refusal(use(10, 10))).errorName, 'rate_limit_requests', 'the rpm still holds')
  })

  t.test(`${name}: a refusal on one dimension leaves no trace on the others`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 100, tpm: 10_000, input_tpm: 1000, output_tpm: 100 })
    await c.admit(use(500, 50))
    const before = await c.used()
    t.same(before, { requests: 1, tokens: 550, 'input-tokens': 500, 'output-tokens': 50 })
    const refused = await c.refusal(use(400, 60))
    t.equal(refused.errorName, 'rate_limit_tokens')
    t.equal(refused.type, 'tokens')
    t.match(refused.message, 'on output tokens per min (TPM): Limit 100, Used 50, Requested 60')
    t.same(await c.used(), before, 'requests, tokens and input tokens were not consumed either')
    await c.admit(use(400, 50))
    t.same(
      await c.used(),
      { requests: 2, tokens: 1000, 'input-tokens': 900, 'output-tokens': 100 },
      'what fits still fits exactly',
    )
  })

  t.test(`${name}: a request larger than the whole limit is told it can never fit`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 10, input_tpm: 18_750 })
    const refused = await c.refusal(use(20_000, 0))
    t.equal(refused.status, 429)
    t.equal(refused.errorName, 'rate_limit_tokens')
    t.equal(refused.code, 'rate_limit_exceeded')
    t.match(
      refused.message,
      `Request too large for ${MODEL} on input tokens per min (TPM): Limit 18750, Requested 20000`,
    )
    t.match(refused.message, /can never fit/)
    t.equal(refused.headers['retry-after'], undefined, 'no wait would help')
    t.equal(refused.headers['retry-after-ms'], undefined)
    t.equal(refused.headers['x-should-retry'], 'false', 'SDKs are told not to retry')
    t.same(await c.used(), { requests: 0, tokens: 0, 'input-tokens': 0 }, 'nothing consumed')
  })

  t.test(`${name}: a spent lifetime quota answers insufficient_quota without a retry hint`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { quota: 300 })
    const first = await c.admit(use(100, 100))
    t.same(first.headers, {}, 'the quota has no x-ratelimit headers')
    await first.settle(use(100, 150))
    const second = await c.admit(use(100, 100))
    await second.settle(use(30, 30))
    const refused = await c.refusal(use(1, 1))
    t.equal(refused.status, 429)
    t.equal(refused.errorName, 'insufficient_quota')
    t.same(refused.toBody().error, {
      message: refused.message,
      type: 'insufficient_quota',
      param: null,
      code: 'insufficient_quota',
    })
    t.match(refused.message, `Quota 300 tokens, Used 310`)
    t.equal(refused.headers['retry-after'], undefined)
    t.equal(refused.headers['retry-after-ms'], undefined)
    t.equal(refused.headers['x-should-retry'], 'false')
  })

  t.test(`${name}: check refuses only what could never be admitted, and consumes nothing`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const limits = { rpm: 1, input_tpm: 1000, quota: 500 }
    const c = caller(limiter, limits)
    const check = (estimate: Usage): Promise<unknown> =>
      limiter.check!({ keyId: c.keyId, tier: 'Test', model: MODEL, limits, estimate })
    const headers = await check(use(100, 0))
    t.equal(
      (headers as Record<string, string>)['x-ratelimit-remaining-requests'],
      '1',
      'it answers where the limits stand',
    )
    t.same(await c.used(), { requests: 0, tokens: 0, 'input-tokens': 0 }, 'a check takes nothing')
    await (await c.admit(use(100, 0))).settle(use(100, 0))
    await check(use(100, 0)).then(() => t.pass('over the rpm for now is not "never"'))
    const tooLarge = await check(use(1500, 0)).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(
      tooLarge instanceof GatewayError &&
        tooLarge.errorName === 'rate_limit_tokens' &&
        /can never fit/.test(tooLarge.message),
      'larger than a whole window',
    )
    const again = await c.admit(use(0, 0)).catch((e: unknown) => e)
    t.ok(again instanceof GatewayError, 'the window is still as the first call left it')
    const spent = caller(limiter, { quota: 50 })
    await (await spent.admit(use(30, 30))).settle(use(30, 30))
    const quota = await limiter.check!({
      keyId: spent.keyId,
      tier: 'Test',
      model: MODEL,
      limits: { quota: 50 },
      estimate: use(1, 1),
    }).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(quota instanceof GatewayError && quota.errorName === 'insufficient_quota', 'a spent quota')
  })

  t.test(`${name}: concurrent admissions never pass the limit`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 20, tpm: 1_000_000 })
    const results = await Promise.allSettled(Array.from({ length: 200 }, () => c.admit(use(10, 10))))
    const admitted = results.filter((r) => r.status === 'fulfilled').length
    const refusals = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as GatewayError] : []))
    t.equal(admitted, 20, 'exactly the limit')
    t.equal(refusals.length, 180)
    t.ok(
      refusals.every((e) => e.errorName === 'rate_limit_requests'),
      'every other one refused on requests',
    )
    t.same(await c.used(), { requests: 20, tokens: 400 }, 'refused requests left no tokens behind')
  })

  t.test(`${name}: keys and models have counters of their own`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const a = caller(limiter, { rpm: 1 })
    await a.admit(use(1, 1))
    await caller(limiter, { rpm: 1 }).admit(use(1, 1))
    await caller(limiter, { rpm: 1 }, 'gpt-4o', a.keyId).admit(use(1, 1))
    const star = await caller(limiter, { rpm: 1 }, '*', a.keyId)
    await star.admit(use(0, 0))
    t.match((await star.refusal(use(0, 0))).message, /^Rate limit reached for endpoints without a model on requests/)
    t.equal((await a.refusal(use(1, 1))).errorName, 'rate_limit_requests')
  })

  t.test(`${name}: without limits nothing is counted and no header is sent`, async (t) => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    const c = caller(limiter, { input_price: 1 })
    for (let i = 0; i < 3; i++) t.same((await c.admit(use(1_000_000, 1_000_000))).headers, {})
    t.same(await c.peek(), {})
  })

  t.test(`${name}: a quota reservation lasts until its call settles, not until its window ends`, async (t) => {
    // Issue #36: the quota's reservations were a windowed counter, so a call that outlived
    // its window stopped counting while it ran.
    const limiter = await make({ windowMs: 300 })
    t.teardown(() => limiter.close())
    const c = caller(limiter, { quota: 100, rpm: 1000 })
    const running = await c.admit(use(60, 40))
    t.equal((await c.refusal(use(1, 1))).errorName, 'insufficient_quota', 'while it is held, it counts')
    const reset = await pollUntil(
      () => c.peek(),
      (headers) => headers['x-ratelimit-remaining-requests'] === '1000',
      500,
    )
    t.ok(reset.met, 'the window it was admitted in ended')
    const held = await c.refusal(use(1, 1))
    t.equal(held.errorName, 'insufficient_quota', 'the running call still holds the quota')
    t.match(held.message, 'Used 100')
    await running.settle(use(30, 10))
    await running.settle(use(30, 10))
    await (await c.admit(use(1, 1))).settle(use(1, 1))
    // 40 + 2 used: a call holding 58 more fills the quota exactly.
    const last = await c.admit(use(58, 0))
    t.match((await c.refusal(use(1, 1))).message, 'Used 100', 'the call committed what it used, once')
    await last.settle(use(58, 0))
  })

  t.test(`${name}: a quota reservation settled after its window passed is committed once, not twice`, async (t) => {
    const windowMs = 300
    const limiter = await make({ windowMs })
    t.teardown(() => limiter.close())
    const c = caller(limiter, { quota: 150 })
    const long = await c.admit(use(0, 100))
    await new Promise((r) => setTimeout(r, windowMs + 100))
    await long.settle(use(0, 100))
    const next = await c.admit(use(0, 10))
    await next.settle(use(0, 60))
    t.match(
      (await c.refusal(use(1, 1))).message,
      'Used 160',
      'the 100 of the long call counted once, with the 60 after it',
    )
  })

  t.test(`${name}: tokens are given back only in the window they were reserved in; overuse is charged`, async (t) => {
    const windowMs = 500
    const limiter = await make({ windowMs })
    t.teardown(() => limiter.close())
    const c = caller(limiter, { output_tpm: 1000 })
    const early = await c.admit(use(0, 100))
    const late = await c.admit(use(0, 10))
    t.same(await c.used(), { 'output-tokens': 110, tokens: 110 })
    t.ok(await eventually(async () => (await c.used())['output-tokens'] === 0, 100, 20), 'the window resets')
    const next = await c.admit(use(0, 10))
    t.equal(next.headers['x-ratelimit-remaining-output-tokens'], '990')
    await early.settle(use(0, 20))
    t.same(
      await c.used(),
      { 'output-tokens': 10, tokens: 10 },
      'the 80 unused tokens of the old window are not given to the new one',
    )
    await late.settle(use(0, 30))
    t.same(
      await c.used(),
      { 'output-tokens': 30, tokens: 30 },
      'the 20 tokens over its reservation are charged to the window they flowed in',
    )
    await next.settle(use(0, 4))
    t.same(await c.used(), { 'output-tokens': 24, tokens: 24 }, 'a give-back in its own window lands')
  })
}

// What a call with prompt-cache reads and writes costs: the uncached input and the output
// at their prices, each cache part at the input price times its multiplier (the plan's, or
// the provider's published one), in exact integer nano-units; and what the hold reserves.
import t from 'tap'
import fc from 'fast-check'
import { cacheMultipliers, publishedMultipliers } from '../../src/keys/cache-prices.ts'
import { callCost, costNanos, reservedCostNanos } from '../../src/keys/money.ts'
import { modelLimitsSchema } from '../../src/config/schema.ts'

t.test('published multipliers by provider family, in ten-thousandths', async (t) => {
  const cases: Array<[string, number, number]> = [
    ['claude-sonnet-4.5', 1000, 12_500],
    ['claude-3-7-sonnet', 1000, 12_500],
    ['anthropic/claude-opus-4.5', 1000, 12_500],
    ['gpt-5', 1000, 10_000],
    ['gpt-5.2', 1000, 10_000],
    ['GPT-5-Codex', 1000, 10_000],
    ['gpt-4.1-mini', 2500, 10_000],
    ['o3', 2500, 10_000],
    ['o4-mini', 2500, 10_000],
    ['o3-mini', 5000, 10_000],
    ['gpt-4o', 5000, 10_000],
    ['o1', 5000, 10_000],
    ['gemini-2.5-pro', 1000, 10_000],
    [' gemini-3-pro', 1000, 10_000],
    ['gemini-2.0-flash', 2500, 10_000],
    ['gpt-oss-120b', 10_000, 10_000],
    ['Llama-3.3-70B-Instruct', 10_000, 10_000],
    ['mock-chat', 10_000, 10_000],
  ]
  for (const [model, read, write] of cases) t.strictSame(publishedMultipliers(model), { read, write }, model)
})

t.test("a plan's multipliers win over the published ones, each on its own", async (t) => {
  t.strictSame(cacheMultipliers('claude-sonnet-4.5', { cache_write_multiplier: 2 }), { read: 1000, write: 20_000 })
  t.strictSame(cacheMultipliers('mock-chat', { cache_read_multiplier: 0.1234 }), { read: 1234, write: 10_000 })
  t.strictSame(cacheMultipliers('gpt-5', { cache_read_multiplier: 0, cache_write_multiplier: 0 }), {
    read: 0,
    write: 0,
  })
  t.ok(modelLimitsSchema.safeParse({ cache_read_multiplier: 0.1, cache_write_multiplier: 1.25 }).success)
  t.notOk(modelLimitsSchema.safeParse({ cache_read_multiplier: -0.1 }).success, 'a negative multiplier is refused')
  t.notOk(modelLimitsSchema.safeParse({ cache_read_price: 1 }).success, 'an unknown field is refused')
})

t.test('callCost: uncached input, reads, writes and output each at their price, exact', async (t) => {
  // Claude at 3.00 in / 15.00 out per million: 10,000 prompt tokens of which 6,000 read from
  // the cache (0.1×) and 3,000 written to it (1.25×), 500 out.
  const limits = { input_price: 3, output_price: 15 }
  const cost = callCost(limits, 'claude-sonnet-4.5', {
    inputTokens: 10_000,
    outputTokens: 500,
    cacheReadTokens: 6000,
    cacheWriteTokens: 3000,
  })
  // 1,000 × 3 = 3,000; 500 × 15 = 7,500; 6,000 × 0.3 = 1,800; 3,000 × 3.75 = 11,250 (per million)
  t.strictSame(cost, { totalNanos: 23_550_000, cacheReadNanos: 1_800_000, cacheWriteNanos: 11_250_000 })
  t.equal(cost.totalNanos, 3_000_000 + 7_500_000 + 1_800_000 + 11_250_000, 'the parts add up to the whole')
})

t.test('callCost without cache parts is costNanos, to the nano-unit', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 100_000 }),
      fc.integer({ min: 0, max: 100_000 }),
      fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100),
      fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100),
      (input, output, inPrice, outPrice) => {
        const limits = { input_price: inPrice, output_price: outPrice }
        const cost = callCost(limits, 'claude-sonnet-4.5', { inputTokens: input, outputTokens: output })
        return (
          cost.totalNanos === costNanos(limits, input, output) &&
          cost.cacheReadNanos === 0 &&
          cost.cacheWriteNanos === 0
        )
      },
    ),
  )
  t.pass('the property holds')
})

t.test('callCost: integers, never more than the hold, and exact against a BigInt reference', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2_000_000 }),
      fc.integer({ min: 0, max: 2_000_000 }),
      fc.integer({ min: 0, max: 2_000_000 }),
      fc.integer({ min: 0, max: 100_000 }),
      fc.integer({ min: 0, max: 10_000 }).map((n) => n / 100),
      fc.integer({ min: 0, max: 40_000 }).map((n) => n / 10_000),
      fc.integer({ min: 0, max: 40_000 }).map((n) => n / 10_000),
      (prompt, read, write, output, price, r, w) => {
        const limits = { input_price: price, output_price: price, cache_read_multiplier: r, cache_write_multiplier: w }
        const usage = { inputTokens: prompt, outputTokens: output, cacheReadTokens: read, cacheWriteTokens: write }
        const cost = callCost(limits, 'any-model', usage)
        const reads = Math.min(read, prompt)
        const writes = Math.min(write, prompt - reads)
        const micro = BigInt(Math.round(price * 1e6))
        const exact = (tokens: number, m: number): bigint => {
          // price × tokens × m ÷ 10⁷, half up
          const x = micro * BigInt(tokens) * BigInt(Math.round(m * 10_000))
          return (x * 2n + 10_000_000n) / 20_000_000n
        }
        const ok =
          Number.isSafeInteger(cost.totalNanos) &&
          BigInt(cost.cacheReadNanos) === exact(reads, r) &&
          BigInt(cost.cacheWriteNanos) === exact(writes, w) &&
          cost.totalNanos ===
            costNanos(limits, prompt - reads - writes, output) + cost.cacheReadNanos + cost.cacheWriteNanos
        // The hold (every prompt token at the dearest rate) covers the real cost, whatever the cache did.
        const held = reservedCostNanos(limits, 'any-model', prompt, output)
        return ok && cost.totalNanos <= held + 2
      },
    ),
  )
  t.pass('the property holds')
})

t.test('reservedCostNanos: the dearest of input and a cache write (Claude: 1.25×)', async (t) => {
  const limits = { input_price: 3, output_price: 15 }
  t.equal(reservedCostNanos(limits, 'gpt-5', 1000, 100), costNanos(limits, 1000, 100), 'reads cheaper, writes 1×')
  t.equal(
    reservedCostNanos(limits, 'claude-sonnet-4.5', 1000, 100),
    3_750_000 + 1_500_000,
    'every prompt token a write',
  )
  t.equal(
    reservedCostNanos({ output_price: 15 }, 'claude-sonnet-4.5', 1000, 100),
    1_500_000,
    'no input price: output only',
  )
})

t.test('cache counts are clamped to the prompt: never more cached than was sent', async (t) => {
  const limits = { input_price: 1, output_price: 1 }
  const cost = callCost(limits, 'claude-sonnet-4.5', {
    inputTokens: 100,
    outputTokens: 0,
    cacheReadTokens: 80,
    cacheWriteTokens: 80,
  })
  // 80 reads at 0.1, the 20 left as writes at 1.25, nothing uncached
  t.strictSame(cost, { totalNanos: 8000 + 25_000, cacheReadNanos: 8000, cacheWriteNanos: 25_000 })
})

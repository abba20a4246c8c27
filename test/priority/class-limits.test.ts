// A class's limits on their own (src/priority/classes.ts): prices times the class's multiplier
// exact to the micro-unit, flex's share of each rate limit (never the quota), the class a body
// names or the tier's default, and the bands that order a line.
import t from 'tap'
import { bandOf, classLimits, resolveClass } from '../../src/priority/classes.ts'
import { costNanos } from '../../src/keys/money.ts'
import { serviceTiersSchema } from '../../src/config/schema.ts'

const resolved = {
  tier: 'T',
  model: 'm',
  limits: { rpm: 7, tpm: 1001, quota: 50, input_price: 0.123457, output_price: 3 },
}

t.test('prices: the multiplier applied to micro-units, half up; costs stay integers', async (t) => {
  const flex = classLimits(resolved, 'flex', undefined).limits
  t.equal(flex.input_price, 0.061729, '123457 µ × 0.5 = 61728.5 → 61729')
  t.equal(flex.output_price, 1.5)
  const priority = classLimits(resolved, 'priority', { prices: { priority: 1.75 } }).limits
  t.equal(priority.input_price, 0.21605, '123457 µ × 1.75 = 216049.75 → 216050')
  t.equal(priority.output_price, 5.25)
  t.equal(costNanos(priority, 1_000_000, 0), 216_050_000, 'a million input tokens: exactly the scaled price')
  t.same(classLimits(resolved, 'default', undefined).limits, resolved.limits, 'default: the plan as it is')
})

t.test('flex fills flexShare of each rate limit, never less than 1, and not the quota', async (t) => {
  t.match(classLimits(resolved, 'flex', undefined).limits, { rpm: 5, tpm: 800, quota: 50 })
  t.match(classLimits(resolved, 'flex', { flexShare: 0.1 }).limits, { rpm: 1, tpm: 100 })
  t.match(classLimits(resolved, 'priority', undefined).limits, { rpm: 7, tpm: 1001 })
})

t.test('the class: named on chat and responses, else the tier default; refused when not allowed', async (t) => {
  t.equal(resolveClass('chat.completions', { service_tier: 'flex' }, undefined), 'flex')
  t.equal(resolveClass('responses', { service_tier: 'fast' }, undefined), 'priority')
  t.equal(resolveClass('chat.completions', { service_tier: null }, { default: 'flex' }), 'flex')
  t.equal(resolveClass('chat.completions', { service_tier: 'auto' }, { default: 'flex' }), 'flex')
  t.equal(
    resolveClass('embeddings', { service_tier: 'priority' }, { default: 'flex' }),
    'flex',
    'other endpoints: the default',
  )
  t.throws(() => resolveClass('chat.completions', { service_tier: 'scale' }, undefined), {
    errorName: 'invalid_body',
    message: /service_tier/,
  })
  t.throws(() => resolveClass('chat.completions', { service_tier: 7 }, undefined), {
    errorName: 'invalid_body',
    message: /service_tier/,
  })
  t.throws(() => resolveClass('chat.completions', { service_tier: 'priority' }, { allow: ['default', 'flex'] }), {
    errorName: 'invalid_body',
    message: /may use 'default', 'flex'/,
  })
})

t.test('bands order priority, default, flex', async (t) => {
  t.ok(bandOf('priority') < bandOf('default') && bandOf('default') < bandOf('flex'))
  t.equal(bandOf(undefined), 0)
})

t.test("a tier's default class must be one it allows", async (t) => {
  t.ok(serviceTiersSchema.safeParse({ allow: ['flex'], default: 'flex' }).success)
  const wrong = serviceTiersSchema.safeParse({ allow: ['flex'] })
  t.notOk(wrong.success, "the default 'default' is not allowed")
  t.match(wrong.error?.issues[0], { path: ['default'], message: /must be one the tier allows/ })
  t.notOk(serviceTiersSchema.safeParse({ flexShare: 0 }).success, 'flexShare above 0')
  t.notOk(serviceTiersSchema.safeParse({ prices: { flex: -1 } }).success, 'prices not negative')
})

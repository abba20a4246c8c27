// Money written out: for people (the portal, the CLI) and for machines (the CSV), with the
// plans' currency; a non-zero amount is never 0.00, nor written in exponent notation.
import t from 'tap'
import fc from 'fast-check'
import {
  DEFAULT_CURRENCY,
  exactAmount,
  formatAmount,
  formatMoney,
  NANOS_PER_UNIT,
  planCurrency,
} from '../../src/keys/money.ts'

t.test('formatAmount: to the cent from one unit up, three significant digits below', async (t) => {
  const cases: Array<[number, string]> = [
    [0, '0.00'],
    [0.00036, '0.00036'],
    [0.000361, '0.000361'],
    [4.8e-7, '0.00000048'],
    [1e-9, '0.000000001'],
    [0.5, '0.50'],
    [0.123456, '0.123'],
    [0.01, '0.01'],
    [0.0099999, '0.01'],
    [0.999999, '1.00'],
    [1, '1.00'],
    [3.53, '3.53'],
    [12.3456, '12.35'],
    [1234.5, '1,234.50'],
    [-0.00036, '-0.00036'],
  ]
  for (const [units, text] of cases) t.equal(formatAmount(units), text, `${units}`)
})

t.test(
  'formatAmount: a non-zero amount is never 0.00, never in exponent notation, and reads back close to itself',
  async (t) => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9_000_000 * NANOS_PER_UNIT }), (nanos) => {
        const units = nanos / NANOS_PER_UNIT
        const text = formatAmount(units)
        if (text === '0.00' || /e/i.test(text)) return false
        const back = Number(text.replace(/,/g, ''))
        // Below one: three significant digits (half a unit in the third digit); from one up: half a cent.
        return units < 1 ? Math.abs(back - units) <= units * 0.005 + 1e-12 : Math.abs(back - units) <= 0.005 + 1e-9
      }),
      { numRuns: 2000 },
    )
    t.pass('held for 2000 amounts')
  },
)

t.test('formatMoney names the currency beside the amount', async (t) => {
  t.equal(formatMoney(0.00036, 'EUR'), '0.00036 EUR')
  t.equal(formatMoney(0, 'USD'), '0.00 USD')
})

t.test('exactAmount: nano-units as the exact decimal, no rounding, no exponent', async (t) => {
  t.equal(exactAmount(0), '0.00')
  t.equal(exactAmount(480), '0.00000048')
  t.equal(exactAmount(1), '0.000000001')
  t.equal(exactAmount(1_500_000), '0.0015')
  t.equal(exactAmount(1_500_000_000), '1.50')
  t.equal(exactAmount(4_271_300), '0.0042713')
  t.equal(exactAmount(123_456_789_012), '123.456789012')
  t.equal(exactAmount(-480), '-0.00000048')
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
      (nanos) =>
        Math.round(Number(exactAmount(nanos)) * NANOS_PER_UNIT) === nanos ||
        Number(exactAmount(nanos)) === nanos / NANOS_PER_UNIT,
    ),
  )
})

t.test("planCurrency: the plans' own, else EUR (the provider's catalogue prices in euros)", async (t) => {
  t.equal(planCurrency({}), DEFAULT_CURRENCY)
  t.equal(DEFAULT_CURRENCY, 'EUR')
  t.equal(planCurrency({ currency: 'USD' }), 'USD')
})

// Fuzz the admin API: key bodies with fields of every wrong type, unknown fields, bad
// tiers, models, limits and expiries; query strings with unknown, repeated and malformed
// parameters; ids that do not exist; the admin token wrong, missing or an API key.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('admin')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

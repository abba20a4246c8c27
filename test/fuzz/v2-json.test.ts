// Fuzz /v2 with JSON bodies: the template of each endpoint with fields of the wrong type,
// missing or added, huge numbers, invalid UTF-8, NUL bytes, deep nesting, truncated and
// oversized bodies, the tokenizer-stall prompts; now and then a broken frame, header or
// request line.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('v2-json')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

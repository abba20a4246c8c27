// Fuzz the /v2 uploads (audio, image edits, files): bad, mismatched, long and empty
// boundaries, parts without names, repeated and hostile fields, thousands of parts,
// LF-only lines, missing endings, oversized fields, and now and then a broken frame.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('v2-multipart')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

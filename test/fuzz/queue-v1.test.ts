// Fuzz /queue (drop-in calls with the /v2 bodies, reads and cancels of stored requests)
// and /v1 (files, vector stores and their files, batches and search): wrong types,
// missing and added fields, odd ids and queries, now and then a broken frame or header.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('queue-v1')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

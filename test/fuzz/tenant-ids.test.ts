// Fuzz tenant isolation inside bodies: another owner's file, vector store, response and item
// ids planted in every field that can name an object (chat and responses content parts,
// tools, previous_response_id, item references, prompt variables, fine-tuning files, vector
// store attach and batches, list cursors, the /queue twins), the bodies mutated around them.
// Every model and the resource backend are on a recording upstream: besides the suite's
// usual checks, not one request it received may name one of those ids.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('tenant-ids')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases, everythingUpstream: true })
})

// Fuzz the RAG gateway's login side: login and refresh bodies with fields of every wrong
// type, removed or added; broken framing and headers; the access token wrong, missing or
// another credential. Every error must be FastAPI's {"detail": ...}, never a 5xx.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('rag-auth')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

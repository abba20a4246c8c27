// Fuzz the HTTP layer itself on every route: two Content-Lengths, chunked with a length,
// lengths that lie, bad chunks, other transfer encodings; oversized headers, thousands of
// them, invalid characters; long URLs, doubled and encoded slashes, dot segments, odd
// methods; HTTP/1.0 and versions that do not exist; requests pipelined on one connection.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('http')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

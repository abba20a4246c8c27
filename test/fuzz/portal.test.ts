// Fuzz the key portal as a browser would reach it, and as a forger would: url-encoded forms
// with fields missing, repeated, of the wrong kind, huge, badly percent-encoded, with NUL
// bytes, thousands of them, or of another content type; the session cookie missing, mangled
// or another's; the CSRF token wrong; Origin and Sec-Fetch-Site of another site; broken
// framing. Every error must be a page or a redirect within the site, never a 5xx.
// Cases: FUZZ_CASES, or the part's share of the 20,000 CI runs (parts.ts).
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('portal')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases })
})

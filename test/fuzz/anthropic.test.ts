// Fuzz Anthropic's Messages API inbound (anthropic-targets.ts): Messages bodies mutated,
// the key as x-api-key or bearer, anthropic-version sent, missing or odd, /queue's drop-in
// and asynchronous twins. Every answer is an Anthropic message or stream, a token count, a
// stored request's 202, or an error in Anthropic's shape; never a 5xx, never OpenAI's
// error shape (but for what Node's HTTP layer answers before any route), never a secret.
// Cases: FUZZ_CASES, or the part's share of the CI runs (parts.ts). The seed is fixed, so
// CI sends the same cases every run (a failure replays as it is); FUZZ_SEED picks others.
import t from 'tap'
import { fuzzPart } from './parts.ts'
import { fuzzSuite } from './suite.ts'

const part = fuzzPart('anthropic')
const cases = Number(process.env.FUZZ_CASES ?? part.cases)

t.test(`${part.what}: ${cases} cases`, async (t) => {
  await fuzzSuite(t, { targets: part.targets, mix: part.mix, cases, seed: 38 })
})

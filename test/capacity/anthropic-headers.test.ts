// What capacity learns from Anthropic's own rate-limit headers
// (anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset},
// each reset an RFC 3339 instant), beside OpenAI's x-ratelimit-* (upstream-headers.test.ts).
import t from 'tap'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'

const NOW = Date.parse('2026-12-07T13:00:00Z')
const at = (seconds: number): string => new Date(NOW + seconds * 1000).toISOString().replace('.000Z', 'Z')

t.test('requests and tokens, resets as RFC 3339 instants', async (t) => {
  const o = observeResponse(
    200,
    {
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '49',
      'anthropic-ratelimit-requests-reset': at(2),
      'anthropic-ratelimit-tokens-limit': '90000',
      'anthropic-ratelimit-tokens-remaining': '81000',
      'anthropic-ratelimit-tokens-reset': at(30),
      'anthropic-ratelimit-output-tokens-limit': '16000',
      'anthropic-ratelimit-output-tokens-remaining': '100',
    },
    { now: NOW },
  )
  t.same(o.requests, { limit: 50, remaining: 49, resetAt: NOW + 2000 })
  t.same(o.tokens, { limit: 90000, remaining: 81000, resetAt: NOW + 30_000 }, 'tokens-* is the binding one when sent')
})

t.test('without tokens-*, the input or output quota with least left binds', async (t) => {
  const o = observeResponse(
    200,
    {
      'anthropic-ratelimit-input-tokens-limit': '80000',
      'anthropic-ratelimit-input-tokens-remaining': '72000',
      'anthropic-ratelimit-output-tokens-limit': '16000',
      'anthropic-ratelimit-output-tokens-remaining': '9000',
      'anthropic-ratelimit-output-tokens-reset': '2026-12-07T13:00:05+00:00',
    },
    { now: NOW },
  )
  t.same(o.tokens, { limit: 16000, remaining: 9000, resetAt: NOW + 5000 })
})

t.test('a 429 with no retry-after cools down until the exhausted quota resets', async (t) => {
  const o = observeResponse(
    429,
    { 'anthropic-ratelimit-requests-remaining': '0', 'anthropic-ratelimit-requests-reset': at(12) },
    { now: NOW },
  )
  t.equal(o.cooldownUntil, NOW + 12_000)
  t.equal(observeResponse(429, { 'retry-after': '3' }, { now: NOW }).cooldownUntil, NOW + 3000)
})

t.test('resets that are not believed: a past instant is now, a far one or a malformed one is nothing', async (t) => {
  const reset = (value: string): number | null | undefined =>
    observeResponse(200, { 'anthropic-ratelimit-requests-reset': value }, { now: NOW }).requests?.resetAt
  t.equal(reset(at(-60)), NOW)
  t.equal(reset(at(3 * 86_400)), undefined, 'three days away: nothing learned')
  t.equal(reset('2026-13-45T99:00:00Z'), undefined)
  t.equal(reset('tomorrow'), undefined)
})

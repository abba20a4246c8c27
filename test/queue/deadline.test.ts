// The deadline's prediction on its own (src/queue/deadline.ts): from the key's counters as
// the limiter states them, a fixed window at a time, the slowest dimension deciding; what a
// line waited beyond its predictions is added, and forgotten as it stops; the header's forms.
import t from 'tap'
import type { AdmissionRequest } from '../../src/limits/port.ts'
import { createWaitPredictor, deadlineOf, limitWaitMs, maxWaitOf } from '../../src/queue/deadline.ts'

const request = (limits: AdmissionRequest['limits'], input = 100, output = 50): AdmissionRequest => ({
  keyId: 'key_a',
  tier: 'T',
  model: 'm',
  limits,
  estimate: { inputTokens: input, outputTokens: output },
})
const state = (suffix: string, limit: number, remaining: number, reset: string): Record<string, string> => ({
  [`x-ratelimit-limit-${suffix}`]: String(limit),
  [`x-ratelimit-remaining-${suffix}`]: String(remaining),
  [`x-ratelimit-reset-${suffix}`]: reset,
})

t.test('requests: the room left now, then a window per limit of calls', async (t) => {
  const r = request({ rpm: 10 })
  const s = state('requests', 10, 3, '20s')
  t.equal(limitWaitMs(s, 0, r, 60_000), 0, 'fits now')
  t.equal(limitWaitMs(s, 2, r, 60_000), 0, 'the third of three left: now')
  t.equal(limitWaitMs(s, 3, r, 60_000), 20_000, 'the fourth: at the reset')
  t.equal(limitWaitMs(s, 12, r, 60_000), 20_000, 'the 13th: the last of the next window')
  t.equal(limitWaitMs(s, 13, r, 60_000), 80_000, 'the 14th: a window later')
})

t.test('tokens: calls of this size per window; the slowest dimension decides', async (t) => {
  const r = request({ rpm: 100, tpm: 1000 })
  const s = { ...state('requests', 100, 100, '5s'), ...state('tokens', 1000, 300, '5s') }
  // 150 tokens a call: 2 fit in the 300 left, 6 per window.
  t.equal(limitWaitMs(s, 1, r, 60_000), 0)
  t.equal(limitWaitMs(s, 2, r, 60_000), 5000)
  t.equal(limitWaitMs(s, 8, r, 60_000), 65_000)
  // Without tpm, -tokens stands for input_tpm and is read as input-tokens only.
  const inputOnly = request({ input_tpm: 1000 })
  const s2 = { ...state('tokens', 1000, 0, '5s'), ...state('input-tokens', 1000, 250, '5s') }
  t.equal(limitWaitMs(s2, 1, inputOnly, 60_000), 0, '100 input tokens a call: 2 fit in 250')
  t.equal(limitWaitMs(s2, 2, inputOnly, 60_000), 5000)
  t.equal(limitWaitMs({}, 5, r, 60_000), 0, 'no counters: nothing to predict from')
})

t.test('a line learns what it waits beyond its predictions, and forgets it', async (t) => {
  const p = createWaitPredictor(60_000)
  const r = request({ rpm: 10 })
  const s = state('requests', 10, 5, '1s')
  t.equal(p.predict('l', 2, r, s), 0)
  p.learn('l', 2, 0, 3000) // a full deployment: 1 s a call beyond the limits' 0
  t.equal(p.predict('l', 2, r, s), 3000)
  t.equal(p.predict('other', 2, r, s), 0, 'per line')
  for (let i = 0; i < 30; i++) p.learn('l', 0, 0, 0)
  t.equal(p.predict('l', 2, r, s), 0, 'forgotten once calls stop waiting beyond it')
})

t.test('the header, within the queue’s maxWaitMs', async (t) => {
  t.same(maxWaitOf({ headers: {} }), {})
  t.same(maxWaitOf({ headers: { 'x-tollgate-max-wait-ms': ' 250 ' } }), { maxWaitMs: 250 })
  for (const bad of ['-1', '1.5', 'soon', ''])
    t.throws(
      () => maxWaitOf({ headers: { 'x-tollgate-max-wait-ms': bad } }),
      { errorName: 'bad_header', message: /x-tollgate-max-wait-ms/ },
      bad,
    )
  t.equal(deadlineOf({ maxWaitMs: 250 }, 1000), 250)
  t.equal(deadlineOf({ maxWaitMs: 5000 }, 1000), 1000)
  t.equal(deadlineOf({}, 1000), 1000)
})

t.test('tokens are counted as admission reserves them: a learned output reservation, not the fixed one', async (t) => {
  const fixed = request({ output_tpm: 1500 }, 10, 1024)
  const learned: AdmissionRequest = { ...fixed, rateEstimate: { inputTokens: 10, outputTokens: 40 } }
  const s = state('output-tokens', 1500, 980, '40s')
  t.equal(limitWaitMs(s, 0, fixed, 60_000), 40_000, 'the fixed 1,024 does not fit in the 980 left: the reset')
  t.equal(limitWaitMs(s, 0, learned, 60_000), 0, 'the learned 40 fits now')
  t.equal(limitWaitMs(s, 23, learned, 60_000), 0, 'and with 23 ahead of it, 40 each: 24 fit in 980')
  t.equal(limitWaitMs(s, 24, learned, 60_000), 40_000, 'the 25th waits for the reset')
})

// The deadline's prediction on its own (src/queue/deadline.ts, wait-predictor.ts): from the
// key's counters as the limiter states them, a fixed window at a time, the slowest dimension
// deciding; or the pace a class passes places in its line, overtakers included, when that is
// slower, forgotten as calls stop waiting; the refusal's hint; the header's forms.
import t from 'tap'
import type { AdmissionRequest } from '../../src/limits/port.ts'
import { deadlineOf, deadlineRefusal, limitWaitMs, maxWaitOf } from '../../src/queue/deadline.ts'
import { createWaitPredictor, PROBE_AFTER_MS } from '../../src/queue/wait-predictor.ts'

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

t.test('a class learns the pace it passes places in its line, and forgets it as calls stop waiting', async (t) => {
  const now = 1_000_000
  const p = createWaitPredictor(60_000, () => now)
  const r = request({ rpm: 10 })
  const s = state('requests', 10, 5, '1s')
  t.equal(p.predict('l', 0, 2, r, s).waitMs, 0, 'nothing learned: the limits alone (room now)')
  p.learn('l', 0, { aheadAtJoin: 2, aheadAtEnd: 0, waitedMs: 3000 }) // 3 places in 3 s
  t.equal(p.predict('l', 0, 2, r, s).waitMs, 3000, 'three places at 1 s each')
  t.equal(p.predict('l', 0, 5, r, s).waitMs, 6000)
  // One call's pace: its spread taken as large as its average (a line of random arrivals).
  t.equal(p.predict('l', 0, 3, r, s).likelyMs, 4000 + Math.round(1.28 * 2000), 'the likely wait: 1.28 spreads above')
  t.equal(p.predict('other', 0, 2, r, s).waitMs, 0, 'per line')
  t.equal(p.predict('l', -1, 2, r, s).waitMs, 0, 'per class')
  t.equal(p.predict('l', 0, 2, r, state('requests', 10, 0, '20s')).waitMs, 20_000, 'the limits when they wait longer')
  for (let i = 0; i < 30; i++) p.learn('l', 0, { aheadAtJoin: 0, aheadAtEnd: 0, waitedMs: 0 })
  t.equal(p.predict('l', 0, 2, r, s).waitMs, 0, 'forgotten once calls stop waiting')
})

t.test(
  'calls that go ahead of it slow its pace; the oldest still waiting bounds it; a stale pace is probed',
  async (t) => {
    let now = 1_000_000
    const p = createWaitPredictor(60_000, () => now)
    const r = request({})
    // Joined with 2 ahead, timed out 4 s later with 1 ahead: later calls of a higher class went
    // ahead of it; it passed 2 places (its own counted when it stopped) in 4 s.
    p.learn('l', 0, { aheadAtJoin: 2, aheadAtEnd: 1, waitedMs: 4000 })
    t.equal(p.predict('l', 0, 3, r, {}).waitMs, 8000, '2 s a place, where the calls ahead alone would say less')
    const q = createWaitPredictor(60_000, () => now)
    q.learn('l', 0, { aheadAtJoin: 2, aheadAtEnd: 4, waitedMs: 4000 })
    t.equal(
      q.predict('l', 0, 0, r, {}).waitMs,
      4000,
      'further from the head when it gave up: one place in all that time',
    )
    t.equal(q.predict('l', -1, 0, r, {}).waitMs, 0, 'the higher class is not slowed by it')
    // A call that waits now, 9 s with 2 ahead of it: the line is at least that slow (3 s a place).
    const w = p.waiting('l', 0, 2, 60_000)
    now += 9000
    t.equal(
      p.predict('l', 0, 1, r, {}).waitMs,
      6000,
      'the oldest waiting call bounds the pace from below (2 s learned)',
    )
    w.end(0)
    // Nothing of its class waits now to teach it again: after PROBE_AFTER_MS one call goes and sees.
    const stale = createWaitPredictor(60_000, () => now)
    stale.learn('l', 0, { aheadAtJoin: 0, aheadAtEnd: 0, waitedMs: 5000 })
    now += PROBE_AFTER_MS + 1
    t.equal(stale.predict('l', 0, 0, r, {}).waitMs, 0, 'one call let wait to learn the pace again')
    t.equal(stale.predict('l', 0, 0, r, {}).waitMs, 5000, 'the others meanwhile on the old pace')
    stale.learn('l', 0, { aheadAtJoin: 0, aheadAtEnd: 0, waitedMs: 100 })
    t.equal(stale.predict('l', 0, 0, r, {}).waitMs, 100, 'what it teaches replaces the old pace')
  },
)

t.test('a refusal’s hint is the prediction, at most the longest wait of the queue', async (t) => {
  const hint = (e: { headers?: Record<string, string> }): number => Number(e.headers?.['retry-after-ms'])
  t.equal(hint(deadlineRefusal({ waitMs: 3000, likelyMs: 4200.4 }, 1000, 3, 15_000)), 4201, 'the likely wait')
  t.match(deadlineRefusal({ waitMs: 3000, likelyMs: 4200.4 }, 1000, 3).message, /about 3\.0 s, and up to 4\.2 s/)
  t.equal(hint(deadlineRefusal({ waitMs: 40_000, likelyMs: 60_000 }, 1000, 3, 15_000)), 15_000, 'at most maxWaitMs')
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

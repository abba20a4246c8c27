// OpenAI's reset durations: what formatDuration writes and parseDuration reads.
import t from 'tap'
import { formatDuration, parseDuration } from '../../src/limits/duration.ts'

t.test('formats like OpenAI (Go durations at millisecond resolution)', async (t) => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [-5, '0s'],
    [0.2, '1ms'],
    [20, '20ms'],
    [999, '999ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [2400, '2.4s'],
    [1001, '1.001s'],
    [59_999, '59.999s'],
    [60_000, '1m0s'],
    [360_000, '6m0s'],
    [90_500, '1m30.5s'],
    [3_600_000, '1h0m0s'],
    [3_723_000, '1h2m3s'],
    [86_400_000, '24h0m0s'],
  ]
  for (const [ms, text] of cases) t.equal(formatDuration(ms), text, `${ms} ms`)
})

t.test('parses its own output and OpenAI examples back', async (t) => {
  for (const ms of [0, 1, 20, 999, 1000, 1500, 2400, 59_999, 60_000, 90_500, 3_723_000]) {
    t.equal(parseDuration(formatDuration(ms)), ms, formatDuration(ms))
  }
  t.equal(parseDuration('6m0s'), 360_000)
  t.equal(parseDuration('17ms'), 17)
  for (const bad of ['', 's', 'ms', '1', '1x', '-1s', '1s2m', 'abc'])
    t.equal(parseDuration(bad), null, `"${bad}" is not a duration`)
})

// What the gateway learns from an upstream response: OpenAI/Azure quota headers, the
// waits a 429 or 503 names, Ollama's full queue, and hostile headers that must teach
// nothing rather than throw or lock a deployment out for a year.
import t from 'tap'
import { observeResponse, parseWaitMs, retryAfterAt, teaches } from '../../src/capacity/upstream-headers.ts'

const NOW = 1_800_000_000_000

t.test('durations as OpenAI writes them, and plain seconds', async (t) => {
  t.equal(parseWaitMs('1s'), 1000)
  t.equal(parseWaitMs('6m0s'), 360_000)
  t.equal(parseWaitMs('20ms'), 20)
  t.equal(parseWaitMs('1h2m3.5s'), 3_723_500)
  t.equal(parseWaitMs('17.28s'), 17_280)
  t.equal(parseWaitMs('0s'), 0)
  t.equal(parseWaitMs('2'), 2000)
  t.equal(parseWaitMs('0.5'), 500)
  t.equal(parseWaitMs('250us'), 0.25)
  for (const bad of ['', 's', '1x', '-1s', '1s2', 'NaN', 'Infinity', '1e3', '1 s', ' ', '1.s', '9'.repeat(80) + 's']) {
    t.equal(parseWaitMs(bad), null, `"${bad.slice(0, 20)}" is no duration`)
  }
})

t.test('OpenAI: limit, remaining and reset per dimension, on a served response', async (t) => {
  const o = observeResponse(
    200,
    {
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-limit-tokens': '150000',
      'x-ratelimit-remaining-requests': '59',
      'x-ratelimit-remaining-tokens': '149984',
      'x-ratelimit-reset-requests': '1s',
      'x-ratelimit-reset-tokens': '6m0s',
    },
    { now: NOW },
  )
  t.same(o, {
    kind: 'served',
    refused: false,
    cooldownUntil: null,
    requests: { limit: 60, remaining: 59, resetAt: NOW + 1000 },
    tokens: { limit: 150000, remaining: 149984, resetAt: NOW + 360_000 },
  })
  t.ok(teaches(o))
})

t.test(
  'Azure: remaining without reset; a 429 names its wait in retry-after-ms, which wins over retry-after',
  async (t) => {
    const served = observeResponse(
      200,
      { 'x-ratelimit-remaining-requests': '3', 'x-ratelimit-remaining-tokens': '900' },
      { now: NOW },
    )
    t.same(served.requests, { limit: null, remaining: 3, resetAt: null })
    t.same(served.tokens, { limit: null, remaining: 900, resetAt: null })
    const refused = observeResponse(
      429,
      { 'retry-after': '2', 'retry-after-ms': '1234.5', 'x-ratelimit-remaining-requests': '0' },
      { now: NOW },
    )
    t.equal(refused.kind, 'rate_limited')
    t.equal(refused.refused, true)
    t.equal(refused.cooldownUntil, NOW + 1235, 'fractions of a millisecond round up')
    t.equal(observeResponse(429, { 'retry-after': '2' }, { now: NOW }).cooldownUntil, NOW + 2000)
  },
)

t.test('retry-after as an HTTP-date; a date in the past means now', async (t) => {
  const at = new Date(NOW + 30_000).toUTCString()
  t.equal(retryAfterAt({ 'retry-after': at }, NOW), NOW + 30_000)
  t.equal(retryAfterAt({ 'retry-after': new Date(NOW - 5000).toUTCString() }, NOW), NOW)
  t.equal(retryAfterAt({ 'retry-after': 'tomorrow' }, NOW), null)
  t.equal(retryAfterAt({ 'retry-after': '2026-11-26T10:00:00Z' }, NOW), null, 'only the HTTP-date form')
})

t.test('a 429 that names no wait cools down until the exhausted dimension resets, else for the default', async (t) => {
  const o = observeResponse(
    429,
    {
      'x-ratelimit-remaining-requests': '5',
      'x-ratelimit-reset-requests': '1s',
      'x-ratelimit-remaining-tokens': '0',
      'x-ratelimit-reset-tokens': '12s',
    },
    { now: NOW },
  )
  t.equal(o.cooldownUntil, NOW + 12_000)
  t.equal(observeResponse(429, {}, { now: NOW }).cooldownUntil, NOW + 1000)
  t.equal(observeResponse(429, {}, { now: NOW, rateLimitedCooldownMs: 5000 }).cooldownUntil, NOW + 5000)
})

t.test('Ollama: a 503 with a full queue, no retry-after, cools down briefly', async (t) => {
  const body = JSON.stringify({ error: 'server busy, please try again.  maximum pending requests exceeded' })
  const o = observeResponse(503, { 'content-type': 'application/json; charset=utf-8' }, { now: NOW, body })
  t.same(o, { kind: 'queue_full', refused: true, cooldownUntil: NOW + 1000, requests: null, tokens: null })
  // Through its OpenAI-compatible /v1 the same message arrives inside an OpenAI error object.
  const v1 = JSON.stringify({
    error: { message: 'server busy, please try again.  maximum pending requests exceeded', type: 'api_error' },
  })
  t.equal(observeResponse(503, {}, { now: NOW, body: v1 }).kind, 'queue_full')
  const other = observeResponse(503, { 'retry-after': '3' }, { now: NOW, body: 'upstream connect error' })
  t.same([other.kind, other.cooldownUntil], ['overloaded', NOW + 3000])
})

t.test('insufficient_quota is a 429 that waits longer', async (t) => {
  const o = observeResponse(
    429,
    {},
    { now: NOW, body: '{"error":{"code":"insufficient_quota","type":"insufficient_quota"}}' },
  )
  t.same([o.kind, o.refused, o.cooldownUntil], ['out_of_quota', true, NOW + 60_000])
})

t.test('other statuses refuse nothing and set no cooldown, even with retry-after', async (t) => {
  for (const status of [200, 201, 304, 400, 401, 404, 500, 502, 504]) {
    const o = observeResponse(status, { 'retry-after': '30' }, { now: NOW })
    t.equal(o.refused, false, `${status}`)
    t.equal(o.cooldownUntil, null)
    t.notOk(teaches(o))
  }
  t.equal(observeResponse(500, {}, { now: NOW }).kind, 'other')
})

t.test('hostile or malformed headers are ignored, never thrown on', async (t) => {
  const hostile = {
    'x-ratelimit-limit-requests': '-5',
    'x-ratelimit-remaining-requests': 'NaN',
    'x-ratelimit-reset-requests': '99999999999h',
    'x-ratelimit-limit-tokens': ['100', '200'],
    'x-ratelimit-remaining-tokens': '1e9',
    'x-ratelimit-reset-tokens': '\u0000\u0001',
    'retry-after-ms': 'Infinity',
    'retry-after': '9'.repeat(500),
  }
  const o = observeResponse(200, hostile, { now: NOW })
  t.same(o, { kind: 'served', refused: false, cooldownUntil: null, requests: null, tokens: null })
  const refused = observeResponse(429, hostile, { now: NOW })
  t.equal(refused.cooldownUntil, NOW + 1000, 'falls back to the default wait')
  t.equal(observeResponse(429, { 'retry-after': '86400000' }, { now: NOW }).cooldownUntil, NOW + 600_000, 'capped')
  t.same(
    observeResponse(200, { 'x-ratelimit-limit-requests': '10', 'x-ratelimit-remaining-requests': '50' }, { now: NOW })
      .requests,
    { limit: 10, remaining: 10, resetAt: null },
    'more left than the whole quota is the quota',
  )
  t.same(
    observeResponse(200, { 'x-ratelimit-remaining-requests': ['4', '4'] }, { now: NOW }).requests,
    { limit: null, remaining: 4, resetAt: null },
    'a header repeated with one value is that value',
  )
  t.same(
    observeResponse(429, {}, { now: NOW, body: undefined, rateLimitedCooldownMs: -1, maxCooldownMs: Number.NaN })
      .cooldownUntil,
    NOW + 1000,
    'nonsense options fall back to the defaults',
  )
})

t.test('a reset written as epoch seconds is an instant; one a year away is not believed', async (t) => {
  const o = observeResponse(
    200,
    { 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': String(NOW / 1000 + 20) },
    { now: NOW },
  )
  t.equal(o.requests?.resetAt, NOW + 20_000)
  const far = observeResponse(
    200,
    { 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': String(NOW / 1000 + 365 * 86400) },
    { now: NOW },
  )
  t.equal(far.requests?.resetAt, null)
})

// Deadlines on /queue: a caller says how long it can wait (x-tollgate-max-wait-ms; the
// queue's own queue.maxWaitMs bounds it, and is the deadline of a call that says nothing),
// the gateway predicts the call's wait when it joins its line, and a prediction beyond the
// deadline is answered at once (429 queue_deadline with the predicted retry-after-ms)
// instead of holding the connection until it times out.
//
// The prediction, when the call joins its line (wait-predictor.ts): the larger of what the
// key's limits allow and the pace its class passes places in that line. The limits' part,
// here: the calls ahead of it (the store's count, so across every instance on Redis), the
// key's counters as they stand (the limiter's x-ratelimit-* state: room left in this window,
// time to its end) and its limits (what a window lets through), each call counted as
// admission will count it: a call without an output cap at its learned output reservation
// (reservations/, the limiter's asReserved), not the fixed one, which would predict a wait for
// room the call does not need: with fixed windows, the calls ahead and then this one pass in
// the room left now, then a window's worth at each reset (limitWaitMs). At the head, the
// limiter's own retry-after is the prediction. A call that then waits longer than its
// deadline still ends with queue_timeout, as before. How wrong the predictions were is
// measured for the calls that were admitted (tollgate_queue_wait_prediction_ratio: actual ÷
// predicted, when one was made).
import type { IncomingMessage } from 'node:http'
import { gatewayError, type GatewayError } from '../errors.ts'
import { parseDuration } from '../limits/duration.ts'
import type { AdmissionRequest, RateLimitHeaders } from '../limits/port.ts'

export const MAX_WAIT_HEADER = 'x-tollgate-max-wait-ms'

/** The caller's deadline, when it said one; 400 invalid_header (bad_header) when it is not a whole number of ms. */
export function maxWaitOf(req: Pick<IncomingMessage, 'headers'>): { maxWaitMs?: number } {
  const value = req.headers[MAX_WAIT_HEADER]
  if (value === undefined) return {}
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined || !/^\d{1,10}$/.test(text.trim()))
    throw gatewayError('bad_header', {
      message: `${MAX_WAIT_HEADER} must be a whole number of milliseconds (0 or more): how long the call may wait in the queue.`,
      param: MAX_WAIT_HEADER,
    })
  return { maxWaitMs: Number(text.trim()) }
}

/** A call's deadline: its caller's, within the queue's. */
export function deadlineOf(request: Pick<AdmissionRequest, 'maxWaitMs'>, queueMaxWaitMs: number): number {
  return Math.min(request.maxWaitMs ?? queueMaxWaitMs, queueMaxWaitMs)
}

/** What a call takes of the windowed token limits: its learned output reservation when it has one (limits/port.ts rateEstimate), as admission counts it. */
const reservedOf = (r: AdmissionRequest): AdmissionRequest['estimate'] => r.rateEstimate ?? r.estimate

/** The units one call takes of each dimension the x-ratelimit-* headers describe (limits/headers.ts). */
const DIMENSIONS: ReadonlyArray<readonly [string, (r: AdmissionRequest) => number | undefined]> = [
  ['requests', () => 1],
  // "-tokens" stands for input_tpm when the plan sets no tpm: that one is read as input-tokens.
  ['tokens', (r) => (r.limits.tpm === undefined ? undefined : reservedOf(r).inputTokens + reservedOf(r).outputTokens)],
  ['input-tokens', (r) => reservedOf(r).inputTokens],
  ['output-tokens', (r) => reservedOf(r).outputTokens],
]

/**
 * How long until the key's limits let `ahead` calls like this one through, and then this one:
 * from the counters as they stand (`state`: the limiter's x-ratelimit-* headers), a fixed
 * window at a time. The slowest dimension decides; 0 when they all fit in the room left now.
 */
export function limitWaitMs(
  state: RateLimitHeaders,
  ahead: number,
  request: AdmissionRequest,
  windowMs: number,
): number {
  let wait = 0
  for (const [suffix, unitsOf] of DIMENSIONS) {
    const units = unitsOf(request)
    const limit = Number(state[`x-ratelimit-limit-${suffix}`])
    const remaining = Number(state[`x-ratelimit-remaining-${suffix}`])
    const reset = parseDuration(state[`x-ratelimit-reset-${suffix}`] ?? '')
    if (units === undefined || units <= 0 || !(limit > 0) || !Number.isFinite(remaining) || reset === null) continue
    const perWindow = Math.max(1, Math.floor(limit / units))
    const beyondNow = ahead + 1 - Math.floor(remaining / units)
    if (beyondNow <= 0) continue
    wait = Math.max(wait, reset + (Math.ceil(beyondNow / perWindow) - 1) * windowMs)
  }
  return wait
}

/**
 * The refusal of a call whose predicted wait is beyond its deadline: `predictedMs` the
 * expected wait, `likelyMs` the one it was held against (wait-predictor.ts; the same at the
 * head). The hint is the likely wait, at most `longestMs` (queue.maxWaitMs): by then every call
 * waiting now has been served or has given up, so a retry meets another line.
 */
export function deadlineRefusal(
  predicted: { readonly waitMs: number; readonly likelyMs: number },
  deadlineMs: number,
  ahead: number,
  longestMs = Infinity,
): GatewayError {
  const retry = Math.max(1, Math.ceil(Math.min(predicted.likelyMs, longestMs)))
  const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`
  const about =
    predicted.likelyMs > predicted.waitMs
      ? `about ${seconds(predicted.waitMs)}, and up to ${seconds(predicted.likelyMs)} one time in ten,`
      : `about ${seconds(predicted.waitMs)}`
  return gatewayError('queue_deadline', {
    message:
      `The request would wait ${about} in line (${ahead} ahead of it), longer than the ` +
      `${deadlineMs} ms it may wait (${MAX_WAIT_HEADER}, or the queue's maxWaitMs). It was not sent upstream and nothing was charged: ` +
      'retry after retry-after-ms, or allow a longer wait.',
    headers: { 'retry-after': String(Math.ceil(retry / 1000)), 'retry-after-ms': String(retry) },
  })
}

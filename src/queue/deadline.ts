// Deadlines on /queue: a caller says how long it can wait (x-tollgate-max-wait-ms; the
// queue's own queue.maxWaitMs bounds it, and is the deadline of a call that says nothing),
// the gateway predicts the call's wait when it joins its line, and a prediction beyond the
// deadline is answered at once (429 queue_deadline with the predicted retry-after-ms)
// instead of holding the connection until it times out.
//
// The prediction, when the call joins its line: the calls ahead of it (the store's count, so
// across every instance on Redis), the key's counters as they stand (the limiter's
// x-ratelimit-* state: room left in this window, time to its end) and its limits (what a
// window lets through), each call counted as admission will count it: a call without an
// output cap at its learned output reservation (reservations/, the limiter's asReserved), not
// the fixed one, which would predict a wait for room the call does not need: with fixed windows, the calls ahead and then this one pass in the
// room left now, then a window's worth at each reset (limitWaitMs). On top, what calls in that
// line have waited beyond their prediction, learned on this gateway (a full deployment, the
// capacity behind the key's limits), and forgotten as it stops. At the head, the limiter's own
// retry-after is the prediction. A call that then waits longer than its deadline still ends
// with queue_timeout, as before. How wrong the predictions were is measured for the calls that
// were admitted (tollgate_queue_wait_prediction_ratio: actual ÷ predicted, when one was made).
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

export interface WaitPredictor {
  /** The predicted wait (ms) of a call with `ahead` calls before it in `line`, its key's counters at `state`. */
  predict(line: string, ahead: number, request: AdmissionRequest, state: RateLimitHeaders): number
  /** A call that joined with `ahead` before it and was predicted `predictedMs` was admitted after `waitedMs`. */
  learn(line: string, ahead: number, predictedMs: number, waitedMs: number): void
}

/** Lines remembered at most (the least recently learned go first). */
const MAX_LINES = 10_000
/** The weight of a new sample in a line's average. */
const ALPHA = 0.3

/**
 * The limits' prediction, plus what each line has waited beyond it per call (an average over
 * the calls that waited in it on this gateway: a deployment that was full, a head that took its
 * time), so the waits the counters do not show are learned, and forgotten as they stop.
 * `windowMs`: the limiter's window (limits.windowMs).
 */
export function createWaitPredictor(windowMs = 60_000): WaitPredictor {
  const beyond = new Map<string, number>()
  return {
    predict(line, ahead, request, state) {
      const extra = beyond.get(line) ?? 0
      return Math.round(limitWaitMs(state, ahead, request, windowMs) + (ahead + 1) * extra)
    },
    learn(line, ahead, predictedMs, waitedMs) {
      const sample = Math.max(0, waitedMs - predictedMs) / (ahead + 1)
      const before = beyond.get(line)
      if (before === undefined && sample === 0) return
      beyond.delete(line)
      const next = before === undefined ? sample : before + ALPHA * (sample - before)
      if (next >= 1) beyond.set(line, next)
      if (beyond.size > MAX_LINES) beyond.delete(beyond.keys().next().value as string)
    },
  }
}

/** The refusal of a call whose predicted wait is beyond its deadline. */
export function deadlineRefusal(predictedMs: number, deadlineMs: number, ahead: number): GatewayError {
  const retry = Math.max(1, Math.ceil(predictedMs))
  return gatewayError('queue_deadline', {
    message:
      `The request would wait about ${(predictedMs / 1000).toFixed(1)} s in line (${ahead} ahead of it), longer than the ` +
      `${deadlineMs} ms it may wait (${MAX_WAIT_HEADER}, or the queue's maxWaitMs). It was not sent upstream and nothing was charged: ` +
      'retry after retry-after-ms, or allow a longer wait.',
    headers: { 'retry-after': String(Math.ceil(retry / 1000)), 'retry-after-ms': String(retry) },
  })
}

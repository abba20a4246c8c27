// Deadlines on /queue: a caller says how long it can wait (x-tollgate-max-wait-ms; the
// queue's own queue.maxWaitMs bounds it, and is the deadline of a call that says nothing),
// the gateway predicts the call's wait when it joins its line, and a prediction beyond the
// deadline is answered at once (429 queue_deadline with the predicted retry-after-ms)
// instead of holding the connection until it times out.
//
// The prediction: the calls ahead of it in its line (the store's count, so across every
// instance on Redis) times how long one call takes to pass the head. That time is learned
// per line from the calls that waited (an average of wait ÷ calls ahead, on this gateway),
// and before anything is learned it is what the key's limits let through: a line only
// forms when its key is at a limit, and then it drains at that limit's rate (one call per
// window ÷ rpm, or its tokens per window ÷ tpm, the slowest; limits.windowMs is a minute). At the head the limiter's own
// retry-after is the prediction. A call that then waits longer than its deadline still
// ends with queue_timeout, as before. How wrong the predictions were is measured for the
// calls that waited (tollgate_queue_wait_prediction_ratio: actual ÷ predicted).
import type { IncomingMessage } from 'node:http'
import type { ModelLimits } from '../config/schema.ts'
import { gatewayError, type GatewayError } from '../errors.ts'
import type { AdmissionRequest } from '../limits/port.ts'

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

/** How long one call takes to pass the head of a line held at `limits`: the slowest of its limits' rates. */
export function perCallMsOf(limits: ModelLimits, estimate: AdmissionRequest['estimate'], windowMs = 60_000): number {
  const tokens = estimate.inputTokens + estimate.outputTokens
  const rates: Array<[number | undefined, number]> = [
    [limits.rpm, 1],
    [limits.tpm, tokens],
    [limits.input_tpm, estimate.inputTokens],
    [limits.output_tpm, estimate.outputTokens],
  ]
  let ms = 0
  for (const [limit, units] of rates)
    if (limit !== undefined && limit > 0) ms = Math.max(ms, (units * windowMs) / limit)
  return ms
}

export interface WaitPredictor {
  /** The predicted wait of a call with `ahead` calls before it in `line` (ms). */
  predict(line: string, ahead: number, request: AdmissionRequest): number
  /** A call that joined with `ahead` before it was admitted after `waitedMs`. */
  learn(line: string, ahead: number, waitedMs: number): void
}

/** Lines remembered at most (the least recently learned go first). */
const MAX_LINES = 10_000
/** The weight of a new sample in a line's average. */
const ALPHA = 0.3

/** `windowMs`: the limiter's window (limits.windowMs), over which rpm and tpm count. */
export function createWaitPredictor(windowMs = 60_000): WaitPredictor {
  const perCall = new Map<string, number>()
  return {
    predict(line, ahead, request) {
      if (ahead <= 0) return 0
      return Math.round(ahead * (perCall.get(line) ?? perCallMsOf(request.limits, request.estimate, windowMs)))
    },
    learn(line, ahead, waitedMs) {
      if (ahead <= 0) return
      const sample = waitedMs / ahead
      const before = perCall.get(line)
      perCall.delete(line)
      perCall.set(line, before === undefined ? sample : before + ALPHA * (sample - before))
      if (perCall.size > MAX_LINES) perCall.delete(perCall.keys().next().value as string)
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

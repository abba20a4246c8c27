// What a batch's line is, from what the queue says of its stored request: waiting, ended
// with a result, or to be submitted. The runner (runner.ts) acts on it. A 404 from the
// queue means "never taken" only for a line the queue never took; for one it took, the
// request's record is gone (the gateway was down longer than queue.resultTtlSeconds), and
// submitting it again would run it, and charge it, twice.
import type { BatchLine, LineResult } from './port.ts'

/** A stored request as the queue shows it (queue/view.ts), as far as a line reads it. */
export interface QueueView {
  readonly status?: unknown
  readonly response?: {
    readonly status_code?: unknown
    readonly body?: unknown
    readonly usage?: { readonly input_tokens?: unknown; readonly output_tokens?: unknown }
  }
}

/** The codes a line ends with when it has no reply of its own (docs/batches.md, Results). */
const LINE_ERRORS = {
  batch_cancelled: 'The batch was cancelled before this request ran.',
  batch_expired: 'This request was not run before the batch expired.',
  result_expired:
    'This request ended, but its result was no longer kept when the batch collected it (queue.resultTtlSeconds passed); it is not run again.',
  result_unavailable: 'This request ended without a result the batch could read; it is not run again.',
} as const

export type LineErrorCode = keyof typeof LINE_ERRORS

export function lineError(code: LineErrorCode): LineResult {
  return { kind: 'error', code, message: LINE_ERRORS[code] }
}

/** A line's result from its request, once the request has ended. */
export function resultOf(line: Pick<BatchLine, 'queueId'>, view: QueueView): LineResult | null {
  const status = view.status
  if (status === 'queued' || status === 'in_progress') return null
  const response = view.response
  if (response !== undefined && typeof response.status_code === 'number')
    return { kind: 'response', statusCode: response.status_code, requestId: line.queueId ?? '', body: response.body }
  if (status === 'cancelled') return lineError('batch_cancelled')
  // Ended, its result no longer kept (`expired` after queue.resultTtlSeconds), or none at all.
  return lineError(status === 'expired' ? 'result_expired' : 'result_unavailable')
}

export type LineState =
  { readonly kind: 'waiting' } | { readonly kind: 'ended'; readonly result: LineResult } | { readonly kind: 'submit' }

/**
 * Where a line with a queue id stands: `view` is the queue's answer, null for a 404. The
 * batch stopping (cancelled, expired) submits nothing more.
 */
export function lineState(
  line: Pick<BatchLine, 'queueId' | 'submitted'>,
  view: QueueView | null,
  stopping: boolean,
): LineState {
  if (view === null) {
    // Taken by the queue, then purged with its result: run again, it would be charged again.
    if (line.submitted === true) return { kind: 'ended', result: lineError('result_expired') }
    // Chosen, and not known to be taken (a restart between, or a full queue); a line kept
    // before `submitted` was recorded is treated alike. Submitted again: if the queue took it
    // after all, it refuses the id (QueueStore.submit keepIdUntil) and nothing runs twice.
    return stopping ? { kind: 'ended', result: lineError('batch_cancelled') } : { kind: 'submit' }
  }
  const result = resultOf(line, view)
  return result === null ? { kind: 'waiting' } : { kind: 'ended', result }
}

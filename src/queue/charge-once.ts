// A stored request is charged once, whatever runs it again. Its charge (budget spend and
// usage row) is written before its result is recorded, so a gateway killed in between
// runs it again (queue.md): that run's charge goes under the same id as the first's,
// which the limiter and the usage store apply once (limits/port.ts OnceCharge). The
// result recorded is the run again's; the charge is the first run's.
//
// Two runs of one request are charged apart, as two calls: a run whose upstream answer
// puts it back in line (an upstream 429 or 5xx with retries left: worker.ts) is charged as
// any call (what such an answer used, usually nothing), so the run after it is charged too.
// A run cut short by its own gateway stopping is charged nothing: it runs again, and that
// run is charged, as after a crash mid-reply. Rate limits are not part of the charge: a
// run again uses rate-limit room again.
import type { Config } from '../config/schema.ts'
import type { ChargeAs } from '../inference/call.ts'
import type { QueuedRequest } from './ports.ts'
import { upstreamRetryable } from './retry.ts'

/** The id a stored request's charge is written under. */
export function chargeIdOf(request: Pick<QueuedRequest, 'id'>): string {
  return `queue:${request.id}`
}

/**
 * How long a charge id is kept: twice the results' lifetime. A request waiting longer than
 * that expires unrun, and its record is gone after it (queue.resultTtlSeconds).
 */
export function chargeKeepMs(queue: Pick<Config['queue'], 'resultTtlSeconds'>): number {
  return 2 * queue.resultTtlSeconds * 1000
}

export interface RunCharge {
  readonly request: Pick<QueuedRequest, 'id'>
  /** The reply's status so far (the recorder's). */
  readonly status: () => number
  /** Aborted when the gateway stops: the run is cut, and runs again. */
  readonly stopping: AbortSignal
  /** Whether an answer with a retryable status puts the request back in line (retries left). */
  readonly retriesLeft: boolean
  readonly queue: Pick<Config['queue'], 'resultTtlSeconds'>
}

/** Exchange.chargeAs for one run of a stored request. */
export function chargeAsOf(run: RunCharge): () => ChargeAs {
  return () => {
    if (run.stopping.aborted) return 'nothing'
    if (run.retriesLeft && upstreamRetryable(run.status())) return 'plain'
    return { id: chargeIdOf(run.request), keepMs: chargeKeepMs(run.queue) }
  }
}

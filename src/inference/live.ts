// What the live routes hand the corridor (corridor.ts run): the exchange of a request whose
// client is connected, and /v2's admission strategy. /queue brings its own of each.
import type { RequestContext } from '../http/context.ts'
import type { Limiter } from '../limits/port.ts'
import type { AdmissionStrategy, Exchange } from './call.ts'

/** The exchange of a live request: the reply goes to the client. */
export function liveExchange(ctx: RequestContext): Exchange {
  return {
    id: ctx.id,
    log: ctx.log,
    signal: ctx.signal,
    sink: ctx.res,
    client: { req: ctx.req, res: ctx.res },
    notes: ctx,
    trace: ctx.trace,
    live: true,
  }
}

/** /v2: one admission; over the limit is the client's 429. */
export function limiterStrategy(limiter: Limiter): AdmissionStrategy {
  return { admit: (request) => limiter.admit(request) }
}

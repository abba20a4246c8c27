// Per-request state that travels down the corridor and is read once, at the end, by the
// access log and the metrics.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Usage } from '../backends/port.ts'
import { gatewayError, type ErrorName } from '../errors.ts'
import type { Logger } from '../observability/logger.ts'
import { NO_SPAN, type Span } from '../observability/tracing.ts'

export interface RequestContext {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly id: string
  readonly startedAt: number
  readonly log: Logger
  /** Aborted when the client leaves before the reply is complete. */
  readonly signal: AbortSignal
  /** The request's span (the no-op when traces are off). */
  readonly trace: Span
  /** Route label for logs and metrics: the endpoint name, never the raw path. */
  route: string
  keyId?: string
  /** The RAG gateway's verified user (never the token). */
  userId?: string
  tier?: string
  model?: string
  backend?: string
  usage?: Usage
  upstreamMs?: number
  stream?: boolean
  /** The entry of the error table the request was answered with (its stable name, never OpenAI's code). */
  errorName?: ErrorName
}

export function createContext(
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  log: Logger,
  trace: Span = NO_SPAN,
): RequestContext {
  const controller = new AbortController()
  // The reason says who gave up: a call the client left is recorded as client_closed (499,
  // nginx's "client closed request", logged at info), not as a timeout of its upstream.
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(gatewayError('client_closed'))
  })
  return { req, res, id, startedAt: performance.now(), log, signal: controller.signal, trace, route: 'unmatched' }
}

// Writing replies. Every JSON answer, including errors, goes through here.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { type GatewayError, toGatewayError } from '../errors.ts'
import type { RequestContext } from './context.ts'

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  const payload = JSON.stringify(body)
  if (res.headersSent) {
    // Too late for a status line: the best we can do is end what was started.
    if (!res.writableEnded) res.end()
    return
  }
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value)
  res.statusCode = status
  res.setHeader('content-type', 'application/json; charset=utf-8')
  res.setHeader('content-length', Buffer.byteLength(payload))
  res.end(payload)
}

/**
 * An error reply in its entry's shape (OpenAI's, with `detail`), its name recorded for the
 * access log. Unknown errors become a bare 500: no message, no stack.
 */
export function sendError(ctx: Pick<RequestContext, 'res' | 'errorName'>, err: unknown): GatewayError {
  const error = toGatewayError(err)
  ctx.errorName = error.errorName
  sendJson(ctx.res, error.status, error.toBody(), error.headers)
  return error
}

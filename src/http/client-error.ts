// What a client gets when its bytes never became a request: malformed HTTP, a header
// section over the size limit, headers that did not arrive in time, a CONNECT. Node's own answers
// have no body; these carry the contract's error body, so every reply the gateway sends,
// even to garbage, has the same shape.
import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import { gatewayError, type GatewayError } from '../errors.ts'
import { rawErrorReply } from './raw-reply.ts'

export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // As Node does: never write into a reply that has started on this connection (an
    // earlier pipelined request's), which would corrupt it.
    const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage
    if (err.code !== 'ECONNRESET' && socket.writable && current?.headersSent !== true) {
      socket.write(rawErrorReply(errorFor(err, server.headersTimeout)))
    }
    socket.destroy()
  })
  // CONNECT asks for a tunnel; without this listener Node drops the connection unanswered.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    socket.write(
      rawErrorReply(
        gatewayError('method_not_allowed', { message: 'CONNECT is not supported: this is not a forward proxy.' }),
      ),
    )
    socket.destroy()
  })
}

function errorFor(err: NodeJS.ErrnoException, headersTimeoutMs: number): GatewayError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return gatewayError('headers_too_large')
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return gatewayError('request_timeout', {
        message: `The request line and headers did not arrive within ${headersTimeoutMs} ms.`,
      })
    default:
      // The parser's own reason names the rule broken (e.g. "Invalid header value char")
      // and never holds the client's bytes.
      return gatewayError('bad_http', { message: `The request is not valid HTTP/1.1${reasonOf(err)}.` })
  }
}

function reasonOf(err: NodeJS.ErrnoException): string {
  const reason = (err as { reason?: unknown }).reason
  return typeof reason === 'string' && /^[\w .,'-]{1,80}$/.test(reason) ? `: ${reason}` : ''
}

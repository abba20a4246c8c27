// Socket-level failures before the response headers, sorted into the two answers that
// matter to failover: "never reached it" (safe to try the next deployment) and
// "it got the request and then misbehaved" (final).
import { type GatewayError, gatewayError } from '../../errors.ts'

// Connect failures, and resets before any response byte: the upstream closed the
// connection without answering (a restart, or a keep-alive socket it had already
// dropped), so the request is treated as not served.
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ETIMEDOUT',
  'ECONNABORTED',
  // http-proxy-3's connectTimeout destroys the socket with this code.
  'ECONNECT_TIMEOUT',
])

function codeOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' ? code : undefined
}

/** `err` came from the outgoing request before response headers arrived. */
export function beforeHeadersError(err: unknown): GatewayError {
  const code = codeOf(err)
  // TLS failures mean we never talked to a trustworthy upstream: as good as unreachable.
  if (code !== undefined && (UNREACHABLE.has(code) || code.startsWith('ERR_TLS_') || code.includes('CERT'))) {
    return gatewayError('upstream_unreachable', {
      message: `The upstream model server could not be reached (${code}).`,
      cause: err,
    })
  }
  return gatewayError('upstream_bad_response', { cause: err })
}

/** `err` ended a response body that had started. */
export function midBodyError(err: unknown): GatewayError {
  return gatewayError('upstream_bad_response', {
    message: 'The upstream model server closed the connection in the middle of its response.',
    cause: err,
  })
}

// How the RAG gateway refuses: FastAPI's {"detail": "..."} and a status, never a stack
// trace. Its refusals are entries of the one error table (src/errors.ts), thrown inside
// src/rag/ and src/jwt/ as GatewayErrors and answered here.
import type { OutgoingHttpHeaders } from 'node:http'
import { GatewayError, gatewayError, toGatewayError } from '../errors.ts'
import type { RequestContext } from '../http/context.ts'
import { sendJson } from '../http/reply.ts'
import { StoreUnavailableError } from '../store/errors.ts'

/** What every 401 of the RAG gateway carries, as FastAPI's OAuth2 bearer scheme answers. */
const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer' }

/**
 * Anything thrown on the RAG side as a refusal: a GatewayError (a verifier's 401, the
 * limiter's 429, a store outage) keeps its status, message and headers; a store that did
 * not answer (the session check of a token, say) is the same 503 as on the login routes,
 * with retry-after: the client keeps its token and tries again. Anything else is a bare 500.
 * Why a token was refused is for the operator only: every refused token gets one message.
 */
export function toRefusal(err: unknown): GatewayError {
  if (!(err instanceof GatewayError) && !(err instanceof StoreUnavailableError))
    return gatewayError('rag_internal', { cause: err })
  const error = toGatewayError(err)
  if (error.status === 401 && error.errorName !== 'missing_access_token')
    return gatewayError('invalid_access_token', { cause: err })
  return error
}

/**
 * Answers a refusal in FastAPI's shape, whatever its entry's own (a 401 with its Bearer
 * challenge), and records its name for the access log. A reply already under way can
 * only be cut.
 */
export function sendRefusal(
  ctx: Pick<RequestContext, 'res' | 'errorName'>,
  refusal: GatewayError,
  headers: OutgoingHttpHeaders = {},
): void {
  ctx.errorName = refusal.errorName
  if (ctx.res.headersSent) {
    ctx.res.destroy()
    return
  }
  sendJson(
    ctx.res,
    refusal.status,
    { detail: refusal.message },
    { ...refusal.headers, ...(refusal.status === 401 ? BEARER_CHALLENGE : {}), ...headers },
  )
}

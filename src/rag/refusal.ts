// What the RAG gateway refuses with: FastAPI's {"detail": "..."} and a status, never a
// stack trace. Thrown inside src/rag/ and answered by the gateway's handler.
import type { ServerResponse } from 'node:http'
import { GatewayError, toGatewayError } from '../errors.ts'
import { sendDetail } from '../http/reply.ts'
import { StoreUnavailableError } from '../store/errors.ts'

export class RagRefusal extends Error {
  override readonly name = 'RagRefusal'
  readonly status: number
  /** A stable label for logs and metrics. */
  readonly code: string
  readonly headers: Record<string, string>

  constructor(status: number, code: string, detail: string, headers: Record<string, string> = {}) {
    super(detail)
    this.status = status
    this.code = code
    this.headers = headers
  }
}

export const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer' }

export const notAuthenticated = (): RagRefusal => new RagRefusal(401, 'not_authenticated', 'Not authenticated', BEARER_CHALLENGE)
export const badCredentials = (): RagRefusal => new RagRefusal(401, 'invalid_token', 'Could not validate credentials', BEARER_CHALLENGE)
export const forbidden = (): RagRefusal => new RagRefusal(403, 'forbidden', 'Not enough permissions for this route')
export const badPath = (): RagRefusal => new RagRefusal(400, 'bad_path', 'The request path is not allowed')

/**
 * Anything thrown on the RAG side as a refusal: a GatewayError (a verifier's 401, the
 * limiter's 429, a store outage) keeps its status, message and headers; a store that did
 * not answer (the session check of a token, say) is the same 503 as on the login routes,
 * with retry-after: the client keeps its token and tries again. Anything else is a bare 500.
 */
export function toRefusal(err: unknown): RagRefusal {
  if (err instanceof RagRefusal) return err
  if (!(err instanceof GatewayError) && !(err instanceof StoreUnavailableError)) return new RagRefusal(500, 'internal', 'Internal Server Error')
  const error = toGatewayError(err)
  if (error.status === 401) return badCredentials()
  return new RagRefusal(error.status, error.errorName, error.message, error.headers)
}

export function sendRefusal(res: ServerResponse, refusal: RagRefusal): void {
  sendDetail(res, refusal.status, refusal.message, refusal.headers)
}

// Bedrock Runtime's errors (an HTTP status, the exception's name in x-amzn-errortype or the
// body's __type, and {"message": …}; docs.aws.amazon.com/bedrock/latest/APIReference/
// API_runtime_Converse.html#API_runtime_Converse_Errors) as an upstream answering in OpenAI's
// shape would have sent them, at the status the corridor reads:
//   ValidationException (400)              → 400, the caller's request, its message relayed
//   AccessDeniedException (403), and the signing refusals (UnrecognizedClientException,
//   InvalidSignatureException, ExpiredTokenException, …) → 403: the gateway's credentials
//                                            refused (upstream_auth_failed)
//   ResourceNotFoundException (404)        → 404 model_not_found
//   ThrottlingException (429), ServiceQuotaExceededException (400)
//                                          → 429: capacity learns the refusal and cools the
//                                            deployment down; the call fails over
//   ServiceUnavailableException (503), ModelNotReadyException (429: the model is not loaded
//   yet, waiting elsewhere is better)      → 503, the same
//   ModelTimeoutException (408)            → 504, ModelErrorException (424) → 502,
//   InternalServerException (500)          → 500: upstream failures, failed over from
// Bedrock sends no retry-after: capacity's default cooldown for a refusal applies.
// A ConverseStream names the same exceptions in its events (`:exception-type`, in camel
// case: throttlingException); streamErrorOf says those in OpenAI's error shape.
import { isJsonObject, type JsonObject } from '../../json.ts'

export interface TranslatedError {
  readonly status: number
  readonly body: { readonly error: JsonObject }
}

/** The signing and credential refusals of AWS's front door: each is the gateway's credentials refused. */
const AUTH = new Set([
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'IncompleteSignatureException',
  'MissingAuthenticationTokenException',
  'ExpiredTokenException',
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
])

interface Mapped {
  readonly status: number
  readonly type: string
  readonly code: string | null
}

/** The corridor's status, OpenAI's type and a code for one of Bedrock's exception names (at `status`). */
function mapped(name: string, status: number): Mapped {
  if (AUTH.has(name)) return { status: 403, type: 'permission_error', code: 'upstream_auth_failed' }
  switch (name) {
    case 'ValidationException':
      return { status: 400, type: 'invalid_request_error', code: 'validation_exception' }
    case 'ResourceNotFoundException':
      return { status: 404, type: 'invalid_request_error', code: 'model_not_found' }
    case 'ThrottlingException':
    case 'ServiceQuotaExceededException':
      return { status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' }
    case 'ServiceUnavailableException':
    case 'ModelNotReadyException':
      return { status: 503, type: 'server_error', code: 'service_unavailable' }
    case 'ModelTimeoutException':
      return { status: 504, type: 'server_error', code: 'model_timeout' }
    case 'ModelErrorException':
    case 'ModelStreamErrorException':
      return { status: 502, type: 'server_error', code: 'model_error' }
    case 'InternalServerException':
      return { status: 500, type: 'server_error', code: 'internal_server_error' }
  }
  if (status === 401 || status === 403) return { status: 403, type: 'permission_error', code: 'upstream_auth_failed' }
  if (status === 429) return { status, type: 'rate_limit_error', code: 'rate_limit_exceeded' }
  return { status, type: status < 500 ? 'invalid_request_error' : 'server_error', code: null }
}

/** The exception's name, from x-amzn-errortype ("ThrottlingException:http://…") or the body's __type ("…#ThrottlingException"). */
export function exceptionNameOf(header: string | undefined, body: unknown): string {
  const raw = header ?? (isJsonObject(body) && typeof body.__type === 'string' ? body.__type : '')
  const name = raw.split(':')[0] ?? ''
  return name.slice(name.lastIndexOf('#') + 1)
}

function messageOf(body: unknown): string | undefined {
  if (!isJsonObject(body)) return undefined
  // AWS writes "message", and some front-door errors "Message".
  const message = body.message ?? body.Message
  return typeof message === 'string' && message !== '' ? message : undefined
}

/** A Bedrock error response (status, x-amzn-errortype, body text) as an OpenAI error at the corridor's status. */
export function bedrockErrorOf(status: number, errorType: string | undefined, text: string): TranslatedError {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const name = exceptionNameOf(errorType, body)
  const to = mapped(name, status)
  const message = messageOf(body) ?? `The upstream (Amazon Bedrock) answered ${status}${name ? ` ${name}` : ''}.`
  return { status: to.status, body: { error: { message, type: to.type, param: null, code: to.code } } }
}

/** An exception event of a ConverseStream (`:exception-type` such as throttlingException) in OpenAI's error shape. */
export function streamErrorOf(exceptionType: string, payload: string): JsonObject {
  const name = exceptionType.charAt(0).toUpperCase() + exceptionType.slice(1)
  return bedrockErrorOf(500, name, payload).body
}

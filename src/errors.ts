// The one table of errors the gateway produces. Each code is stable and never reused:
// clients, dashboards and tests key on it. `type` and `code` follow OpenAI's error body.
//
// The body carries the message twice: in OpenAI's `error` object, which the OpenAI SDKs
// read, and as a top-level `detail` string, which is what the provider's own API answers
// (FastAPI's `{"detail": "..."}`, its error-codes reference) and what its customers' code
// reads. Both kinds of client find the message where they look. Errors of the RAG
// gateway's logins keep FastAPI's shape alone (`body: 'detail'`), as its services do.
import { StoreConflictError, StoreUnavailableError } from './store/errors.ts'

export interface ErrorSpec {
  readonly status: number
  readonly type: string
  /** The OpenAI `code` field; null where OpenAI sends null. */
  readonly code: string | null
  readonly message: string
  /** The body's shape: OpenAI's `error` object with `detail` beside it (unset), or FastAPI's `detail` alone. */
  readonly body?: 'detail'
}

export const ERRORS = {
  // 400
  invalid_json: { status: 400, type: 'invalid_request_error', code: 'invalid_json', message: 'We could not parse the JSON body of your request. Send valid JSON.' },
  invalid_body: { status: 400, type: 'invalid_request_error', code: 'invalid_body', message: 'The request body is invalid.' },
  missing_field: { status: 400, type: 'invalid_request_error', code: 'missing_required_parameter', message: 'A required parameter is missing.' },
  invalid_multipart: { status: 400, type: 'invalid_request_error', code: 'invalid_multipart', message: 'The multipart/form-data body could not be read.' },
  bad_header: { status: 400, type: 'invalid_request_error', code: 'invalid_header', message: 'A request header is invalid.' },
  bad_http: { status: 400, type: 'invalid_request_error', code: 'invalid_http_request', message: 'The request is not valid HTTP/1.1.' },
  // 401
  missing_api_key: { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: "You didn't provide an API key. Send it in the Authorization header as 'Bearer YOUR_KEY' (or in an api-key header)." },
  invalid_api_key: { status: 401, type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided.' },
  expired_api_key: { status: 401, type: 'authentication_error', code: 'invalid_api_key', message: 'This API key has expired.' },
  revoked_api_key: { status: 401, type: 'authentication_error', code: 'invalid_api_key', message: 'This API key has been revoked.' },
  admin_unauthorized: { status: 401, type: 'authentication_error', code: 'invalid_admin_token', message: 'A valid admin token is required.' },
  // 403
  model_not_allowed: { status: 403, type: 'permission_error', code: 'model_not_allowed', message: 'This API key may not use this model.' },
  endpoint_not_allowed: { status: 403, type: 'permission_error', code: 'endpoint_not_allowed', message: 'This API key may not use this endpoint.' },
  portal_forbidden: { status: 403, type: 'permission_error', code: 'csrf_failed', message: 'This form did not come from the portal. Reload the page and try again.' },
  admin_disabled: { status: 403, type: 'permission_error', code: 'admin_disabled', message: 'The admin API is disabled: set TOLLGATE_ADMIN_TOKEN.' },
  // 404
  unknown_route: { status: 404, type: 'invalid_request_error', code: 'unknown_url', message: 'Unknown request URL.' },
  model_not_found: { status: 404, type: 'invalid_request_error', code: 'model_not_found', message: 'The model does not exist or you do not have access to it.' },
  resource_not_found: { status: 404, type: 'invalid_request_error', code: 'not_found', message: 'No such object.' },
  // 409
  conflict: { status: 409, type: 'invalid_request_error', code: 'conflict', message: 'The request conflicts with the current state of the resource.' },
  // 405, 408, 413, 415, 417, 431
  request_timeout: { status: 408, type: 'invalid_request_error', code: 'request_timeout', message: 'The request arrived too slowly.' },
  client_read_timeout: { status: 408, type: 'invalid_request_error', code: 'client_read_timeout', message: 'The client stopped reading the response.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', code: 'method_not_allowed', message: 'Method not allowed for this URL.' },
  body_too_large: { status: 413, type: 'invalid_request_error', code: 'request_too_large', message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', code: 'unsupported_media_type', message: 'Unsupported Content-Type.' },
  expectation_failed: { status: 417, type: 'invalid_request_error', code: 'expectation_failed', message: 'The only Expect the gateway supports is 100-continue.' },
  headers_too_large: { status: 431, type: 'invalid_request_error', code: 'headers_too_large', message: 'The request line and headers are too large.' },
  // 429
  rate_limit_requests: { status: 429, type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests.' },
  rate_limit_tokens: { status: 429, type: 'tokens', code: 'rate_limit_exceeded', message: 'Rate limit reached for tokens.' },
  insufficient_quota: { status: 429, type: 'insufficient_quota', code: 'insufficient_quota', message: 'You exceeded your token quota.' },
  auth_throttled: { status: 429, type: 'requests', code: 'too_many_auth_failures', message: 'Too many failed authentication attempts from your address.' },
  too_many_connections: { status: 429, type: 'requests', code: 'too_many_connections', message: 'Too many open connections from your address.' },
  // A key's stored asynchronous requests at its cap: it frees as they run (retry-after).
  queue_full: { status: 429, type: 'requests', code: 'queue_full', message: 'This API key has as many stored asynchronous requests waiting as it may keep.' },
  // A key's files at its cap: waiting frees nothing, deleting files does (like a spent quota: no retry hint).
  file_quota_exceeded: { status: 429, type: 'insufficient_quota', code: 'file_quota_exceeded', message: 'This API key has as many files stored as it may keep.' },
  // 5xx
  internal: { status: 500, type: 'server_error', code: 'internal_error', message: 'The server had an error while processing your request.' },
  capability_missing: { status: 501, type: 'invalid_request_error', code: 'not_supported', message: 'The backend for this model does not support this endpoint.' },
  upstream_unreachable: { status: 502, type: 'server_error', code: 'upstream_unreachable', message: 'The upstream model server could not be reached.' },
  upstream_bad_response: { status: 502, type: 'server_error', code: 'upstream_error', message: 'The upstream model server sent an invalid response.' },
  // An upstream error whose body is not JSON (an empty 431, a proxy's HTML page): its
  // status is kept (status option), the body becomes the contract's.
  upstream_error_status: { status: 502, type: 'server_error', code: 'upstream_error', message: 'The upstream model server answered with an error.' },
  store_unavailable: { status: 503, type: 'server_error', code: 'store_unavailable', message: 'The gateway cannot reach its store right now.' },
  shutting_down: { status: 503, type: 'server_error', code: 'shutting_down', message: 'The gateway is shutting down.' },
  upstream_timeout: { status: 504, type: 'server_error', code: 'upstream_timeout', message: 'The upstream model server timed out.' },
  // The queue (/queue)
  queue_timeout: { status: 504, type: 'server_error', code: 'queue_timeout', message: 'The request waited in the queue for as long as allowed without capacity becoming free.' },
  queue_expired: { status: 504, type: 'server_error', code: 'queue_expired', message: 'The request waited in the queue for as long as its result would have been kept, and was not run.' },
  client_closed: { status: 499, type: 'invalid_request_error', code: 'client_closed', message: 'The client closed the connection before the request was answered.' },
  result_too_large: { status: 502, type: 'server_error', code: 'result_too_large', message: 'The reply was larger than the queue keeps as a result.' },
  // The RAG gateway's logins and access tokens (answered as FastAPI does: {"detail": message})
  invalid_access_token: { status: 401, type: 'authentication_error', code: 'invalid_token', message: 'Could not validate credentials', body: 'detail' },
  login_failed: { status: 401, type: 'authentication_error', code: 'invalid_credentials', message: 'Incorrect username or password', body: 'detail' },
  invalid_refresh_token: { status: 401, type: 'authentication_error', code: 'invalid_refresh_token', message: 'Invalid or expired refresh token', body: 'detail' },
  login_throttled: { status: 429, type: 'requests', code: 'too_many_login_failures', message: 'Too many failed login attempts. Try again later.', body: 'detail' },
} as const satisfies Record<string, ErrorSpec>

export type ErrorName = keyof typeof ERRORS

export interface GatewayErrorOptions {
  message?: string
  param?: string | null
  headers?: Record<string, string>
  cause?: unknown
  /** In place of the spec's status (an upstream's own error status, kept). */
  status?: number
}

/** OpenAI's error object with FastAPI's `detail` beside it; or `detail` alone (see `ErrorSpec.body`). */
export interface ErrorBody {
  readonly error?: { readonly message: string; readonly type: string; readonly param: string | null; readonly code: string | null }
  readonly detail: string
}

/** An error the client is meant to see, in OpenAI's shape (and FastAPI's `detail`). */
export class GatewayError extends Error {
  override readonly name = 'GatewayError'
  readonly errorName: ErrorName
  readonly status: number
  readonly type: string
  readonly code: string | null
  readonly param: string | null
  readonly headers: Record<string, string>
  readonly #detailOnly: boolean

  constructor(errorName: ErrorName, options: GatewayErrorOptions = {}) {
    const spec: ErrorSpec = ERRORS[errorName]
    super(options.message ?? spec.message, { cause: options.cause })
    this.errorName = errorName
    this.status = options.status ?? spec.status
    this.type = options.status !== undefined && options.status < 500 ? 'invalid_request_error' : spec.type
    this.code = spec.code
    this.param = options.param ?? null
    this.headers = options.headers ?? {}
    this.#detailOnly = spec.body === 'detail'
  }

  toBody(): ErrorBody {
    if (this.#detailOnly) return { detail: this.message }
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code }, detail: this.message }
  }
}

export function gatewayError(name: ErrorName, options?: GatewayErrorOptions): GatewayError {
  return new GatewayError(name, options)
}

/**
 * Anything thrown that is not a GatewayError becomes a 500 with no detail leaked, except
 * the store's own failures, which have a meaning of their own for the client.
 */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err
  // A moment's outage: clients (and the queue's retries) may come back in a second.
  if (err instanceof StoreUnavailableError) return new GatewayError('store_unavailable', { cause: err, headers: { 'retry-after': '1' } })
  if (err instanceof StoreConflictError) return new GatewayError('conflict', { cause: err })
  return new GatewayError('internal', { cause: err })
}

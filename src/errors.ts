// The one table of errors the gateway produces: every refusal or failure a client can get
// from it is an entry here, whatever the shape of its body.
//
// What is stable is each entry's NAME (its key): it is never reused nor given to another
// meaning, and it is what the access log records (`error`), what metrics label with, and
// what code and tests key on. Two entries never share a name; they may share OpenAI's
// `code`, which is not ours to choose: `type` and `code` mirror what OpenAI answers for
// the same case (four different refusals of an API key are all OpenAI's `invalid_api_key`),
// and clients key on them as they do on OpenAI's. test/errors.test.ts pins the whole table.
//
// An entry's body shape (`body`):
// - 'openai': OpenAI's `error` object, which the OpenAI SDKs read, with the message again
//   as a top-level `detail` string, which is what the provider's own API answers (FastAPI's
//   `{"detail": "..."}`, its error-codes reference) and what its customers' code reads.
// - 'detail': FastAPI's `{"detail": "..."}` alone, as the RAG gateway's services answer;
//   these entries have no OpenAI type or code, since no client sees one.
// - 'page': the key portal's sign-in form, shown again with the message on it.
// A surface may write an entry its own way: the RAG gateway's routes and logins answer
// every error as `{"detail"}` alone (the 429s and store outages they share with /v2
// included), and the portal shows any error's message on a page.
import { StoreConflictError, StoreUnavailableError } from './store/errors.ts'

/** How an entry's body is written (see the top of this file). */
export type BodyShape = 'openai' | 'detail' | 'page'

interface OpenAiErrorSpec {
  readonly status: number
  readonly type: string
  /** The OpenAI `code` field; null where OpenAI sends null. */
  readonly code: string | null
  readonly message: string
  readonly body: 'openai'
}

interface PlainErrorSpec {
  readonly status: number
  readonly message: string
  readonly body: 'detail' | 'page'
}

export type ErrorSpec = OpenAiErrorSpec | PlainErrorSpec

export const ERRORS = {
  // 400
  invalid_json: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_json',
    message: 'We could not parse the JSON body of your request. Send valid JSON.',
    body: 'openai',
  },
  invalid_body: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_body',
    message: 'The request body is invalid.',
    body: 'openai',
  },
  missing_field: {
    status: 400,
    type: 'invalid_request_error',
    code: 'missing_required_parameter',
    message: 'A required parameter is missing.',
    body: 'openai',
  },
  invalid_multipart: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_multipart',
    message: 'The multipart/form-data body could not be read.',
    body: 'openai',
  },
  bad_header: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_header',
    message: 'A request header is invalid.',
    body: 'openai',
  },
  bad_http: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_http_request',
    message: 'The request is not valid HTTP/1.1.',
    body: 'openai',
  },
  // A webhook URL the gateway will not send to: not http(s), credentials in it, or (with an
  // IP address for a host) an address the SSRF guard refuses (webhooks.allowAddresses).
  webhook_url_refused: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_webhook_url',
    message: 'The webhook URL is refused.',
    body: 'openai',
  },
  // A request that would have the upstream generate after the reply (`background: true` on
  // /responses): the gateway meters a call by its reply, so work done later would never be
  // charged to a budget or a limit. OpenAI's own code for a parameter it does not take.
  background_not_metered: {
    status: 400,
    type: 'invalid_request_error',
    code: 'unsupported_parameter',
    message:
      "'background: true' is not supported: the upstream would generate after this reply, where the gateway cannot meter or charge it.",
    body: 'openai',
  },
  // A request in another API's shape (Anthropic's Messages) that asks for something the
  // call cannot carry to its upstream (extended thinking, a PDF, a server tool on an
  // OpenAI-compatible server): refused, naming it, never dropped silently.
  untranslatable_feature: {
    status: 400,
    type: 'invalid_request_error',
    code: 'unsupported_parameter',
    message: 'The request uses a feature the upstream of this model cannot be asked for.',
    body: 'openai',
  },
  // A guardrail policy's `block` detector (or pattern, or deny-list) matched the request's
  // text (docs/guardrails.md): refused before anything reached an upstream. The message and
  // `param` name the policy, the detector and where in the body; never the matched text.
  guardrail_blocked: {
    status: 400,
    type: 'invalid_request_error',
    code: 'guardrail_blocked',
    message: 'The request was refused by a guardrail policy.',
    body: 'openai',
  },
  // 401
  missing_api_key: {
    status: 401,
    type: 'invalid_request_error',
    code: 'invalid_api_key',
    message:
      "You didn't provide an API key. Send it in the Authorization header as 'Bearer YOUR_KEY' (or in an api-key header).",
    body: 'openai',
  },
  invalid_api_key: {
    status: 401,
    type: 'invalid_request_error',
    code: 'invalid_api_key',
    message: 'Incorrect API key provided.',
    body: 'openai',
  },
  expired_api_key: {
    status: 401,
    type: 'authentication_error',
    code: 'invalid_api_key',
    message: 'This API key has expired.',
    body: 'openai',
  },
  revoked_api_key: {
    status: 401,
    type: 'authentication_error',
    code: 'invalid_api_key',
    message: 'This API key has been revoked.',
    body: 'openai',
  },
  admin_unauthorized: {
    status: 401,
    type: 'authentication_error',
    code: 'invalid_admin_token',
    message:
      'A valid admin token is required. `npx tollgate admin-token` prints it where the gateway runs; a TOLLGATE_ADMIN_TOKEN exported in your shell may be stale.',
    body: 'openai',
  },
  // 403
  model_not_allowed: {
    status: 403,
    type: 'permission_error',
    code: 'model_not_allowed',
    message: 'This API key may not use this model.',
    body: 'openai',
  },
  endpoint_not_allowed: {
    status: 403,
    type: 'permission_error',
    code: 'endpoint_not_allowed',
    message: 'This API key may not use this endpoint.',
    body: 'openai',
  },
  portal_forbidden: {
    status: 403,
    type: 'permission_error',
    code: 'csrf_failed',
    message: 'This form did not come from the portal. Reload the page and try again.',
    body: 'openai',
  },
  admin_disabled: {
    status: 403,
    type: 'permission_error',
    code: 'admin_disabled',
    message: 'The admin API is disabled: set TOLLGATE_ADMIN_TOKEN.',
    body: 'openai',
  },
  // 404
  unknown_route: {
    status: 404,
    type: 'invalid_request_error',
    code: 'unknown_url',
    message: 'Unknown request URL.',
    body: 'openai',
  },
  model_not_found: {
    status: 404,
    type: 'invalid_request_error',
    code: 'model_not_found',
    message: 'The model does not exist or you do not have access to it.',
    body: 'openai',
  },
  // A batch's input file that cannot be one (src/batches): its purpose, or its size.
  batch_input_invalid: {
    status: 400,
    type: 'invalid_request_error',
    code: 'invalid_file',
    message: 'The input file cannot be used for a batch.',
    body: 'openai',
  },
  resource_not_found: {
    status: 404,
    type: 'invalid_request_error',
    code: 'not_found',
    message: 'No such object.',
    body: 'openai',
  },
  // 409
  conflict: {
    status: 409,
    type: 'invalid_request_error',
    code: 'conflict',
    message: 'The request conflicts with the current state of the resource.',
    body: 'openai',
  },
  // POST /admin/reload: the file is refused, the gateway goes on with the configuration it runs
  config_restart_required: {
    status: 409,
    type: 'invalid_request_error',
    code: 'config_restart_required',
    message: 'The configuration file changes settings that only a restart applies; nothing was reloaded.',
    body: 'openai',
  },
  config_invalid: {
    status: 422,
    type: 'invalid_request_error',
    code: 'config_invalid',
    message: 'The configuration file is invalid; nothing was reloaded.',
    body: 'openai',
  },
  config_reload_failed: {
    status: 500,
    type: 'server_error',
    code: 'config_reload_failed',
    message: 'The configuration file could not be put in force; nothing was reloaded.',
    body: 'openai',
  },
  // 405, 408, 413, 415, 417, 431
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    code: 'request_timeout',
    message: 'The request arrived too slowly.',
    body: 'openai',
  },
  client_read_timeout: {
    status: 408,
    type: 'invalid_request_error',
    code: 'client_read_timeout',
    message: 'The client stopped reading the response.',
    body: 'openai',
  },
  method_not_allowed: {
    status: 405,
    type: 'invalid_request_error',
    code: 'method_not_allowed',
    message: 'Method not allowed for this URL.',
    body: 'openai',
  },
  body_too_large: {
    status: 413,
    type: 'invalid_request_error',
    code: 'request_too_large',
    message: 'The request body is too large.',
    body: 'openai',
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    code: 'unsupported_media_type',
    message: 'Unsupported Content-Type.',
    body: 'openai',
  },
  expectation_failed: {
    status: 417,
    type: 'invalid_request_error',
    code: 'expectation_failed',
    message: 'The only Expect the gateway supports is 100-continue.',
    body: 'openai',
  },
  headers_too_large: {
    status: 431,
    type: 'invalid_request_error',
    code: 'headers_too_large',
    message: 'The request line and headers are too large.',
    body: 'openai',
  },
  // 429
  rate_limit_requests: {
    status: 429,
    type: 'requests',
    code: 'rate_limit_exceeded',
    message: 'Rate limit reached for requests.',
    body: 'openai',
  },
  // Every deployment of the model is full or cooling down: the backend's limit, not the key's plan.
  upstream_capacity: {
    status: 429,
    type: 'requests',
    code: 'upstream_capacity_exceeded',
    message: 'Every deployment of this model is at its capacity right now. Try again after the time in retry-after-ms.',
    body: 'openai',
  },
  rate_limit_tokens: {
    status: 429,
    type: 'tokens',
    code: 'rate_limit_exceeded',
    message: 'Rate limit reached for tokens.',
    body: 'openai',
  },
  insufficient_quota: {
    status: 429,
    type: 'insufficient_quota',
    code: 'insufficient_quota',
    message: 'You exceeded your token quota.',
    body: 'openai',
  },
  // A budget (money over a period) has no room for the call's estimated cost: waiting for
  // calls in flight frees nothing, only its period's end or a larger amount does (no retry).
  budget_exhausted: {
    status: 429,
    type: 'insufficient_quota',
    code: 'insufficient_quota',
    message: 'You exceeded your budget.',
    body: 'openai',
  },
  // The budget has room, but calls in flight hold it: their settles give back what they do not use.
  budget_reserved: {
    status: 429,
    type: 'requests',
    code: 'rate_limit_exceeded',
    message: 'Calls in flight hold what is left of your budget.',
    body: 'openai',
  },
  // Budgets live in Redis; while it is away they are not guessed at.
  budget_unavailable: {
    status: 503,
    type: 'server_error',
    code: 'store_unavailable',
    message: 'Budgets cannot be checked right now. Please try again shortly.',
    body: 'openai',
  },
  auth_throttled: {
    status: 429,
    type: 'requests',
    code: 'too_many_auth_failures',
    message: 'Too many failed authentication attempts from your address.',
    body: 'openai',
  },
  too_many_connections: {
    status: 429,
    type: 'requests',
    code: 'too_many_connections',
    message: 'Too many open connections from your address.',
    body: 'openai',
  },
  // A key's stored asynchronous requests at its cap: it frees as they run (retry-after).
  // A key's unfinished batches at their cap (src/batches): one ending or cancelled frees a place.
  batch_limit: {
    status: 429,
    type: 'invalid_request_error',
    code: 'batch_limit_exceeded',
    message: 'This API key has as many unfinished batches as it may.',
    body: 'openai',
  },
  queue_full: {
    status: 429,
    type: 'requests',
    code: 'queue_full',
    message: 'This API key has as many stored asynchronous requests waiting as it may keep.',
    body: 'openai',
  },
  // A key's files at its cap: waiting frees nothing, deleting files does (like a spent quota: no retry hint).
  file_quota_exceeded: {
    status: 429,
    type: 'insufficient_quota',
    code: 'file_quota_exceeded',
    message: 'This API key has as many files stored as it may keep.',
    body: 'openai',
  },
  // 5xx
  internal: {
    status: 500,
    type: 'server_error',
    code: 'internal_error',
    message: 'The server had an error while processing your request.',
    body: 'openai',
  },
  capability_missing: {
    status: 501,
    type: 'invalid_request_error',
    code: 'not_supported',
    message: 'The backend for this model does not support this endpoint.',
    body: 'openai',
  },
  upstream_unreachable: {
    status: 502,
    type: 'server_error',
    code: 'upstream_unreachable',
    message: 'The upstream model server could not be reached.',
    body: 'openai',
  },
  // The upstream refused the gateway's own credential (401, 403): the operator's to fix, not
  // the caller's key; never OpenAI's invalid_api_key, which an SDK raises as AuthenticationError.
  upstream_auth_failed: {
    status: 502,
    type: 'server_error',
    code: 'upstream_auth_failed',
    message:
      "The upstream model server refused the gateway's own credentials for it. This is not about your API key: the gateway's operator has to fix it.",
    body: 'openai',
  },
  upstream_bad_response: {
    status: 502,
    type: 'server_error',
    code: 'upstream_error',
    message: 'The upstream model server sent an invalid response.',
    body: 'openai',
  },
  // An upstream error whose body is not JSON (an empty 431, a proxy's HTML page): its
  // status is kept (status option), the body becomes the contract's.
  upstream_error_status: {
    status: 502,
    type: 'server_error',
    code: 'upstream_error',
    message: 'The upstream model server answered with an error.',
    body: 'openai',
  },
  store_unavailable: {
    status: 503,
    type: 'server_error',
    code: 'store_unavailable',
    message: 'The gateway cannot reach its store right now.',
    body: 'openai',
  },
  shutting_down: {
    status: 503,
    type: 'server_error',
    code: 'shutting_down',
    message: 'The gateway is shutting down.',
    body: 'openai',
  },
  // A guardrail policy's external check with `onError: closed` (docs/guardrails.md) did not
  // answer in time, answered an error or an answer that does not validate: the call was not
  // checked, so it is not run. The gateway's side, not the caller's; the message names the
  // policy, the check and what went wrong, never the text.
  guardrail_unavailable: {
    status: 503,
    type: 'server_error',
    code: 'guardrail_unavailable',
    message: 'A guardrail check the request needs is not available right now. Please try again shortly.',
    body: 'openai',
  },
  upstream_timeout: {
    status: 504,
    type: 'server_error',
    code: 'upstream_timeout',
    message: 'The upstream model server timed out.',
    body: 'openai',
  },
  // The queue (/queue)
  // A /queue call whose predicted wait is longer than its caller (x-tollgate-max-wait-ms) or the queue can wait: answered at once (queue/deadline.ts).
  queue_deadline: {
    status: 429,
    type: 'requests',
    code: 'queue_deadline',
    message: 'The request would wait in line longer than its deadline allows.',
    body: 'openai',
  },
  queue_timeout: {
    status: 504,
    type: 'server_error',
    code: 'queue_timeout',
    message: 'The request waited in the queue for as long as allowed without capacity becoming free.',
    body: 'openai',
  },
  queue_expired: {
    status: 504,
    type: 'server_error',
    code: 'queue_expired',
    message: 'The request waited in the queue for as long as its result would have been kept, and was not run.',
    body: 'openai',
  },
  client_closed: {
    status: 499,
    type: 'invalid_request_error',
    code: 'client_closed',
    message: 'The client closed the connection before the request was answered.',
    body: 'openai',
  },
  result_too_large: {
    status: 502,
    type: 'server_error',
    code: 'result_too_large',
    message: 'The reply was larger than the queue keeps as a result.',
    body: 'openai',
  },
  // The RAG gateway's logins and access tokens (answered as FastAPI does: {"detail": message})
  invalid_access_token: { status: 401, message: 'Could not validate credentials', body: 'detail' },
  login_failed: { status: 401, message: 'Incorrect username or password', body: 'detail' },
  invalid_refresh_token: { status: 401, message: 'Invalid or expired refresh token', body: 'detail' },
  login_throttled: { status: 429, message: 'Too many failed login attempts. Try again later.', body: 'detail' },
  missing_access_token: { status: 401, message: 'Not authenticated', body: 'detail' },
  // A login or refresh body that is not what the route takes: its `detail` is FastAPI's list of problems, not this message.
  unprocessable_body: { status: 422, message: 'The request body is not what this route takes.', body: 'detail' },
  // The RAG gateway's routes to its services (the relay names the service in the message)
  rag_bad_path: { status: 400, message: 'The request path is not allowed', body: 'detail' },
  rag_route_forbidden: { status: 403, message: 'Not enough permissions for this route', body: 'detail' },
  rag_unknown_route: { status: 404, message: 'Not Found', body: 'detail' },
  rag_unknown_service: { status: 404, message: 'Not Found', body: 'detail' },
  rag_body_timeout: { status: 408, message: 'The request body arrived too slowly', body: 'detail' },
  rag_body_too_large: { status: 413, message: 'Request body too large', body: 'detail' },
  rag_internal: { status: 500, message: 'Internal Server Error', body: 'detail' },
  rag_service_unreachable: { status: 502, message: 'The service is unavailable', body: 'detail' },
  // A service's error without a JSON body: its status is kept (status option), the body becomes the contract's.
  rag_service_error_status: { status: 502, message: 'The service answered with an error', body: 'detail' },
  rag_service_timeout: { status: 504, message: 'The service did not answer in time', body: 'detail' },
  // The key portal's sign-in form, answered again with the message on it
  portal_sign_in_incomplete: { status: 400, message: 'Enter your username and password.', body: 'page' },
  portal_sign_in_failed: { status: 401, message: 'Wrong username or password.', body: 'page' },
  // A flex call when every deployment has no room left in flex's share of it: shed first, the rest kept for default and priority (proxy/deployment-pick.ts).
  flex_capacity: {
    status: 429,
    type: 'requests',
    code: 'flex_capacity_exceeded',
    message:
      'Every deployment of this model is too busy for flex calls right now. Try again after the time in retry-after-ms.',
    body: 'openai',
  },
  // A /v2 call of a party above its fair share when every deployment has no room left outside the part kept for parties below theirs (fairness/capacity-share.ts).
  fair_share: {
    status: 429,
    type: 'requests',
    code: 'fair_share_exceeded',
    message:
      'This model is contended and your fair share of it is used; the rest is kept for callers below theirs. Retry after retry-after-ms, or use /queue.',
    body: 'openai',
  },
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
  readonly error?: {
    readonly message: string
    readonly type: string
    readonly param: string | null
    readonly code: string | null
  }
  readonly detail: string
}

/**
 * An error the client is meant to see: one entry of ERRORS (`errorName`), with the message,
 * status and headers of this occurrence.
 */
export class GatewayError extends Error {
  override readonly name = 'GatewayError'
  /** The entry's stable name: what the access log records. */
  readonly errorName: ErrorName
  readonly status: number
  /** OpenAI's `type` and `code`; null for an entry whose body is not OpenAI's. */
  readonly type: string | null
  readonly code: string | null
  readonly param: string | null
  readonly headers: Record<string, string>

  constructor(errorName: ErrorName, options: GatewayErrorOptions = {}) {
    const spec: ErrorSpec = ERRORS[errorName]
    super(options.message ?? spec.message, { cause: options.cause })
    this.errorName = errorName
    this.status = options.status ?? spec.status
    this.type =
      spec.body !== 'openai'
        ? null
        : options.status !== undefined && options.status < 500
          ? 'invalid_request_error'
          : spec.type
    this.code = spec.body === 'openai' ? spec.code : null
    this.param = options.param ?? null
    this.headers = options.headers ?? {}
  }

  /** The entry's JSON body ('page' entries, shown on a page, have the `detail` one). */
  toBody(): ErrorBody {
    if (this.type === null) return { detail: this.message }
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
      detail: this.message,
    }
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
  if (err instanceof StoreUnavailableError)
    return new GatewayError('store_unavailable', { cause: err, headers: { 'retry-after': '1' } })
  if (err instanceof StoreConflictError) return new GatewayError('conflict', { cause: err })
  return new GatewayError('internal', { cause: err })
}

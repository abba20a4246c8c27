// Errors in Anthropic's shape: `{"type":"error","error":{"type":…,"message":…},"request_id":…}`,
// which the Anthropic SDKs read (their error classes follow the status). The gateway's own
// errors keep their entry in src/errors.ts (the access log records its name); only the body,
// and for a "try again shortly" answer the status, are Anthropic's. An upstream's error,
// relayed in OpenAI's shape, is written the same way.
import { isJsonObject } from '../../json.ts'
import type { GatewayError } from '../../errors.ts'

/** Anthropic's status for an overloaded service: its SDKs retry it, and Claude Code says so. */
export const OVERLOADED = 529

export interface AnthropicError {
  readonly status: number
  readonly body: {
    readonly type: 'error'
    readonly error: { readonly type: string; readonly message: string }
    readonly request_id: string
  }
}

/**
 * Anthropic's error type for a status. 503 (the gateway or its store is away for a moment)
 * and 529 are Anthropic's overloaded_error at 529; so is the gateway's upstream_capacity
 * 429, which says every deployment of the model is full, not that the caller went over
 * its own limits.
 */
function typeAndStatus(status: number, errorName?: string): { type: string; status: number } {
  if (errorName === 'upstream_capacity' || status === 503 || status === OVERLOADED)
    return { type: 'overloaded_error', status: OVERLOADED }
  switch (status) {
    case 401:
      return { type: 'authentication_error', status }
    case 402:
      return { type: 'billing_error', status }
    case 403:
      return { type: 'permission_error', status }
    case 404:
      return { type: 'not_found_error', status }
    case 408:
    case 504:
      return { type: 'timeout_error', status }
    case 413:
      return { type: 'request_too_large', status }
    case 429:
      return { type: 'rate_limit_error', status }
  }
  return { type: status < 500 ? 'invalid_request_error' : 'api_error', status }
}

export function anthropicErrorOf(error: GatewayError, requestId: string): AnthropicError {
  return shaped(typeAndStatus(error.status, error.errorName), error.message, requestId)
}

/** An upstream's error body (OpenAI's shape, or anything) at `status`, in Anthropic's shape. */
export function anthropicErrorOfBody(status: number, body: unknown, requestId: string): AnthropicError {
  const inner = isJsonObject(body) && isJsonObject(body.error) ? body.error : undefined
  const message =
    typeof inner?.message === 'string'
      ? inner.message
      : isJsonObject(body) && typeof body.detail === 'string'
        ? body.detail
        : `The upstream model server answered ${status}.`
  return shaped(typeAndStatus(status), message, requestId)
}

function shaped(mapped: { type: string; status: number }, message: string, requestId: string): AnthropicError {
  return {
    status: mapped.status,
    body: { type: 'error', error: { type: mapped.type, message }, request_id: requestId },
  }
}

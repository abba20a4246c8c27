// Anthropic's errors (`{"type":"error","error":{"type":…,"message":…},"request_id":…}`)
// → what the corridor expects of an upstream: OpenAI's error shape, at the status the proxy
// reads. The statuses stand as they are (400 is the caller's, relayed; 401 and 403 refused
// the gateway's credential, upstream_auth_failed; 429 is a refusal capacity learns from;
// 500 a failure to fail over from), except 529 overloaded_error, Anthropic's "no capacity
// now": the proxy's word for that is 503, so it cools the deployment down and moves on.
import { isJsonObject, type JsonObject } from '../../json.ts'

/** Anthropic's status for an overloaded service. */
const OVERLOADED = 529

export interface OpenAIError {
  readonly status: number
  readonly body: { readonly error: JsonObject }
}

/** OpenAI's error type for a status, as its API writes them. */
function openAIType(status: number): string {
  if (status === 401) return 'authentication_error'
  if (status === 403) return 'permission_error'
  if (status === 429) return 'rate_limit_error'
  return status < 500 ? 'invalid_request_error' : 'server_error'
}

/** An Anthropic error body (or anything) answered at `status`, as an OpenAI error at the proxy's status. */
export function openAIErrorOf(status: number, body: unknown): OpenAIError {
  const inner = isJsonObject(body) && isJsonObject(body.error) ? body.error : {}
  const kind = typeof inner.type === 'string' ? inner.type : null
  const mapped = status === OVERLOADED || kind === 'overloaded_error' ? (status < 400 ? status : 503) : status
  return {
    status: mapped,
    body: {
      error: {
        message: typeof inner.message === 'string' ? inner.message : `The upstream model server answered ${status}.`,
        type: openAIType(mapped),
        param: null,
        // Anthropic's own type, kept for whoever reads the relayed error.
        code: kind,
      },
    },
  }
}

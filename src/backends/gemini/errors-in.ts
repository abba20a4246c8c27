// Gemini's errors ({"error":{"code","message","status","details"}}, Google's AIP-193 shape)
// as an upstream answering in OpenAI's shape would have sent them, status kept, so that the
// corridor treats them as it treats any upstream's: a 400 is the caller's answer, a 401 or
// 403 the gateway's credential refused (upstream_auth_failed), a 429 or 503 a refusal that
// deployment capacity learns from, any other 5xx a failure. A 429's RetryInfo.retryDelay
// ("37s", a protobuf Duration) becomes retry-after-ms, the header capacity reads the wait from.
import { parseWaitMs } from '../../capacity/upstream-headers.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'

const RETRY_INFO = 'type.googleapis.com/google.rpc.RetryInfo'
const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo'
/**
 * ErrorInfo reasons that say the gateway's key was refused. Gemini answers a key it does not
 * know with 400 INVALID_ARGUMENT (reason API_KEY_INVALID): passed on as a 400, the caller would
 * be told its own request was wrong. It is the 401 it means.
 */
const KEY_REFUSED = new Set(['API_KEY_INVALID', 'API_KEY_EXPIRED', 'API_KEY_SERVICE_BLOCKED'])

/** OpenAI's error type for each of Google's canonical status names. */
const TYPE_OF: Readonly<Record<string, string>> = {
  INVALID_ARGUMENT: 'invalid_request_error',
  FAILED_PRECONDITION: 'invalid_request_error',
  OUT_OF_RANGE: 'invalid_request_error',
  NOT_FOUND: 'invalid_request_error',
  UNAUTHENTICATED: 'authentication_error',
  PERMISSION_DENIED: 'permission_error',
  RESOURCE_EXHAUSTED: 'requests',
}

export interface TranslatedError {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: JsonObject
}

/** The error for a Gemini error response's status and (start of its) body. */
export function geminiErrorOf(status: number, text: string): TranslatedError {
  let error: JsonObject = {}
  try {
    // Google's OpenAI-compatible endpoint wraps it in a list; the native one does not.
    const parsed: unknown = JSON.parse(text)
    const first: unknown = Array.isArray(parsed) ? parsed[0] : parsed
    if (isJsonObject(first) && isJsonObject(first.error)) error = first.error
  } catch {
    // Not JSON (a proxy's page): the status alone speaks.
  }
  if (status === 400 && reasons(error.details).some((r) => KEY_REFUSED.has(r)))
    return {
      status: 401,
      headers: {},
      body: {
        error: {
          message: 'The upstream refused its key.',
          type: 'authentication_error',
          param: null,
          code: 'invalid_api_key',
        },
      },
    }
  const name = typeof error.status === 'string' ? error.status : ''
  const message =
    typeof error.message === 'string' && error.message !== ''
      ? error.message
      : `The upstream (Google Gemini) answered ${status}${name ? ` ${name}` : ''}.`
  const headers: Record<string, string> = {}
  const wait = retryDelayMs(error.details)
  if (wait !== undefined) headers['retry-after-ms'] = String(Math.ceil(wait))
  const type = TYPE_OF[name] ?? (status >= 500 ? 'server_error' : 'invalid_request_error')
  const code =
    status === 429 ? 'rate_limit_exceeded' : name === 'NOT_FOUND' ? 'model_not_found' : name.toLowerCase() || null
  return { status, headers, body: { error: { message, type, param: null, code } } }
}

/** The wait a RetryInfo among an error's details names, in milliseconds. */
function retryDelayMs(details: unknown): number | undefined {
  if (!Array.isArray(details)) return undefined
  for (const detail of details as unknown[]) {
    if (!isJsonObject(detail) || detail['@type'] !== RETRY_INFO || typeof detail.retryDelay !== 'string') continue
    const ms = parseWaitMs(detail.retryDelay)
    if (ms !== null) return ms
  }
  return undefined
}

function reasons(details: unknown): string[] {
  if (!Array.isArray(details)) return []
  return (details as unknown[]).flatMap((d) =>
    isJsonObject(d) && d['@type'] === ERROR_INFO && typeof d.reason === 'string' ? [d.reason] : [],
  )
}

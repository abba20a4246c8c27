// The property every reply must have: well-formed HTTP; a success, or an error in the
// contract's shape for its target (OpenAI's error object with a `detail` of the same message, or FastAPI's `detail`) (for a browser's pages: a page, or a redirect that stays
// on the site); never a 5xx caused by the input; never a stack trace, an internal path or
// a secret.
import type { ParsedResponse } from '../helpers/http-reader.ts'
import type { ErrorShape } from './targets.ts'

/** Anything in a reply that says how the gateway is built or where it runs. */
const LEAKS: ReadonlyArray<readonly [RegExp, string]> = [
  [/\/work\//, 'an internal path (/work/)'],
  [/node:internal/, 'node:internal'],
  [/node_modules/, 'node_modules'],
  [/^\s*at .+:\d+:\d+\)?\s*$/m, 'a stack frame'],
  [/\bat (?:async )?[\w$.<>[\]]+ \((?:file:\/\/|\/)/, 'a stack frame'],
  [/\.(?:ts|js|mjs|cjs):\d+:\d+/, 'a source position'],
  [/\b(?:TypeError|RangeError|SyntaxError|ReferenceError): /, 'a JavaScript error message'],
]

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

export function matchesShape(shape: Exclude<ErrorShape, 'html'>, body: unknown): boolean {
  if (!isObject(body)) return false
  switch (shape) {
    case 'openai': {
      // OpenAI's error object, and FastAPI's `detail` beside it holding the same message
      // (src/errors.ts), so readers of either find it.
      const error = body.error
      return (
        isObject(error) &&
        typeof error.message === 'string' &&
        typeof error.type === 'string' &&
        'param' in error &&
        (error.param === null || typeof error.param === 'string') &&
        'code' in error &&
        (error.code === null || typeof error.code === 'string') &&
        body.detail === error.message
      )
    }
    case 'anthropic': {
      // Anthropic's: {"type": "error", "error": {"type": …, "message": …}, "request_id": …}.
      const error = body.error
      return (
        body.type === 'error' &&
        isObject(error) &&
        typeof error.type === 'string' &&
        typeof error.message === 'string' &&
        (body.request_id === undefined || typeof body.request_id === 'string')
      )
    }
    case 'fastapi': {
      const detail = body.detail
      return typeof detail === 'string' || (Array.isArray(detail) && detail.every(isObject))
    }
  }
}

/** Errors Node's layer answers before any route is known: always OpenAI-shaped, and the connection closes. */
const TRANSPORT_STATUSES = new Set([400, 405, 408, 417, 429, 431])

/** A redirect a browser follows within this site: a path, not `//host` or `/\host` (which browsers read as another host). */
const SAME_SITE_LOCATION = /^\/(?![/\\])/

/** Why this reply breaks the property, or null when it is fine. */
export function problemWith(
  res: ParsedResponse,
  method: string,
  shape: ErrorShape,
  secrets: readonly string[],
): string | null {
  const text = res.body.toString('utf8')
  if (res.status >= 500) return `status ${res.status}: ${text.slice(0, 200)}`
  for (const [pattern, what] of LEAKS) if (pattern.test(text)) return `the reply holds ${what}`
  for (const secret of secrets) if (secret.length >= 8 && text.includes(secret)) return 'the reply holds a secret'
  const headerText = Object.entries(res.headers)
    .map(([n, v]) => `${n}: ${v}`)
    .join('\n')
  for (const [pattern, what] of LEAKS) if (pattern.test(headerText)) return `a header holds ${what}`
  if (shape === 'html' && res.status >= 300 && res.status < 400) {
    const location = res.headers.location
    if (location === undefined) return `a ${res.status} without a Location`
    if (!SAME_SITE_LOCATION.test(location))
      return `a ${res.status} to another site: ${JSON.stringify(location.slice(0, 120))}`
    return null
  }
  if (res.status < 400 && shape === 'anthropic' && method !== 'HEAD') return anthropicSuccessProblem(res, text)
  if (res.status < 400) {
    const type = res.headers['content-type'] ?? ''
    if (method !== 'HEAD' && res.status !== 204 && /json/.test(type)) {
      try {
        JSON.parse(text)
      } catch {
        return 'a success whose JSON body does not parse'
      }
    }
    return null
  }
  if (method === 'HEAD') return null
  if (shape === 'html' && /^text\/html\b/i.test(res.headers['content-type'] ?? '')) return null
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  if (TRANSPORT_STATUSES.has(res.status) && res.closes && matchesShape('openai', body)) return null
  if (shape === 'html')
    return `a ${res.status} that is not an HTML page (${res.headers['content-type'] ?? 'no content-type'}): ${JSON.stringify(text.slice(0, 120))}`
  if (body === undefined) return `a ${res.status} whose body is not JSON: ${JSON.stringify(text.slice(0, 80))}`
  if (matchesShape(shape, body)) return null
  return `a ${res.status} not in the ${shape} error shape: ${text.slice(0, 120)}`
}

/** Anthropic's event types: a stream with any other, or not framed by message_start and message_stop (or an error), is not one. */
const ANTHROPIC_EVENTS = new Set([
  'message_start',
  'content_block_start',
  'content_block_delta',
  'content_block_stop',
  'message_delta',
  'message_stop',
  'ping',
  'error',
])

/** What is wrong with a success on an Anthropic route: a Message, a stream of its events, a token count or a stored request's 202. */
function anthropicSuccessProblem(res: ParsedResponse, text: string): string | null {
  const type = res.headers['content-type'] ?? ''
  if (/^text\/event-stream\b/i.test(type)) {
    const events = [...text.matchAll(/^event: (.*)$/gm)].map((m) => m[1] ?? '')
    const odd = events.find((e) => !ANTHROPIC_EVENTS.has(e))
    if (odd !== undefined) return `a stream with an event Anthropic has not: ${JSON.stringify(odd.slice(0, 40))}`
    if (events[0] !== 'message_start' && events[0] !== 'error') return 'a stream that does not begin with message_start'
    const last = events.at(-1)
    if (last !== 'message_stop' && last !== 'error') return 'a stream that does not end with message_stop or an error'
    if (/^data: \[DONE\]/m.test(text) || /"object":"chat\.completion/.test(text)) return "a stream in OpenAI's shape"
    return null
  }
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return `a ${res.status} whose body is not JSON: ${JSON.stringify(text.slice(0, 80))}`
  }
  if (!isObject(body)) return `a ${res.status} that is not an object`
  if (res.status === 202) return body.object === 'queue.request' ? null : 'a 202 that is not a stored request'
  if (typeof body.input_tokens === 'number') return null
  if (body.type === 'message' && Array.isArray(body.content) && isObject(body.usage)) return null
  return `a ${res.status} that is not an Anthropic message: ${text.slice(0, 120)}`
}

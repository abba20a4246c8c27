// The property every reply must have: well-formed HTTP; a success, or an error in the
// contract's shape for its target; never a 5xx caused by the input; never a stack trace,
// an internal path or a secret.
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

export function matchesShape(shape: ErrorShape, body: unknown): boolean {
  if (!isObject(body)) return false
  switch (shape) {
    case 'openai': {
      const error = body.error
      return isObject(error) && typeof error.message === 'string' && typeof error.type === 'string' &&
        'param' in error && (error.param === null || typeof error.param === 'string') &&
        'code' in error && (error.code === null || typeof error.code === 'string')
    }
    case 'fastapi': {
      const detail = body.detail
      return typeof detail === 'string' || (Array.isArray(detail) && detail.every(isObject))
    }
  }
}

/** Errors Node's layer answers before any route is known: always OpenAI-shaped, and the connection closes. */
const TRANSPORT_STATUSES = new Set([400, 405, 408, 417, 429, 431])

/** Why this reply breaks the property, or null when it is fine. */
export function problemWith(res: ParsedResponse, method: string, shape: ErrorShape, secrets: readonly string[]): string | null {
  const text = res.body.toString('utf8')
  if (res.status >= 500) return `status ${res.status}: ${text.slice(0, 200)}`
  for (const [pattern, what] of LEAKS) if (pattern.test(text)) return `the reply holds ${what}`
  for (const secret of secrets) if (secret.length >= 8 && text.includes(secret)) return 'the reply holds a secret'
  const headerText = Object.entries(res.headers).map(([n, v]) => `${n}: ${v}`).join('\n')
  for (const [pattern, what] of LEAKS) if (pattern.test(headerText)) return `a header holds ${what}`
  if (res.status < 400) {
    const type = res.headers['content-type'] ?? ''
    if (method !== 'HEAD' && res.status !== 204 && /json/.test(type)) {
      try { JSON.parse(text) } catch { return 'a success whose JSON body does not parse' }
    }
    return null
  }
  if (method === 'HEAD') return null
  let body: unknown
  try { body = JSON.parse(text) } catch { return `a ${res.status} whose body is not JSON: ${JSON.stringify(text.slice(0, 80))}` }
  if (matchesShape(shape, body)) return null
  if (TRANSPORT_STATUSES.has(res.status) && res.closes && matchesShape('openai', body)) return null
  return `a ${res.status} not in the ${shape} error shape: ${text.slice(0, 120)}`
}

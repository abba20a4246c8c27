// A chat tool call's `arguments` (a JSON string) as the object the Messages API and Converse
// take as a tool use's input: the anthropic and bedrock translators share it.
import { gatewayError, type GatewayError } from '../errors.ts'
import { isJsonObject, type JsonObject } from '../json.ts'

const invalid = (param: string, what: string): GatewayError =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

/** `args` at `at` as a JSON object (absent or empty: `{}`), or the caller's invalid_body naming it. */
export function toolInputOf(args: unknown, at: string): JsonObject {
  if (args === undefined || args === null || args === '') return {}
  if (typeof args !== 'string') throw invalid(at, 'Input should be a JSON string')
  let parsed: unknown
  try {
    parsed = JSON.parse(args)
  } catch {
    throw invalid(at, 'Input should be a JSON object')
  }
  if (!isJsonObject(parsed)) throw invalid(at, 'Input should be a JSON object')
  return parsed
}

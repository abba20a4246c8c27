// Refusals in OpenAI's error shape. Handlers throw a MockError where they find a problem
// and index.ts turns it into the response, so each handler reads top to bottom.
import type { UpstreamResponse } from '../port.ts'
import { jsonResponse } from './reply.ts'

export class MockError extends Error {
  override readonly name = 'MockError'
  readonly status: number
  readonly param: string | null
  readonly code: string | null

  constructor(status: number, message: string, param: string | null = null, code: string | null = null) {
    super(message)
    this.status = status
    this.param = param
    this.code = code
  }
}

export function invalidRequest(
  message: string,
  param: string | null,
  code: string | null = 'invalid_value',
): MockError {
  return new MockError(400, message, param, code)
}

export function missingParameter(param: string): MockError {
  return new MockError(400, `Missing required parameter: '${param}'.`, param, 'missing_required_parameter')
}

export function notFound(message: string, param: string | null = null): MockError {
  return new MockError(404, message, param, null)
}

/** A path under a known endpoint that the mock has no route for. */
export function unknownUrl(): MockError {
  return new MockError(404, 'Unknown request URL.', null, 'unknown_url')
}

export function errorResponse(error: MockError): UpstreamResponse {
  return jsonResponse(error.status, {
    error: { message: error.message, type: 'invalid_request_error', param: error.param, code: error.code },
  })
}

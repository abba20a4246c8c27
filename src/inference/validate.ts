// A request's body and query against its endpoint's schema (request-schemas.ts): the fields
// the gateway reads must be there and of the right type, /v1's bodies are checked whole;
// everything a schema does not name is passed through untouched for the backend to judge.
import { UPLOADED_PART } from '../api/common.ts'
import { describeIssues } from '../api/issues.ts'
import type { Endpoint } from '../config/schema.ts'
import { ERRORS, gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import { FORMS, JSON_BODIES, QUERIES } from './request-schemas.ts'
import type { z } from 'zod'

const missing = (param: string, what: string): Error =>
  gatewayError('missing_field', { message: `Missing required parameter: '${param}' (${what}).`, param })
const invalid = (param: string, what: string): Error =>
  gatewayError('invalid_body', { message: `Invalid type for '${param}': expected ${what}.`, param })

/** Form fields the gateway itself reads. */
const GATEWAY_FIELDS = ['model', 'stream'] as const

/** The model the body names, after checking that it names one. */
export function modelOf(body: RequestBody): string {
  const value = body.kind === 'json' ? body.value.model : body.kind === 'multipart' ? body.fields.model : undefined
  if (value === undefined || value === null || value === '') throw missing('model', 'a string')
  if (typeof value !== 'string' || value.length > 256) throw invalid('model', 'a string of at most 256 characters')
  return value
}

function check(schema: z.ZodType | undefined, input: unknown): void {
  if (schema === undefined) return
  const result = schema.safeParse(input)
  if (result.success) return
  const problem = describeIssues(result.error, input)
  throw gatewayError(problem.kind === 'missing' ? 'missing_field' : 'invalid_body', {
    message: problem.message,
    param: problem.param,
  })
}

/** A multipart form as its schema sees it: the text fields, and a marker for each file part. */
function formOf(body: Extract<RequestBody, { kind: 'multipart' }>): Record<string, unknown> {
  const form: Record<string, unknown> = { ...body.fields }
  for (const file of body.files) form[file.field] = UPLOADED_PART
  return form
}

export function validateBody(endpoint: Endpoint, body: RequestBody, query?: URLSearchParams): void {
  if (body.kind === 'multipart') {
    // The gateway reads the last value and forwards the form as it came: an upstream that
    // took the first could run one model while the call is charged to another.
    for (const field of GATEWAY_FIELDS) {
      if (body.repeatedFields?.includes(field))
        throw gatewayError('invalid_body', { message: `Form field '${field}' is given more than once.`, param: field })
    }
  }
  if (body.kind === 'json') check(JSON_BODIES[endpoint], body.value)
  if (body.kind === 'json') refuseDeferred(endpoint, body.value)
  if (body.kind === 'multipart') check(FORMS[endpoint], formOf(body))
  if (query !== undefined && query.size > 0) check(QUERIES[endpoint], Object.fromEntries(query))
}

/**
 * Endpoints whose body can ask the upstream to go on generating after it has answered, and
 * the member that asks. Such work is never in the reply the gateway meters, so it would be
 * charged to no budget and no limit: refused, before anything reaches an upstream.
 */
const DEFERS: Partial<Readonly<Record<Endpoint, string>>> = { responses: 'background' }

function refuseDeferred(endpoint: Endpoint, value: Readonly<Record<string, unknown>>): void {
  const member = DEFERS[endpoint]
  if (member !== undefined && value[member] === true) {
    throw gatewayError('background_not_metered', {
      message: `${ERRORS.background_not_metered.message} Send it without '${member}' (with 'stream: true' to see the reply as it comes), or for long work POST /queue/chat/completions with the header 'Prefer: respond-async' and read the result at /queue/requests/{id}.`,
      param: member,
    })
  }
}

// Reading request parameters the way OpenAI checks them: a missing required field, a
// wrong type and an out-of-range value each get their own message and code. Messages
// name the parameter but never echo the value, so nothing the client sent is reflected.
import type { z } from 'zod'
import { describeIssues } from '../../api/issues.ts'
import type { MultipartBody } from '../../http/body.ts'
import type { UpstreamRequest } from '../port.ts'
import { invalidRequest, missingParameter, notFound } from './errors.ts'

type Source = Readonly<Record<string, unknown>>

export function jsonBody(request: UpstreamRequest): Record<string, unknown> {
  if (request.body.kind !== 'json') throw invalidRequest('This endpoint expects a JSON body.', null, 'invalid_body')
  return request.body.value
}

/** A JSON body checked against one of the API's schemas (src/api/), refused the way OpenAI does. */
export function parsedBody<S extends z.ZodType>(request: UpstreamRequest, schema: S): z.output<S> {
  return parsed(schema, jsonBody(request))
}

/** Query parameters (or any record) checked against a schema. */
export function parsed<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input)
  if (result.success) return result.data
  const problem = describeIssues(result.error, input)
  if (problem.kind === 'missing' && problem.param !== null) throw missingParameter(problem.param)
  throw invalidRequest(problem.message, problem.param, problem.kind === 'type' ? 'invalid_type' : 'invalid_value')
}

export function formBody(request: UpstreamRequest): MultipartBody {
  if (request.body.kind !== 'multipart')
    throw invalidRequest('This endpoint expects a multipart/form-data body.', null, 'invalid_body')
  return request.body
}

/** The model to echo: the body's (already rewritten by the gateway), else the routed one. */
export function modelOf(values: Source, request: UpstreamRequest): string {
  const model = optionalString(values, 'model') ?? request.model ?? undefined
  if (model === undefined || model === '') throw missingParameter('model')
  return model
}

function isAbsent(value: unknown): value is undefined | null {
  return value === undefined || value === null
}

function typeName(value: unknown): string {
  if (Array.isArray(value)) return 'an array'
  if (value === null) return 'null'
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}

function wrongType(name: string, expected: string, value: unknown): Error {
  return invalidRequest(
    `Invalid type for '${name}': expected ${expected}, but got ${typeName(value)} instead.`,
    name,
    'invalid_type',
  )
}

export function optionalString(values: Source, name: string): string | undefined {
  const value = values[name]
  if (isAbsent(value)) return undefined
  if (typeof value !== 'string') throw wrongType(name, 'a string', value)
  return value
}

export function requiredString(values: Source, name: string): string {
  const value = optionalString(values, name)
  if (value === undefined) throw missingParameter(name)
  if (value === '')
    throw invalidRequest(
      `Invalid '${name}': empty string. Expected a string with minimum length 1.`,
      name,
      'empty_string',
    )
  return value
}

export interface IntegerRange {
  readonly min: number
  readonly max: number
}

/** Integers from JSON, or from the text of a form field or query parameter. */
export function optionalInteger(values: Source, name: string, range: IntegerRange): number | undefined {
  const raw = values[name]
  if (isAbsent(raw)) return undefined
  const value = typeof raw === 'string' && /^-?\d{1,15}$/.test(raw) ? Number(raw) : raw
  if (typeof value !== 'number' || !Number.isInteger(value)) throw wrongType(name, 'an integer', raw)
  if (value < range.min) {
    throw invalidRequest(
      `Invalid '${name}': integer below minimum value. Expected a value >= ${range.min}.`,
      name,
      'integer_below_min_value',
    )
  }
  if (value > range.max) {
    throw invalidRequest(
      `Invalid '${name}': integer above maximum value. Expected a value <= ${range.max}.`,
      name,
      'integer_above_max_value',
    )
  }
  return value
}

/** Booleans from JSON, or "true"/"false" from a form field. */
export function optionalBoolean(values: Source, name: string): boolean | undefined {
  const raw = values[name]
  if (isAbsent(raw)) return undefined
  if (raw === 'true' || raw === 'false') return raw === 'true'
  if (typeof raw !== 'boolean') throw wrongType(name, 'a boolean', raw)
  return raw
}

export function optionalEnum<T extends string>(values: Source, name: string, allowed: readonly T[]): T | undefined {
  const value = optionalString(values, name)
  if (value === undefined) return undefined
  if (!(allowed as readonly string[]).includes(value)) {
    throw invalidRequest(
      `Invalid value for '${name}'. Supported values are: ${allowed.map((a) => `'${a}'`).join(', ')}.`,
      name,
    )
  }
  return value as T
}

export function optionalObject(values: Source, name: string): Source | undefined {
  const value = values[name]
  if (isAbsent(value)) return undefined
  if (typeof value !== 'object' || Array.isArray(value)) throw wrongType(name, 'an object', value)
  return value as Source
}

/** The query string of a GET path as a plain record, for the same readers. */
export function queryOf(path: string): { readonly pathname: string; readonly query: Source } {
  // Concatenated, not resolved: a path starting with "//" must not become a host.
  const url = new URL(`http://mock.invalid${path}`)
  return { pathname: url.pathname, query: Object.fromEntries(url.searchParams) }
}

/** The segments of a path after the leading slash, percent-decoded; undefined if malformed. */
export function segmentsOf(pathname: string): string[] | undefined {
  try {
    return pathname
      .split('/')
      .slice(1)
      .map((segment) => decodeURIComponent(segment))
  } catch {
    return undefined
  }
}

/** An id fit to quote back in a message; anything odd is not repeated. */
export function quotableId(id: string): string {
  return /^[A-Za-z0-9_.:-]{1,96}$/.test(id) ? id : '(the given id)'
}

/** The object a path's id names, or OpenAI's 404 for it: `No such <what>: <id>`, on `param`. */
export function objectById<T>(objects: ReadonlyMap<string, T>, id: string, what: string, param: string): T {
  const found = objects.get(id)
  if (found === undefined) throw notFound(`No such ${what}: ${quotableId(id)}`, param)
  return found
}

// A zod validation failure in OpenAI's terms: which parameter, and whether it is missing,
// of the wrong type or of a wrong value. Messages name the parameter but never repeat a
// value, and a client-chosen key is named only when it is plain.
import type { z } from 'zod'

export interface Problem {
  readonly kind: 'missing' | 'type' | 'value'
  /** OpenAI's style: `messages[0].role`; null for the body as a whole. */
  readonly param: string | null
  readonly message: string
}

const PLAIN = /^[A-Za-z0-9_.[\]-]{1,64}$/

export function paramOf(path: readonly PropertyKey[]): string | null {
  let param = ''
  for (const segment of path) {
    if (typeof segment === 'number') param += `[${segment}]`
    else {
      const name = String(segment)
      param += `${param === '' ? '' : '.'}${PLAIN.test(name) ? name : '(key)'}`
    }
  }
  return param === '' ? null : param
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input
  for (const segment of path) {
    if (typeof value !== 'object' || value === null) return undefined
    value = (value as Record<PropertyKey, unknown>)[segment]
  }
  return value
}

/** The first issue of a failed parse of `input`, described. */
export function describeIssues(error: z.ZodError, input: unknown): Problem {
  const issue = error.issues[0]
  if (issue === undefined) return { kind: 'value', param: null, message: 'The request body is invalid.' }
  const param = paramOf(issue.path)
  const name = param ?? 'body'
  if (
    valueAt(input, issue.path) === undefined &&
    (issue.code === 'invalid_type' || issue.code === 'custom' || issue.code === 'invalid_union')
  ) {
    return { kind: 'missing', param, message: `Missing required parameter: '${name}'.` }
  }
  switch (issue.code) {
    case 'invalid_type':
      return {
        kind: 'type',
        param,
        message: `Invalid type for '${name}': expected ${issue.expected === 'int' ? 'an integer' : issue.expected}.`,
      }
    case 'invalid_union':
      return { kind: 'type', param, message: `Invalid type for '${name}'.` }
    case 'unrecognized_keys': {
      const keys = issue.keys.map((k) => (PLAIN.test(k) ? k : '(key)')).join(', ')
      return { kind: 'value', param, message: `Unrecognized parameter(s) in '${name}': ${keys}.` }
    }
    case 'too_small':
    case 'too_big':
    case 'invalid_value':
    case 'invalid_format':
    case 'not_multiple_of':
    case 'custom':
      // zod's own wording of these names limits and options, never the value given.
      return { kind: 'value', param, message: `Invalid '${name}': ${issue.message}.` }
    default:
      return { kind: 'value', param, message: `Invalid '${name}'.` }
  }
}

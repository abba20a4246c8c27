// Query strings read strictly: every route that takes parameters (admin lists, usage
// reports, the queue's stored requests) refuses what its schema does not name, so that a
// typo is a 400 rather than a filter silently ignored.
import type { z } from 'zod'
import { gatewayError } from '../errors.ts'

/**
 * Query parameters against a strict schema. An unknown or repeated parameter is a 400:
 * a typo like `?ownr=x` must not quietly list every key.
 */
export function parseQuery<S extends z.ZodType>(schema: S, query: URLSearchParams): z.infer<S> {
  const values: Record<string, string> = {}
  for (const [name, value] of query) {
    if (Object.hasOwn(values, name))
      throw gatewayError('invalid_body', {
        message: `Query parameter ${printable(name)} is given more than once.`,
        param: printable(name),
      })
    values[name] = value
  }
  const parsed = schema.safeParse(values)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  if (issue?.code === 'unrecognized_keys') {
    throw gatewayError('invalid_body', {
      message: `Unknown query parameter(s): ${issue.keys.map(printable).join(', ')}.`,
    })
  }
  const param = issue?.path.map(String).join('.') || null
  throw gatewayError('invalid_body', {
    message: `Invalid query parameter ${param ?? ''}: ${issue?.message ?? 'invalid value'}.`,
    param,
  })
}

/** Client-supplied names are echoed only when plain. */
export function printable(value: string): string {
  return /^[\w.-]{1,64}$/.test(value) ? value : '(unprintable)'
}

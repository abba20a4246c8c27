// What the log never shows. Every path pino's `redact` knows costs on every line: a wildcard
// path ('*.authorization') runs its redactor over each field of each line, numbers and
// strings included, cloning and parsing its paths each time (12.7 KB allocated per request
// on the access line, the largest allocator of a call in a heap profile). So the wildcards
// are checked here, once per field and without allocating when nothing is found; the
// literal paths stay with pino, which only looks at the fields they name.

export const CENSOR = '[redacted]'

/** Paths for pino's `redact`: each names a field, so a line without that field pays nothing. */
export const REDACTED_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["api-key"]',
  'headers.authorization',
  'headers.cookie',
  'headers["api-key"]',
  'key',
  'secret',
  'token',
  'password',
]

/** '*.authorization' and '*["api-key"]': these members of any field's object. */
const IN_ANY_FIELD = ['authorization', 'api-key'] as const

/**
 * The line's fields (or a child logger's bindings) with IN_ANY_FIELD censored in each field
 * that is an object; the object itself when there is nothing to censor.
 */
export function censorFields(fields: Record<string, unknown>): Record<string, unknown> {
  let out = fields
  for (const name in fields) {
    const value = fields[name]
    if (typeof value !== 'object' || value === null) continue
    let censored: Record<string, unknown> | null = null
    for (const member of IN_ANY_FIELD) {
      if (!(member in value)) continue
      censored ??= value instanceof Error ? errorFields(value) : { ...value }
      censored[member] = CENSOR
    }
    if (censored === null) continue
    if (out === fields) out = { ...fields }
    out[name] = censored
  }
  return out
}

/**
 * A copy of an error that is still one to pino's err serializer (same prototype, so the
 * same type), with the fields it reads made own: its message, stack and cause.
 */
function errorFields(error: Error): Record<string, unknown> {
  const copy = Object.create(Object.getPrototypeOf(error) as object) as Record<string, unknown>
  Object.assign(copy, error, { message: error.message, stack: error.stack })
  if (error.cause !== undefined) copy.cause = error.cause
  return copy
}

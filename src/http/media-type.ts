// A Content-Type header's media type, and whether it is JSON: one reading for request
// bodies, upstream replies and stored results alike.

/** "application/json; charset=utf-8" → "application/json"; "" when there is none. */
export function mediaType(contentType: string | undefined): string {
  return (contentType?.split(';', 1)[0] ?? '').trim().toLowerCase()
}

/** application/json, or a structured +json type (application/problem+json). */
export function isJsonType(type: string): boolean {
  return type === 'application/json' || type.endsWith('+json')
}

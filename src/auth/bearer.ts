import type { IncomingMessage } from 'node:http'

/** The token of an "Authorization: Bearer <token>" header, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  const header = req.headers.authorization
  if (typeof header !== 'string') return null
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
  return match?.[1] ?? null
}

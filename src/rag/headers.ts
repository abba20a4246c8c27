// The headers a backend receives and a client gets back. Towards the backend: the client's
// own identity claims (in any spelling a backend could fold into the gateway's: case,
// `_` for `-`), credentials and cookies never pass; the gateway states who is calling in
// its identity headers. Hop-by-hop headers (RFC 9110 §7.6.1) stay on their hop.
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Identity } from '../auth/identity.ts'
import type { RagConfig } from '../config/schema.ts'
import { HOP_BY_HOP_HEADERS } from '../http/hop-by-hop.ts'

// This room relays requests too: proxy-authorization and http2-settings are request-side hop-by-hop headers.
const HOP_BY_HOP = new Set([...HOP_BY_HOP_HEADERS, 'proxy-authorization', 'http2-settings'])

/** Never passed on towards a backend: the gateway sets its own, or they carry credentials. */
// `api-key` and `x-api-key` too: a client may send its Tollgate API key that way (the
// API accepts `api-key`), and a RAG backend must never see one.
const NOT_FORWARDED = new Set([
  'host',
  'authorization',
  'api-key',
  'x-api-key',
  'expect',
  'forwarded',
  'x-real-ip',
  'x-request-id',
])

/**
 * Whole families the gateway speaks for: its identity headers (x-tollgate-*, whatever the
 * configured names) and the proxy's account of the client (x-forwarded-*: for, proto,
 * host, prefix, and the user, email and groups headers of auth proxies).
 */
const OWNED_PREFIXES = ['x-tollgate-', 'x-forwarded-']

/**
 * A header name as a backend may read it. CGI and WSGI (and the ASGI servers that mimic
 * them, and nginx with underscores_in_headers) fold `X-Tollgate-User-Id` and
 * `x_tollgate_user_id` into one HTTP_X_TOLLGATE_USER_ID, and a framework that looks the
 * header up may find the client's copy beside the gateway's: a name is stripped if its
 * folded form is one the gateway owns.
 */
export const foldedHeaderName = (name: string): string => name.toLowerCase().replaceAll('_', '-')

/** Header names listed in Connection: hop-by-hop too. */
function connectionListed(headers: IncomingHttpHeaders): Set<string> {
  const value = headers.connection
  return new Set(
    (typeof value === 'string' ? value : '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  )
}

/** A header value safe for any backend: each item percent-encoded (UTF-8), items joined by commas. */
export function identityValue(items: string | readonly string[]): string {
  return (typeof items === 'string' ? [items] : items).map((s) => encodeURIComponent(s)).join(',')
}

export interface ForwardContext {
  readonly requestId: string
  /** The client's address as the gateway sees it. */
  readonly clientAddress: string
  /** How the client reached the gateway (http, or https over TLS or a trusted proxy). */
  readonly scheme: 'http' | 'https'
  /** `/<service>` as the client called it: FastAPI's root_path, for links in /docs and /redoc. */
  readonly prefix: string
}

export function backendRequestHeaders(
  req: IncomingMessage,
  identity: Identity | null,
  rag: RagConfig,
  forward: ForwardContext,
): OutgoingHttpHeaders {
  const names = rag.identityHeaders
  const stripped = new Set<string>(
    [
      ...HOP_BY_HOP,
      ...NOT_FORWARDED,
      ...connectionListed(req.headers),
      ...Object.values(names),
      ...rag.stripHeaders,
    ].map(foldedHeaderName),
  )
  if (!rag.forwardCookies) stripped.add('cookie')
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue
    const folded = foldedHeaderName(name)
    if (stripped.has(folded) || OWNED_PREFIXES.some((prefix) => folded.startsWith(prefix))) continue
    out[name] = value
  }
  // A chunked body stays chunked: Node would not frame a DELETE's body by itself.
  if (req.headers['content-length'] === undefined && /\bchunked\b/i.test(req.headers['transfer-encoding'] ?? ''))
    out['transfer-encoding'] = 'chunked'
  out['x-request-id'] = forward.requestId
  out['x-forwarded-for'] = forward.clientAddress
  out['x-forwarded-proto'] = forward.scheme
  out['x-forwarded-prefix'] = forward.prefix
  if (typeof req.headers.host === 'string') out['x-forwarded-host'] = req.headers.host
  if (identity !== null) {
    out[names.userId] = identityValue(identity.userId)
    out[names.username] = identityValue(identity.username)
    out[names.roles] = identityValue(identity.roles)
    out[names.groups] = identityValue(identity.groups)
    out[names.tenant] = identityValue(identity.tenant)
    if (rag.forwardToken) out.authorization = `Bearer ${identity.token}`
  }
  return out
}

/** The backend's reply headers, less those of its hop (Node frames the reply to the client itself). */
export function clientResponseHeaders(upstream: IncomingMessage): OutgoingHttpHeaders {
  const listed = connectionListed(upstream.headers)
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(upstream.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue
    out[name] = value
  }
  return out
}

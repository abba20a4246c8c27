// Which upstream response headers the client sees. Headers the gateway already set on
// the reply (x-request-id, x-ratelimit-*) win; headers that describe the upstream's
// connection, account or host never pass.
import { HOP_BY_HOP_HEADERS } from '../http/hop-by-hop.ts'
import type { ReplySink } from './reply-sink.ts'

const NEVER = new Set([
  // Hop-by-hop, and the length: the relay frames the body it actually sends.
  ...HOP_BY_HOP_HEADERS,
  'content-length',
  // The upstream's cookies, host policies and identity belong to its domain, not ours.
  'set-cookie',
  'alt-svc',
  'strict-transport-security',
  'server',
  // The gateway's upstream account: not the client's business.
  'openai-organization',
  'openai-project',
])

// Only true of the bytes the upstream sent; wrong once the body is rewritten.
const DESCRIBES_BYTES = new Set(['etag', 'content-md5', 'digest', 'content-digest', 'repr-digest'])

export function copyUpstreamHeaders(
  res: Pick<ReplySink, 'hasHeader' | 'setHeader'>,
  headers: Readonly<Record<string, string>>,
  rewritten: boolean,
): void {
  for (const [name, value] of Object.entries(headers)) {
    if (NEVER.has(name) || res.hasHeader(name)) continue
    // The upstream's limits are the gateway's account limits; the client's own come from the gateway.
    if (name.startsWith('x-ratelimit-')) continue
    if (rewritten && DESCRIBES_BYTES.has(name)) continue
    res.setHeader(name, value)
  }
}

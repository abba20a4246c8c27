// Which upstream response headers the client sees: only those on the list below, the one
// place it is kept (docs/backends.md, "What a client sees", says the same). Everything else
// an upstream sends (its server and framework, its proxy's and cloud's vendor headers, its
// cookies and host policies, its account) describes the gateway's upstream, not the
// client's call, and is dropped. Headers the gateway already set on the reply
// (x-request-id, its own x-ratelimit-*) win.
import type { ReplySink } from './reply-sink.ts'

/** What the body is, and the headers an OpenAI SDK reads (its retries: retry-after, -ms, x-should-retry). */
export const UPSTREAM_HEADERS_ALLOWED: ReadonlySet<string> = new Set([
  'content-type',
  'content-encoding',
  'content-disposition',
  'content-language',
  'cache-control',
  'etag',
  'last-modified',
  'content-md5',
  'digest',
  'content-digest',
  'repr-digest',
  'retry-after',
  'retry-after-ms',
  'x-should-retry',
  'x-request-id',
])

/** OpenAI's own (openai-processing-ms, openai-version, openai-model), which its SDKs show to callers. */
const ALLOWED_PREFIX = 'openai-'

/** ...except the gateway's upstream account, which is not the client's business. */
const ACCOUNT = new Set(['openai-organization', 'openai-project'])

// Only true of the bytes the upstream sent; wrong once the body is rewritten.
const DESCRIBES_BYTES = new Set(['etag', 'content-md5', 'digest', 'content-digest', 'repr-digest'])

/** Whether an upstream response header (lower-case name) may reach the client. */
export function upstreamHeaderAllowed(name: string): boolean {
  return UPSTREAM_HEADERS_ALLOWED.has(name) || (name.startsWith(ALLOWED_PREFIX) && !ACCOUNT.has(name))
}

export function copyUpstreamHeaders(
  res: Pick<ReplySink, 'hasHeader' | 'setHeader'>,
  headers: Readonly<Record<string, string>>,
  rewritten: boolean,
): void {
  for (const [name, value] of Object.entries(headers)) {
    if (!upstreamHeaderAllowed(name) || res.hasHeader(name)) continue
    if (rewritten && DESCRIBES_BYTES.has(name)) continue
    res.setHeader(name, value)
  }
}

// Where a client presents its API key: `Authorization: Bearer <key>`, as OpenAI's SDKs send
// it, an `api-key` header, as Azure OpenAI's SDKs (and the provider's own examples: the
// fine-tuning guide's dataset validation, LlamaIndex's AzureOpenAI) send it, or an
// `x-api-key` header, as Anthropic's SDKs (and Claude Code with ANTHROPIC_API_KEY) send it.
//
// More than one at once is fine when they carry the same key. Two different keys are refused, not
// ranked: whichever one won, the other would be silently ignored, and a request that names
// two identities has no right answer (the refusal is a 401 like any failed authentication,
// so the auth throttle counts it, before either key is looked up: no oracle either way).
import type { IncomingMessage } from 'node:http'
import { bearerToken } from './bearer.ts'

export type PresentedKey =
  { readonly kind: 'none' } | { readonly kind: 'key'; readonly key: string } | { readonly kind: 'conflict' }

/** The value of the `api-key` (or `x-api-key`) header, or null when there is none (or it is blank). */
export function apiKeyHeader(req: IncomingMessage, name: 'api-key' | 'x-api-key' = 'api-key'): string | null {
  const value = req.headers[name]
  // Node joins a repeated header with ", ": such a value fails the key's format check.
  if (typeof value !== 'string') return null
  const trimmed = value.trim()
  return trimmed === '' ? null : trimmed
}

export function presentedKey(req: IncomingMessage): PresentedKey {
  const presented = [bearerToken(req), apiKeyHeader(req), apiKeyHeader(req, 'x-api-key')].filter((k) => k !== null)
  const key = presented[0]
  if (key === undefined) return { kind: 'none' }
  return presented.every((k) => k === key) ? { kind: 'key', key } : { kind: 'conflict' }
}

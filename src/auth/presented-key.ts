// Where a client presents its API key: `Authorization: Bearer <key>`, as OpenAI's SDKs send
// it, or an `api-key` header, as Azure OpenAI's SDKs (and the provider's own examples: the
// fine-tuning guide's dataset validation, LlamaIndex's AzureOpenAI) send it.
//
// Both at once are fine when they carry the same key. Two different keys are refused, not
// ranked: whichever one won, the other would be silently ignored, and a request that names
// two identities has no right answer (the refusal is a 401 like any failed authentication,
// so the auth throttle counts it, before either key is looked up: no oracle either way).
import type { IncomingMessage } from 'node:http'
import { bearerToken } from './bearer.ts'

export type PresentedKey =
  { readonly kind: 'none' } | { readonly kind: 'key'; readonly key: string } | { readonly kind: 'conflict' }

/** The value of the `api-key` header, or null when there is none (or it is blank). */
export function apiKeyHeader(req: IncomingMessage): string | null {
  const value = req.headers['api-key']
  // Node joins a repeated header with ", ": such a value fails the key's format check.
  if (typeof value !== 'string') return null
  const trimmed = value.trim()
  return trimmed === '' ? null : trimmed
}

export function presentedKey(req: IncomingMessage): PresentedKey {
  const bearer = bearerToken(req)
  const header = apiKeyHeader(req)
  if (bearer !== null && header !== null && bearer !== header) return { kind: 'conflict' }
  const key = bearer ?? header
  return key === null ? { kind: 'none' } : { kind: 'key', key }
}

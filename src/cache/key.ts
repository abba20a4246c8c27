// A reply's cache key: HMAC-SHA-256, under a secret of the gateway's, of the caller's
// isolation scope, the endpoint, the model and the body canonicalised (object members in
// code-point order at every depth, the fields that do not change the answer left out:
// key-fields.ts). The scope comes first and is length-prefixed with the rest, so no body
// can forge another scope's key; the HMAC keeps a key from revealing a prompt to anyone
// reading the store.
import { createHmac } from 'node:crypto'
import { answerFields, type CachedEndpoint } from './key-fields.ts'
import { canonical } from '../store/key-records.ts'

export interface KeyParts {
  /** `t:<tenant>`, `o:<owner>` or `k:<keyId>` (policy.ts scopeOf). */
  readonly scope: string
  readonly endpoint: CachedEndpoint
  readonly model: string
  readonly body: Record<string, unknown>
}

export function cacheKey(secret: string | Buffer, parts: KeyParts): string {
  const body = canonical(answerFields(parts.endpoint, parts.body))
  return macOf(secret, [parts.scope, parts.endpoint, parts.model, body])
}

/**
 * HMAC-SHA-256 of `parts`, each prefixed with its length in bytes so that none can run into
 * the next: the exact key's, and the semantic cache's partition (semantic-prompt.ts).
 */
export function macOf(secret: string | Buffer, parts: readonly string[]): string {
  const mac = createHmac('sha256', secret)
  for (const part of parts) {
    mac.update(`${Buffer.byteLength(part)}:`)
    mac.update(part)
  }
  return mac.digest('base64url')
}

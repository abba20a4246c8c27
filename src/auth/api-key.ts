// API key authentication: shape and checksum first (no store lookup for a typo), then
// the keyed hash against the key store, then status, expiry and rotation grace. The key
// comes as a Bearer token or in an `api-key` header (presented-key.ts).
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.ts'
import { malformedKeyReason, type KeyHasher } from '../keys/format.ts'
import { principalOf, type KeyRecord, type Principal } from '../keys/record.ts'
import { DEFAULT_KEY_CACHE_TTL_MS } from '../keys/cache.ts'
import { createHashMemo } from './hash-memo.ts'
import { presentedKey } from './presented-key.ts'

export interface KeyLookup {
  findByHash(hash: string): Promise<KeyRecord | null>
}

export interface ApiKeyAuthOptions {
  readonly lookup: KeyLookup
  readonly hash: KeyHasher
  readonly now?: () => number
  /** How long a presented key's hash is remembered (the key cache's TTL); 0: hashed every time. */
  readonly hashMemoMs?: number
}

const HASH_MEMO_ENTRIES = 10_000

export type ApiKeyAuthenticator = (req: IncomingMessage) => Promise<Principal>

export function createApiKeyAuthenticator(options: ApiKeyAuthOptions): ApiKeyAuthenticator {
  const now = options.now ?? Date.now
  const memo = createHashMemo(options.hashMemoMs ?? DEFAULT_KEY_CACHE_TTL_MS, HASH_MEMO_ENTRIES, now)
  return async (req) => {
    const presented = presentedKey(req)
    if (presented.kind === 'none') throw gatewayError('missing_api_key')
    if (presented.kind === 'conflict') {
      throw gatewayError('invalid_api_key', {
        message:
          'Two different API keys were sent, one as Authorization: Bearer and one in the api-key header. Send one.',
      })
    }
    const token = presented.key
    let hash = memo.get(token)
    if (hash === undefined) {
      // The message never contains the key, not even a part of it.
      const malformed = malformedKeyReason(token)
      if (malformed !== null)
        throw gatewayError('invalid_api_key', { message: `Incorrect API key provided. ${malformed}` })
      hash = options.hash(token)
      memo.set(token, hash)
    }
    const key = await options.lookup.findByHash(hash)
    if (!key) throw gatewayError('invalid_api_key')
    if (key.status === 'revoked') throw gatewayError('revoked_api_key')
    const at = now()
    if (key.expiresAt !== null && Date.parse(key.expiresAt) <= at) throw gatewayError('expired_api_key')
    if (hash !== key.hash) {
      // The previous secret of a rotated key: only while the grace lasts.
      const until = key.previousHashValidUntil === null ? 0 : Date.parse(key.previousHashValidUntil)
      if (hash !== key.previousHash || until <= at)
        throw gatewayError('invalid_api_key', { message: 'This API key was rotated and is no longer valid.' })
    }
    return principalOf(key)
  }
}

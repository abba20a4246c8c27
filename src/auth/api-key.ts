// API key authentication: shape and checksum first (no store lookup for a typo), then
// the keyed hash against the key store, then status, expiry and rotation grace. The key
// comes as a Bearer token or in an `api-key` or `x-api-key` header (presented-key.ts).
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.ts'
import { malformedKeyReason, type KeyHasher } from '../keys/format.ts'
import { principalOf, type KeyRecord, type Principal } from '../keys/record.ts'
import { presentedKey } from './presented-key.ts'

export interface KeyLookup {
  findByHash(hash: string): Promise<KeyRecord | null>
}

export interface ApiKeyAuthOptions {
  readonly lookup: KeyLookup
  readonly hash: KeyHasher
  readonly now?: () => number
}

export type ApiKeyAuthenticator = (req: IncomingMessage) => Promise<Principal>

/**
 * Keys that found their record, with their keyed hash: the HMAC (a function of the key and
 * the secret alone, so an entry is never stale) is computed once per key, not per call.
 * At most this many, the oldest out first; a key that finds nothing is never kept, so
 * guessed keys cannot push the real ones out.
 */
const HASHED_KEYS = 4096

export function createApiKeyAuthenticator(options: ApiKeyAuthOptions): ApiKeyAuthenticator {
  const now = options.now ?? Date.now
  const hashed = new Map<string, string>()
  return async (req) => {
    const presented = presentedKey(req)
    if (presented.kind === 'none') throw gatewayError('missing_api_key')
    if (presented.kind === 'conflict') {
      throw gatewayError('invalid_api_key', {
        message:
          'Two different API keys were sent (among Authorization: Bearer, the api-key header and the x-api-key header). Send one.',
      })
    }
    const token = presented.key
    let hash = hashed.get(token)
    if (hash === undefined) {
      // The message never contains the key, not even a part of it.
      const malformed = malformedKeyReason(token)
      if (malformed !== null)
        throw gatewayError('invalid_api_key', { message: `Incorrect API key provided. ${malformed}` })
      hash = options.hash(token)
    }
    const key = await options.lookup.findByHash(hash)
    if (!key) throw gatewayError('invalid_api_key')
    if (!hashed.has(token)) {
      if (hashed.size >= HASHED_KEYS) hashed.delete(hashed.keys().next().value as string)
      hashed.set(token, hash)
    }
    if (key.status === 'revoked') throw gatewayError('revoked_api_key')
    const at = now()
    if (key.expiresAt !== null && Date.parse(key.expiresAt) <= at)
      throw gatewayError('expired_api_key', {
        message: `This API key expired at ${key.expiresAt}. An administrator can extend it (expires_at) or issue a new one.`,
      })
    if (hash !== key.hash) {
      // The previous secret of a rotated key: only while the grace lasts.
      const until = key.previousHashValidUntil === null ? 0 : Date.parse(key.previousHashValidUntil)
      if (hash !== key.previousHash || until <= at)
        throw gatewayError('invalid_api_key', { message: 'This API key was rotated and is no longer valid.' })
    }
    return principalOf(key)
  }
}

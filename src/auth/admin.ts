// The admin credential, compared in constant time.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.ts'
import { bearerToken } from './bearer.ts'

export type AdminAuthenticator = (req: IncomingMessage) => void

const digest = (value: string): Buffer => createHash('sha256').update(value).digest()

/**
 * `token` undefined means the admin API is disabled. A function is asked on every call, so
 * a token replaced while the gateway runs (tollgate admin-token --reset) applies at once.
 */
export function createAdminAuthenticator(token: string | undefined | (() => string | undefined)): AdminAuthenticator {
  const current = typeof token === 'function' ? token : () => token
  let seen: string | undefined
  let expected: Buffer | null = null
  return (req) => {
    const now = current()
    if (now !== seen) {
      seen = now
      expected = now === undefined ? null : digest(now)
    }
    if (expected === null) throw gatewayError('admin_disabled')
    const given = bearerToken(req)
    // Hashing both sides gives equal lengths, so the comparison time says nothing.
    if (given === null || !timingSafeEqual(digest(given), expected)) throw gatewayError('admin_unauthorized')
  }
}

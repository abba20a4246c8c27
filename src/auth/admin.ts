// The admin credential, compared in constant time.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.ts'
import { bearerToken } from './bearer.ts'

export type AdminAuthenticator = (req: IncomingMessage) => void

const digest = (value: string): Buffer => createHash('sha256').update(value).digest()

/** `token` undefined means the admin API is disabled. */
export function createAdminAuthenticator(token: string | undefined): AdminAuthenticator {
  const expected = token === undefined ? null : digest(token)
  return (req) => {
    if (expected === null) throw gatewayError('admin_disabled')
    const given = bearerToken(req)
    // Hashing both sides gives equal lengths, so the comparison time says nothing.
    if (given === null || !timingSafeEqual(digest(given), expected)) throw gatewayError('admin_unauthorized')
  }
}

// How both adapters store accounts, sessions and signing keys, so they agree exactly.
import { isJsonObject } from '../json.ts'
import { canonical } from './key-records.ts'
import type { AccountRecord, SessionRecord, SigningKeyRecord } from './ports.ts'

const isString = (v: unknown): v is string => typeof v === 'string'
const isStringArray = (v: unknown): boolean => Array.isArray(v) && v.every(isString)

export const encodeRecord = (record: AccountRecord | SessionRecord | SigningKeyRecord): string => JSON.stringify(record)

/** Parses a stored account; throws if the stored text is not one. */
export function decodeAccount(text: string): AccountRecord {
  const v: unknown = JSON.parse(text)
  if (
    isJsonObject(v) &&
    isString(v.id) &&
    isString(v.username) &&
    isString(v.passwordHash) &&
    isStringArray(v.roles) &&
    isStringArray(v.groups) &&
    isString(v.tenant) &&
    typeof v.disabled === 'boolean' &&
    isString(v.sessionsValidFrom) &&
    isString(v.createdAt) &&
    isString(v.updatedAt)
  )
    return v as unknown as AccountRecord
  throw new TypeError('stored account is malformed')
}

export function decodeSession(text: string): SessionRecord {
  const v: unknown = JSON.parse(text)
  if (
    isJsonObject(v) &&
    isString(v.id) &&
    isString(v.userId) &&
    isString(v.username) &&
    isString(v.createdAt) &&
    isString(v.expiresAt) &&
    (v.revokedAt === null || isString(v.revokedAt))
  )
    return v as unknown as SessionRecord
  throw new TypeError('stored session is malformed')
}

export function decodeSigningKey(text: string): SigningKeyRecord {
  const v: unknown = JSON.parse(text)
  if (
    isJsonObject(v) &&
    isString(v.kid) &&
    v.alg === 'EdDSA' &&
    isJsonObject(v.publicJwk) &&
    Object.values(v.publicJwk).every(isString) &&
    isString(v.sealedPrivateKey) &&
    isString(v.createdAt) &&
    isString(v.expiresAt)
  )
    return v as unknown as SigningKeyRecord
  throw new TypeError('stored signing key is malformed')
}

/** Field for field, as stored (the order of an object's keys does not count). */
export const sameAccount = (a: AccountRecord, b: AccountRecord): boolean => canonical(a) === canonical(b)

export const compareAccounts = (a: AccountRecord, b: AccountRecord): number =>
  a.username < b.username ? -1 : a.username > b.username ? 1 : 0

/** A session past its expiry, or revoked, can no longer be refreshed. */
export const sessionEnded = (session: SessionRecord, now: Date): boolean =>
  session.revokedAt !== null || Date.parse(session.expiresAt) <= now.getTime()

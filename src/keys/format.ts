// The API key format: "tg1_" + 43 base62 characters of randomness (256 bits) + a
// 6-character base62 CRC32 checksum. The prefix lets secret scanners find leaked keys;
// the checksum refuses a mistyped key without a store lookup.
import { createHmac, randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'

export const KEY_PREFIX = 'tg1_'
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const BODY_LENGTH = 43
const CHECK_LENGTH = 6
const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECK_LENGTH}}$`)
/** How much of the key is kept for humans to recognise it. */
export const DISPLAY_LENGTH = KEY_PREFIX.length + 8

function base62(value: bigint, width: number): string {
  let out = ''
  for (let i = 0; i < width; i++) {
    out = ALPHABET[Number(value % 62n)] + out
    value /= 62n
  }
  return out
}

function checksum(body: string): string {
  return base62(BigInt(crc32(KEY_PREFIX + body)), CHECK_LENGTH)
}

export function generateKey(): string {
  const body = base62(BigInt('0x' + randomBytes(32).toString('hex')), BODY_LENGTH)
  return KEY_PREFIX + body + checksum(body)
}

/** True when the string has the key's shape and its checksum matches. */
export function isWellFormedKey(candidate: string): boolean {
  return malformedKeyReason(candidate) === null
}

/**
 * Why a string cannot be a key, for the 401 message, or null when it can be. It says what
 * is wrong with the shape, never what any stored key looks like.
 */
export function malformedKeyReason(candidate: string): string | null {
  if (!candidate.startsWith(KEY_PREFIX)) return `Tollgate API keys start with '${KEY_PREFIX}'.`
  if (!KEY_PATTERN.test(candidate)) {
    return `A Tollgate API key is '${KEY_PREFIX}' and ${BODY_LENGTH + CHECK_LENGTH} letters and digits; this one is not, so it may be truncated or have extra characters.`
  }
  const body = candidate.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH)
  if (candidate.slice(-CHECK_LENGTH) !== checksum(body))
    return 'Its checksum does not match: it looks mistyped or truncated. Copy it again from where it was issued.'
  return null
}

export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_LENGTH)
}

/** The keyed hash stored in place of the key. The secret comes from the environment. */
export type KeyHasher = (key: string) => string

export function createKeyHasher(secret: string): KeyHasher {
  return (key) => createHmac('sha256', secret).update(key).digest('hex')
}

// Password hashing: scrypt from node:crypto. A stored hash carries its own parameters,
// `scrypt$<log2 N>$<r>$<p>$<salt>$<key>` (base64url), so they can be raised later without
// breaking the hashes already stored.
//
// Parameters: N = 2^15, r = 8, p = 1, a 16-byte random salt, a 32-byte key. That is 32 MiB
// of memory and roughly 50-100 ms of one core per hash: slow enough that a stolen store
// costs an attacker dearly per guess, cheap enough for a login. (OWASP's floor for scrypt
// is N = 2^17 at 128 MiB; at 2^15 a burst of logins cannot take the gateway's memory. The
// hashes run on libuv's thread pool, never on the event loop.)
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

export const SCRYPT_LOG2_N = 15
export const SCRYPT_R = 8
export const SCRYPT_P = 1
const SALT_BYTES = 16
const KEY_BYTES = 32

function derive(password: string, salt: Buffer, log2N: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** log2N
  // Node refuses more than 32 MiB by default; allow what these parameters need, and a margin.
  const options: ScryptOptions = { N, r, p, maxmem: 128 * N * r * p + 4 * 1024 * 1024 }
  return new Promise((done, fail) => {
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, options, (err, key) => (err ? fail(err) : done(key)))
  })
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const key = await derive(password, salt, SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P)
  return ['scrypt', SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P, salt.toString('base64url'), key.toString('base64url')].join('$')
}

/** True when `password` matches the stored hash. A malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [log2N, r, p] = parts.slice(1, 4).map(Number)
  if (
    log2N === undefined ||
    r === undefined ||
    p === undefined ||
    ![log2N, r, p].every(Number.isInteger) ||
    log2N < 10 ||
    log2N > 20 ||
    r < 1 ||
    r > 32 ||
    p < 1 ||
    p > 16
  )
    return false
  const expected = Buffer.from(parts[5] ?? '', 'base64url')
  const key = await derive(password, Buffer.from(parts[4] ?? '', 'base64url'), log2N, r, p)
  return expected.length === key.length && timingSafeEqual(expected, key)
}

/**
 * A hash of a random password, made once per process: a login for a username that does not
 * exist is checked against it, so it takes as long as a wrong password for one that does.
 */
let dummy: Promise<string> | undefined
export function dummyPasswordHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(32).toString('base64url'))
  return dummy
}

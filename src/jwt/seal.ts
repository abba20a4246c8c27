// Private signing keys are kept in the store sealed: AES-256-GCM under a key derived (HKDF)
// from a secret every instance has (TOLLGATE_JWT_SECRET, else the key-hash secret). Someone
// who reads the store alone cannot sign tokens.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

const IV_BYTES = 12
const TAG_BYTES = 16

export interface Sealer {
  seal(plain: Buffer): string
  /** Throws if the text was not sealed with this secret (or was altered). */
  open(sealed: string): Buffer
}

export function createSealer(secret: string): Sealer {
  const key = Buffer.from(hkdfSync('sha256', secret, 'tollgate', 'jwt signing key seal v1', 32))
  return {
    seal(plain) {
      const iv = randomBytes(IV_BYTES)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      const body = Buffer.concat([cipher.update(plain), cipher.final()])
      return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')
    },
    open(sealed) {
      const bytes = Buffer.from(sealed, 'base64url')
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES))
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()])
    },
  }
}

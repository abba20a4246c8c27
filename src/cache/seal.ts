// Stored replies are encrypted at rest: AES-256-GCM under a key derived per scope (the
// tenant, owner or key the reply belongs to) with HKDF-SHA-256 from the gateway's secret,
// the entry's cache key bound in as associated data (an entry moved under another key
// does not open). Laid out as iv (12) | tag (16) | ciphertext.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

const SALT = 'tollgate response cache v1'
const KEYS_KEPT = 1024

export interface Sealer {
  seal(scope: string, key: string, plain: Buffer): Buffer
  /** undefined when the bytes do not open (another secret, tampered). */
  open(scope: string, key: string, sealed: Buffer): Buffer | undefined
}

export function createSealer(secret: string | Buffer): Sealer {
  // Derived keys are remembered (a semantic lookup opens up to thousands of one scope's vectors), a bounded few.
  const keys = new Map<string, Buffer>()
  const keyOf = (scope: string): Buffer => {
    const known = keys.get(scope)
    if (known !== undefined) return known
    const key = Buffer.from(hkdfSync('sha256', secret, SALT, `scope:${scope}`, 32))
    if (keys.size >= KEYS_KEPT) keys.delete(keys.keys().next().value as string)
    keys.set(scope, key)
    return key
  }
  return {
    seal(scope, key, plain) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', keyOf(scope), iv)
      cipher.setAAD(Buffer.from(key))
      const body = Buffer.concat([cipher.update(plain), cipher.final()])
      return Buffer.concat([iv, cipher.getAuthTag(), body])
    },
    open(scope, key, sealed) {
      if (sealed.length < 28) return undefined
      try {
        const decipher = createDecipheriv('aes-256-gcm', keyOf(scope), sealed.subarray(0, 12))
        decipher.setAAD(Buffer.from(key))
        decipher.setAuthTag(sealed.subarray(12, 28))
        return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()])
      } catch {
        return undefined
      }
    },
  }
}

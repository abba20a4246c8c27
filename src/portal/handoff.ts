// The secret a form made (a new key, a rotated one), handed from that POST to the page its
// 303 opens (post/redirect/get): reloading the page then re-sends nothing, and the secret is
// still shown exactly once. Between the two requests it is kept in the session store,
//   - sealed (AES-256-GCM) with a key derived from the session's cookie value, which the
//     store never holds (only its SHA-256): whoever reads the store cannot read the secret;
//   - bound to the session and the key (the store id and the sealing's associated data), so
//     neither another session nor another key's page can take it;
//   - taken once (the store's takeOnce), and gone after HANDOFF_SECONDS if nobody took it;
//   - never in a URL (the redirect names the key only).
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import type { PortalSessionStore } from '../store/portal-sessions.ts'
import { sameUserAs } from '../store/user-ids.ts'

/** Long enough for a slow redirect on a bad connection; short enough that an abandoned one does not linger. */
export const HANDOFF_SECONDS = 300

export interface SecretHandoff {
  /** What made it: the page says "Your new key" or "Your rotated key". */
  readonly kind: 'created' | 'rotated'
  readonly secret: string
}

const INFO = Buffer.from('tollgate portal secret hand-off v1')

function keyOf(cookieToken: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(cookieToken, 'utf8'), Buffer.alloc(0), INFO, 32))
}

/** The store id: not the key id in clear next to the session hash, but one hash of both (on the session's slot). */
function idOf(sessionId: string, keyId: string): string {
  return sameUserAs(sessionId, createHash('sha256').update(`${sessionId}\u0000${keyId}`).digest('hex'))
}

function seal(cookieToken: string, aad: string, handoff: SecretHandoff): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keyOf(cookieToken), iv)
  cipher.setAAD(Buffer.from(aad, 'utf8'))
  const body = Buffer.concat([cipher.update(JSON.stringify(handoff), 'utf8'), cipher.final()])
  return [iv, cipher.getAuthTag(), body].map((b) => b.toString('base64url')).join('.')
}

function open(cookieToken: string, aad: string, sealed: string): SecretHandoff | null {
  const [iv, tag, body] = sealed.split('.').map((part) => Buffer.from(part, 'base64url'))
  if (iv === undefined || tag === undefined || body === undefined) return null
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(cookieToken), iv)
    decipher.setAAD(Buffer.from(aad, 'utf8'))
    decipher.setAuthTag(tag)
    const value = JSON.parse(
      Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8'),
    ) as Partial<SecretHandoff>
    if ((value.kind !== 'created' && value.kind !== 'rotated') || typeof value.secret !== 'string') return null
    return { kind: value.kind, secret: value.secret }
  } catch {
    // Another cookie's key, or tampered with: as if there were nothing.
    return null
  }
}

export interface SecretHandoffs {
  give(cookieToken: string, sessionId: string, keyId: string, handoff: SecretHandoff): Promise<void>
  /** The secret left for this session and key, once; null when taken already, expired or never left. */
  take(cookieToken: string, sessionId: string, keyId: string): Promise<SecretHandoff | null>
}

export function secretHandoffs(
  store: Pick<PortalSessionStore, 'putOnce' | 'takeOnce'>,
  now: () => number = Date.now,
): SecretHandoffs {
  return {
    async give(cookieToken, sessionId, keyId, handoff) {
      const aad = `${sessionId}\u0000${keyId}`
      await store.putOnce(
        idOf(sessionId, keyId),
        seal(cookieToken, aad, handoff),
        new Date(now() + HANDOFF_SECONDS * 1000),
      )
    },
    async take(cookieToken, sessionId, keyId) {
      const sealed = await store.takeOnce(idOf(sessionId, keyId))
      return sealed === null ? null : open(cookieToken, `${sessionId}\u0000${keyId}`, sealed)
    },
  }
}

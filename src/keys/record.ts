// What the gateway knows about an API key. The secret itself is never here: only its
// keyed hash (and, during a rotation's grace period, the previous secret's hash).
import type { ModelLimits, ServiceClass } from '../config/schema.ts'

export type KeyStatus = 'active' | 'revoked'

export interface KeyRecord {
  /** Public, stable identifier, e.g. "key_3f9a…". Safe to log. */
  readonly id: string
  /** HMAC-SHA256 of the current secret, hex. */
  readonly hash: string
  /** The previous secret's hash while a rotation's grace lasts. */
  readonly previousHash: string | null
  /** ISO time until which previousHash is accepted. */
  readonly previousHashValidUntil: string | null
  /** The first characters of the secret, for humans to recognise it. */
  readonly prefix: string
  readonly name: string | null
  /** Who the key belongs to; keys of one owner share files, jobs and queued requests. */
  readonly owner: string | null
  /** Plan tier; null means the configured default tier. */
  readonly tier: string | null
  /** Models the key may use; null means all. */
  readonly models: readonly string[] | null
  /** Endpoints the key may use (names from config ENDPOINTS); null means all. */
  readonly endpoints: readonly string[] | null
  /** Per-model limit overrides; "*" applies to every model. */
  readonly limits: Readonly<Record<string, ModelLimits>> | null
  /** The priority class of its calls that name none (service_tier), when its tier allows it; absent or null: the tier's (priority/classes.ts). */
  readonly serviceTier?: ServiceClass | null
  readonly status: KeyStatus
  readonly createdAt: string
  readonly updatedAt: string
  readonly expiresAt: string | null
  readonly revokedAt: string | null
}

/** The principal a request runs as, once its key is accepted. */
export interface Principal {
  readonly keyId: string
  /** Owner when the key has one, else the key id: the unit that owns files and jobs. */
  readonly owner: string
  readonly key: KeyRecord
}

export function principalOf(key: KeyRecord): Principal {
  return { keyId: key.id, owner: key.owner ?? key.id, key }
}

// What one audit record says: who changed what, on which object, what it was before and
// after, from where and when. Shared by the port, its two adapters, the routes that write
// records and the views that show them. A leaf: it imports nothing of the gateway.
import { createHash } from 'node:crypto'

/** Who made a change: the admin token (by its fingerprint, never the token) or a portal user. */
export type AuditActor =
  | { readonly type: 'admin'; readonly id: string }
  | { readonly type: 'user'; readonly id: string; readonly name: string }
  /** An API key whose call a guardrail decided on (docs/guardrails.md): its id, never the key. */
  | { readonly type: 'key'; readonly id: string }

/** Through which door: the admin API, the `tollgate` CLI (which calls the admin API), the portal, or an inference call (guardrails). */
export const AUDIT_CHANNELS = ['api', 'cli', 'portal', 'inference'] as const
export type AuditChannel = (typeof AUDIT_CHANNELS)[number]

/** A snapshot of an object: only the fields its subject allows (audit/subjects.ts). */
export type AuditSnapshot = Readonly<Record<string, unknown>>

/** A record as it is written: everything but its id, which the store assigns. */
export interface NewAuditEntry {
  /** Unix milliseconds. */
  readonly at: number
  readonly actor: AuditActor
  readonly via: AuditChannel
  /** `<object type>.<verb>`: key.create, user.update, ... */
  readonly action: string
  readonly objectType: string
  readonly objectId: string
  /** null: the object did not exist before (a create). */
  readonly before: AuditSnapshot | null
  /** null: the object does not exist after (a delete). */
  readonly after: AuditSnapshot | null
  /** The client's address (http/client-address.ts: behind trusted proxies, the one they report). */
  readonly address: string
  readonly requestId: string
}

export interface AuditEntry extends NewAuditEntry {
  /** `aud_…`, assigned by the store; newer entries sort after older ones in the store's own order. */
  readonly id: string
}

/** What a query may ask for; every field narrows. */
export interface AuditFilter {
  /** An actor's id (`admin:…`, `usr_…`) or a portal user's name. */
  readonly actor?: string
  readonly action?: string
  readonly objectType?: string
  readonly objectId?: string
  /** Unix ms, inclusive. */
  readonly since?: number
  /** Unix ms, exclusive. */
  readonly until?: number
}

export interface AuditQuery extends AuditFilter {
  /** The id of the last entry of the previous page: this page holds older ones. */
  readonly after?: string
  readonly limit: number
}

/** Newest first. */
export interface AuditPage {
  readonly data: readonly AuditEntry[]
  readonly hasMore: boolean
}

/**
 * The admin token's fingerprint: the first 16 hex digits of its SHA-256, so an operator
 * can tell which token made a change (`printf %s "$TOKEN" | sha256sum | cut -c1-16`)
 * without the log holding anything that authenticates.
 */
export function adminFingerprint(token: string): string {
  return `admin:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`
}

/**
 * An object cut down to the named fields: an allow-list, so a field added to a view later
 * (a hash, a secret) stays out of the log until someone names it here. Values are copied
 * through JSON: what is stored is data, never a live object.
 */
export function pick(source: Readonly<Record<string, unknown>>, fields: readonly string[]): AuditSnapshot {
  const out: Record<string, unknown> = {}
  for (const field of fields) {
    if (!Object.hasOwn(source, field)) continue
    const value = source[field]
    out[field] = value === undefined ? null : (JSON.parse(JSON.stringify(value)) as unknown)
  }
  return out
}

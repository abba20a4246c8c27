// GET /admin/audit as the API reference describes it: its query and its reply, the zod
// schemas the route parses with and the OpenAPI document shows.
import { z } from 'zod'
import { cursorQuery, listOf } from '../api/common.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import { AUDIT_CHANNELS, type AuditEntry } from './record.ts'

const isoTime = z.iso.datetime({ offset: true })
const name = z.string().min(1).max(200)

export const auditQuery = z.strictObject({
  actor: name
    .optional()
    .meta({ description: "The admin token's fingerprint (`admin:…`), or a portal user's id or username." }),
  action: name.optional().meta({ description: 'One action: `key.create`, `user.update`, ...' }),
  object_type: name.optional().meta({ description: '`key`, `user`, `queue_request`, ...' }),
  object_id: name.optional().meta({ description: "The object's id (a user's is their username)." }),
  since: isoTime.optional().meta({ description: 'Records at or after this time (ISO 8601).' }),
  until: isoTime.optional().meta({ description: 'Records before this time (ISO 8601).' }),
  limit: cursorQuery.limit,
  after: cursorQuery.after.meta({
    description: 'The id of the last record of the previous page: the next page holds older ones.',
  }),
})

const snapshot = z.record(z.string(), z.unknown()).nullable().meta({
  description: 'The object, its allow-listed fields only (never a secret); null when it did not (or no longer) exist.',
})

export const AuditEntrySchema = z.object({
  object: z.literal('audit_entry'),
  id: z.string().meta({ description: '`aud_…`; the order of the log.' }),
  created_at: isoTime,
  actor: z.object({
    type: z.enum(['admin', 'user', 'key']),
    id: z.string().meta({
      description:
        "`admin:` and the first 16 hex digits of the admin token's SHA-256, the user's id, or (a guardrail decision) the key's id.",
    }),
    name: z.string().optional().meta({ description: "A portal user's username." }),
  }),
  via: z
    .enum(AUDIT_CHANNELS)
    .meta({ description: 'The admin API, the `tollgate` CLI (through the admin API), or the portal.' }),
  action: z.string(),
  object_type: z.string(),
  object_id: z.string(),
  before: snapshot,
  after: snapshot,
  address: z
    .string()
    .meta({ description: "The client's address (behind `server.trustProxyHops` proxies, the one they report)." }),
  request_id: z.string(),
})

export const AuditList = listOf(AuditEntrySchema)

export function auditEntryView(entry: AuditEntry): z.infer<typeof AuditEntrySchema> {
  return {
    object: 'audit_entry',
    id: entry.id,
    created_at: new Date(entry.at).toISOString(),
    actor: entry.actor.type === 'user' ? { ...entry.actor } : { type: entry.actor.type, id: entry.actor.id },
    via: entry.via,
    action: entry.action,
    object_type: entry.objectType,
    object_id: entry.objectId,
    before: entry.before === null ? null : { ...entry.before },
    after: entry.after === null ? null : { ...entry.after },
    address: entry.address,
    request_id: entry.requestId,
  }
}

export const AUDIT_TAG = 'Admin: audit'

export const AUDIT_OPERATIONS: readonly OperationDoc[] = [
  {
    security: 'admin',
    method: 'get',
    path: '/admin/audit',
    operationId: 'listAuditEntries',
    tag: AUDIT_TAG,
    summary: 'The audit log: every change made through the admin API, the CLI and the portal',
    description:
      'Newest first, filtered by actor, action, object and time; a page at a time (`after` = the last id seen). Records are kept for `audit.retentionDays`. Before and after hold only allow-listed fields: never a key, a hash, a password or a token.',
    query: auditQuery,
    responses: { 200: { description: 'OK, newest first', schema: AuditList } },
  },
]

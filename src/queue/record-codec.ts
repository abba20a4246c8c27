// How a stored request is written down, the same way by both stores: the parts fixed at
// acceptance as one JSON document, the changing parts as their own fields, the result
// as JSON of its own (it expires on its own schedule).
import { isJsonObject } from '../json.ts'
import type { NewRequest, QueuedRequest, RequestStatus, StoredResult } from './ports.ts'
import { REQUEST_STATUSES } from './ports.ts'

export function encodeMeta(request: NewRequest): string {
  const { id, keyId, owner, tier, line, createdAt, call } = request
  return JSON.stringify({ id, keyId, owner, tier, line, createdAt, call })
}

export function encodeResult(result: StoredResult): string {
  return JSON.stringify(result)
}

export function decodeResult(json: string | null): StoredResult | null {
  if (json === null || json === '') return null
  const value: unknown = JSON.parse(json)
  return isJsonObject(value) && typeof value.statusCode === 'number' ? value as unknown as StoredResult : null
}

const nullableNumber = (value: string | number | null | undefined): number | null =>
  value === undefined || value === null || value === '' ? null : Number(value)

/** The changing fields, as strings (Redis) or SQLite values. */
export interface StateFields {
  readonly status?: string | null
  readonly attempts?: string | number | null
  readonly startedAt?: string | number | null
  readonly finishedAt?: string | number | null
  readonly cancel?: string | number | null
  readonly runner?: string | null
}

/** Null when there is no such record (an empty Redis hash) or it cannot be read. */
export function decodeRecord(id: string, fields: (StateFields & { readonly meta?: string | null }) | null, result: string | null): QueuedRequest | null {
  if (fields === null || typeof fields.meta !== 'string') return null
  const meta: unknown = JSON.parse(fields.meta)
  if (!isJsonObject(meta) || meta.id !== id || !isJsonObject(meta.call)) return null
  const status = (REQUEST_STATUSES as readonly string[]).includes(fields.status ?? '') ? fields.status as RequestStatus : 'queued'
  return {
    ...(meta as unknown as NewRequest),
    status,
    attempts: Number(fields.attempts ?? 0),
    startedAt: nullableNumber(fields.startedAt),
    finishedAt: nullableNumber(fields.finishedAt),
    cancelRequested: String(fields.cancel ?? '0') === '1',
    result: decodeResult(result),
    runner: typeof fields.runner === 'string' && fields.runner !== '' ? fields.runner : null,
  }
}

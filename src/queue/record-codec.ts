// How a stored request is written down, the same way by both stores: the parts fixed at
// acceptance as one small JSON document (meta), the body as JSON of its own (payload: a
// list reads meta and never the body; it is dropped when the request finishes), the
// changing parts as their own fields, the result as JSON of its own (it expires on its
// own schedule). Records written before the payload was split off carry the body in meta.
import { Buffer } from 'node:buffer'
import { isJsonObject } from '../json.ts'
import type { NewRequest, QueuedRequest, RequestStatus, RequestSummary, StoredBody, StoredResult } from './ports.ts'
import { REQUEST_STATUSES } from './ports.ts'

export function encodeMeta(request: NewRequest): string {
  const { id, keyId, owner, tier, line, createdAt, call } = request
  const { body: _body, ...rest } = call
  return JSON.stringify({ id, keyId, owner, tier, line, createdAt, call: rest })
}

export function encodePayload(request: NewRequest): string {
  return JSON.stringify(request.call.body)
}

/** The bytes a pending request counts against its key's cap: meta, payload and multipart bytes. */
export function storedSize(meta: string, payload: string, body: Buffer | null): number {
  return Buffer.byteLength(meta) + Buffer.byteLength(payload) + (body?.length ?? 0)
}

export function encodeResult(result: StoredResult): string {
  return JSON.stringify(result)
}

export function decodeResult(json: string | null): StoredResult | null {
  if (json === null || json === '') return null
  const value: unknown = JSON.parse(json)
  return isJsonObject(value) && typeof value.statusCode === 'number' ? (value as unknown as StoredResult) : null
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

/** The status as stored; a record without one reads queued. */
export function storedStatus(value: string | null | undefined): RequestStatus {
  return (REQUEST_STATUSES as readonly string[]).includes(value ?? '') ? (value as RequestStatus) : 'queued'
}

/** Null when there is no such record (an empty Redis hash) or it cannot be read. */
export function decodeSummary(
  id: string,
  fields: (StateFields & { readonly meta?: string | null }) | null,
  result: string | null,
): RequestSummary | null {
  if (fields === null || typeof fields.meta !== 'string') return null
  const meta: unknown = JSON.parse(fields.meta)
  if (!isJsonObject(meta) || meta.id !== id || !isJsonObject(meta.call)) return null
  // An older record's body, inside meta, is not part of a summary.
  const { body: _body, ...call } = meta.call
  return {
    ...(meta as unknown as Omit<RequestSummary, 'call'>),
    call: call as unknown as RequestSummary['call'],
    status: storedStatus(fields.status),
    attempts: Number(fields.attempts ?? 0),
    startedAt: nullableNumber(fields.startedAt),
    finishedAt: nullableNumber(fields.finishedAt),
    cancelRequested: String(fields.cancel ?? '0') === '1',
    result: decodeResult(result),
    runner: typeof fields.runner === 'string' && fields.runner !== '' ? fields.runner : null,
  }
}

const NO_BODY: StoredBody = { kind: 'none' }

/** A whole record: its summary and its body (payload, or inside an older record's meta; gone once finished). */
export function decodeRecord(
  id: string,
  fields: (StateFields & { readonly meta?: string | null; readonly payload?: string | null }) | null,
  result: string | null,
): QueuedRequest | null {
  const summary = decodeSummary(id, fields, result)
  if (summary === null || fields === null) return null
  let body: unknown = NO_BODY
  if (typeof fields.payload === 'string' && fields.payload !== '') body = JSON.parse(fields.payload)
  else {
    const meta: unknown = JSON.parse(fields.meta ?? 'null')
    if (isJsonObject(meta) && isJsonObject(meta.call) && isJsonObject(meta.call.body)) body = meta.call.body
  }
  if (!isJsonObject(body) || typeof body.kind !== 'string') return null
  return { ...summary, call: { ...summary.call, body: body as unknown as StoredBody } }
}

// Files are bounded per API key (storageCaps.files and .fileBytes, per tier): an upload
// (files.create, under /v1 and /v2) holds room for its size before it goes upstream, and
// becomes the file the upstream's reply names (sized by the reply's `bytes`, else by the
// upload); a delete gives the file's share back to the key that uploaded it.
//
// Refusal: 429 file_quota_exceeded, type insufficient_quota, with no retry hint and
// `x-should-retry: false`. Like a spent token quota (the contract's insufficient_quota),
// waiting frees nothing, deleting files does; a retry hint would only make SDKs upload the
// same bytes again. An upload larger than the whole byte cap can never fit: 413.
import { randomUUID } from 'node:crypto'
import type { StorageCaps } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import { isJsonObject } from '../json.ts'
import type { EndpointSpec } from '../inference/endpoints.ts'
import type { Principal } from '../keys/record.ts'
import type { FileQuotaStore } from './quota-port.ts'

type JsonTransform = (status: number, body: unknown) => Promise<unknown>

/** A hold outlives any upload forwarded upstream; one of a gateway that died lapses then. */
const HOLD_MS = 60 * 60 * 1000

/** One upload's room, held until its reply is known. */
export interface UploadHold {
  /** Wraps the reply's transform: a created file takes the hold's place. */
  onReply(next: JsonTransform | undefined): JsonTransform
  /** Gives the hold back unless the reply made it a file. Never throws. */
  end(): Promise<void>
}

export interface FileQuota {
  /** For files.create: holds room for the upload, or refuses it. Undefined for other endpoints. */
  hold(spec: EndpointSpec, principal: Principal, caps: StorageCaps, body: RequestBody): Promise<UploadHold | undefined>
  /** For files.delete: wraps the reply's transform so a deleted file frees its share. */
  onDelete(spec: EndpointSpec, next: JsonTransform | undefined): JsonTransform | undefined
}

/** `caps`: the key's tier's, in the configuration the call started on (limits/plans.ts, storageCapsOf). */
export function createFileQuota(store: FileQuotaStore): FileQuota {
  return {
    async hold(spec, principal, caps, body) {
      if (spec.endpoint !== 'files.create' || body.kind !== 'multipart') return undefined
      const size = body.files.reduce((sum, f) => sum + f.size, 0)
      if (size > caps.fileBytes) {
        throw gatewayError('body_too_large', {
          message: `This file (${size} bytes) is larger than all the files a key may keep (${caps.fileBytes} bytes); it can never be stored.`,
        })
      }
      const { keyId } = principal
      const hold = randomUUID()
      const outcome = await store.hold(keyId, hold, size, { files: caps.files, bytes: caps.fileBytes }, HOLD_MS)
      if (!outcome.held) {
        const { usage } = outcome
        const what =
          usage.files + 1 > caps.files
            ? `this key keeps ${usage.files} files, its cap (${caps.files})`
            : `this key's files take ${usage.bytes} bytes; with this one (${size} bytes) they would pass its cap (${caps.fileBytes} bytes)`
        throw gatewayError('file_quota_exceeded', {
          message: `File storage full: ${what}. Delete files (DELETE /v1/files/{id}) to make room.`,
          param: 'file',
          headers: { 'x-should-retry': 'false' },
        })
      }
      let committed = false
      return {
        onReply: (next) => async (status, reply) => {
          if (status >= 200 && status < 300 && isJsonObject(reply) && typeof reply.id === 'string') {
            const bytes =
              typeof reply.bytes === 'number' && Number.isSafeInteger(reply.bytes) && reply.bytes >= 0
                ? reply.bytes
                : size
            await store.commit(keyId, hold, reply.id, bytes)
            committed = true
          }
          return next === undefined ? reply : next(status, reply)
        },
        async end() {
          if (!committed) await store.cancel(keyId, hold).catch(() => undefined)
        },
      }
    },

    onDelete(spec, next) {
      if (spec.endpoint !== 'files.delete') return next
      return async (status, reply) => {
        const out = next === undefined ? reply : await next(status, reply)
        if (
          status >= 200 &&
          status < 300 &&
          isJsonObject(reply) &&
          typeof reply.id === 'string' &&
          reply.deleted === true
        )
          await store.release(reply.id)
        return out
      }
    },
  }
}

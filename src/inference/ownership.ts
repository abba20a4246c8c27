// Files and fine-tuning jobs belong to the owner that made them, whichever backend holds
// them: ownership is recorded before the create reply leaves, lists are filtered, and a
// deleted object is released.
import type { OwnedKind, OwnershipStore } from '../store/ports.ts'
import type { Ownership } from './endpoints.ts'
import { isJsonObject } from '../json.ts'

type JsonTransform = (status: number, body: unknown) => Promise<unknown>

export function ownershipTransform(store: OwnershipStore, ownership: Ownership, owner: string): JsonTransform {
  const kind: OwnedKind = ownership.kind
  return async (status, body) => {
    if (status < 200 || status >= 300 || !isJsonObject(body)) return body
    switch (ownership.action) {
      case 'create':
        if (typeof body.id === 'string') await store.claim(kind, body.id, owner)
        return body
      case 'list': {
        if (!Array.isArray(body.data)) return body
        const mine = new Set(await store.list(kind, owner))
        return { ...body, data: body.data.filter((item) => isJsonObject(item) && typeof item.id === 'string' && mine.has(item.id)) }
      }
      case 'delete':
        if (typeof body.id === 'string' && body.deleted === true) await store.release(kind, body.id)
        return body
      case 'access':
        return body
    }
  }
}

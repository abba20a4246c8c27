// Owned objects (files, fine-tuning jobs, vector stores, file batches) belong to the owner
// that made them, whichever backend holds them: before a call goes upstream, every object
// it reaches (in the path, or named in the body) must be the caller's, and anything else is
// "no such object" (404, never 403: another owner's ids are not confirmed to exist). On the
// way back, ownership is recorded before the create reply leaves, lists are filtered, and
// a deleted object is released.
import { gatewayError } from '../errors.ts'
import { isJsonObject } from '../json.ts'
import type { RequestBody } from '../http/body.ts'
import type { Params } from '../http/router.ts'
import type { OwnedKind, OwnershipStore } from '../store/ports.ts'
import type { EndpointSpec, Ownership } from './endpoints.ts'

type JsonTransform = (status: number, body: unknown) => Promise<unknown>

/** Lookups in flight at once for the ids of one body (a batch may name 2000 files). */
const LOOKUPS_AT_ONCE = 64

const NOUN: Record<OwnedKind, string> = {
  file: 'file',
  'fine_tuning.job': 'fine-tuning job',
  vector_store: 'vector store',
  'vector_store.file_batch': 'file batch',
}

interface Reached {
  readonly kind: OwnedKind
  readonly id: string
  readonly param: string
}

function reachedBy(spec: EndpointSpec, params: Params, body: RequestBody): Reached[] {
  const reached: Reached[] = []
  const json = body.kind === 'json' ? body.value : null
  for (const ref of spec.owns ?? []) {
    if ('param' in ref) reached.push({ kind: ref.kind, id: params[ref.param] ?? '', param: ref.param })
    else if (json !== null) {
      for (const id of new Set(ref.ids(json))) if (typeof id === 'string') reached.push({ kind: ref.kind, id, param: ref.field })
    }
  }
  const own = spec.ownership
  if (own !== undefined && (own.action === 'access' || own.action === 'delete')) {
    const param = own.param ?? 'id'
    reached.push({ kind: own.kind, id: params[param] ?? '', param })
  }
  return reached
}

/** Refuses (404) a call that reaches an object the caller does not own. */
export async function checkOwnership(store: OwnershipStore, spec: EndpointSpec, params: Params, body: RequestBody, owner: string): Promise<void> {
  const reached = reachedBy(spec, params, body)
  for (let i = 0; i < reached.length; i += LOOKUPS_AT_ONCE) {
    const group = reached.slice(i, i + LOOKUPS_AT_ONCE)
    const owners = await Promise.all(group.map((r) => store.ownerOf(r.kind, r.id)))
    const foreign = group.find((_, j) => owners[j] !== owner)
    if (foreign !== undefined) throw gatewayError('resource_not_found', { message: `No such ${NOUN[foreign.kind]}.`, param: foreign.param })
  }
}

/** What the reply of this call does to ownership records; undefined when nothing. */
export function ownershipTransformOf(store: OwnershipStore, spec: EndpointSpec, owner: string): JsonTransform | undefined {
  const own = spec.ownership
  // A read of one object (a file's content, say) passes through untouched.
  if (own === undefined || own.action === 'access') return undefined
  return ownershipTransform(store, own, owner)
}

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
        const data = body.data.filter((item) => isJsonObject(item) && typeof item.id === 'string' && mine.has(item.id))
        // The page's bounds must not name another owner's objects either.
        const bounds = 'first_id' in body || 'last_id' in body
          ? { first_id: idOf(data[0]) ?? null, last_id: idOf(data.at(-1)) ?? null }
          : {}
        return { ...body, data, ...bounds }
      }
      case 'delete':
        if (typeof body.id === 'string' && body.deleted === true) await store.release(kind, body.id)
        return body
      case 'access':
        return body
    }
  }
}

function idOf(item: unknown): string | undefined {
  return isJsonObject(item) && typeof item.id === 'string' ? item.id : undefined
}

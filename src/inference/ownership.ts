// Owned objects (files, fine-tuning jobs, vector stores, file batches) belong to the owner
// that made them, whichever backend holds them: before a call goes upstream, every object
// it reaches (in the path, or named in the body) must be the caller's, and anything else is
// "no such object" (404, never 403: another owner's ids are not confirmed to exist). On the
// way back, ownership is recorded before the create reply leaves, lists are filtered, and
// a deleted object is released.
//
// A filtered page can come out short, or empty, while the upstream has more: an upstream
// shared by many owners lists them all. The SDKs page on with the last item's id and stop
// at an empty page, so a list is filled up from the upstream's further pages (a bounded
// number of them) before it goes out.
import { gatewayError } from '../errors.ts'
import { isJsonObject } from '../json.ts'
import type { RequestBody } from '../http/body.ts'
import type { Params } from '../http/router.ts'
import type { OwnedKind, OwnershipStore, RememberedKind } from '../store/ports.ts'
import { idsInBody, idsInForm, type NamedId, type NeverOwnedKind, type ReferencedKind } from './object-ids.ts'
import type { EndpointSpec, Ownership } from './endpoints.ts'

type JsonTransform = (status: number, body: unknown) => Promise<unknown>

/** Lookups in flight at once for the ids of one body (a batch may name 2000 files). */
const LOOKUPS_AT_ONCE = 64
/** Further upstream pages read to fill one filtered list page. */
const REFILL_PAGES = 10

/** How a list page is filled: its size, and the upstream's page after a given id (null: none to be had). */
export interface ListPaging {
  /** The page size the client asked for (undefined: as many as the upstream's first page held). */
  readonly limit: number | undefined
  nextPage(after: string): Promise<unknown>
}

const NOUN: Record<ReferencedKind, string> = {
  file: 'file',
  'fine_tuning.job': 'fine-tuning job',
  vector_store: 'vector store',
  'vector_store.file_batch': 'file batch',
  response: 'response',
  'response.item': 'item',
  'chat.audio': 'audio',
  conversation: 'conversation',
  batch: 'batch',
  container: 'container',
  skill: 'skill',
}

/** Kinds nobody can own through the gateway (no route creates them): no lookup needed. */
const NEVER_OWNED: ReadonlySet<ReferencedKind> = new Set<NeverOwnedKind>([
  'conversation',
  'batch',
  'container',
  'skill',
])

function ownable(named: NamedId): named is NamedId & { readonly kind: OwnedKind | RememberedKind } {
  return !NEVER_OWNED.has(named.kind)
}

/** Query parameters of a list that name one of its objects (a page cursor). */
const CURSORS = ['after', 'before'] as const

function reachedBy(spec: EndpointSpec, params: Params, query: URLSearchParams, body: RequestBody): NamedId[] {
  const reached: NamedId[] = []
  for (const ref of spec.owns ?? []) reached.push({ kind: ref.kind, id: params[ref.param] ?? '', param: ref.param })
  const own = spec.ownership
  if (own !== undefined && (own.action === 'access' || own.action === 'delete')) {
    const param = own.param ?? 'id'
    reached.push({ kind: own.kind, id: params[param] ?? '', param })
  }
  // A cursor that names another owner's object would page through the upstream from it.
  if (own?.action === 'list') {
    for (const cursor of CURSORS) {
      const id = query.get(cursor)
      if (id !== null) reached.push({ kind: own.kind, id, param: cursor })
    }
  }
  if (body.kind === 'json') reached.push(...idsInBody(body.value))
  else if (body.kind === 'multipart') reached.push(...idsInForm(body.fields))
  return reached
}

/**
 * Refuses (404) a call that reaches an object the caller does not own: in its path, its
 * query or anywhere in its body. Another owner's id and an unknown one get the same answer.
 */
export async function checkOwnership(
  store: OwnershipStore,
  spec: EndpointSpec,
  params: Params,
  query: URLSearchParams,
  body: RequestBody,
  owner: string,
): Promise<void> {
  const named = dedupe(reachedBy(spec, params, query, body))
  const never = named.find((r) => !ownable(r))
  if (never !== undefined) throw notFound(never)
  const reached = named.filter(ownable)
  for (let i = 0; i < reached.length; i += LOOKUPS_AT_ONCE) {
    const group = reached.slice(i, i + LOOKUPS_AT_ONCE)
    const owners = await Promise.all(group.map((r) => store.ownerOf(r.kind, r.id)))
    const foreign = group.find((_, j) => owners[j] !== owner)
    if (foreign !== undefined) throw notFound(foreign)
  }
}

function notFound(reached: NamedId): Error {
  return gatewayError('resource_not_found', { message: `No such ${NOUN[reached.kind]}.`, param: reached.param })
}

/** One lookup per object, however often a body names it (a batch may repeat a file). */
function dedupe(reached: readonly NamedId[]): NamedId[] {
  const seen = new Set<string>()
  return reached.filter((r) => {
    const key = `${r.kind}\u0000${r.id}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

/** What the reply of this call does to ownership records; undefined when nothing. */
export function ownershipTransformOf(
  store: OwnershipStore,
  spec: EndpointSpec,
  owner: string,
  paging?: ListPaging,
): JsonTransform | undefined {
  const own = spec.ownership
  // A read of one object (a file's content, say) passes through untouched.
  if (own === undefined || own.action === 'access') return undefined
  return ownershipTransform(store, own, owner, paging)
}

export function ownershipTransform(
  store: OwnershipStore,
  ownership: Ownership,
  owner: string,
  paging?: ListPaging,
): JsonTransform {
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
        const isMine = (item: unknown): boolean =>
          isJsonObject(item) && typeof item.id === 'string' && mine.has(item.id)
        let data = body.data.filter(isMine)
        let hasMore = body.has_more
        if (paging !== undefined && hasMore === true) {
          const wanted = paging.limit ?? body.data.length
          let after = idOf(body.data.at(-1))
          for (
            let pages = 0;
            data.length < wanted && hasMore === true && after !== undefined && pages < REFILL_PAGES;
            pages++
          ) {
            const next = await paging.nextPage(after)
            if (!isJsonObject(next) || !Array.isArray(next.data)) break
            data = [...data, ...next.data.filter(isMine)]
            hasMore = next.has_more
            after = idOf(next.data.at(-1))
          }
          // Over the page size: the rest is the next page, reached after this one's last id.
          if (data.length > wanted) {
            data = data.slice(0, wanted)
            hasMore = true
          }
        }
        // The page's bounds must not name another owner's objects either.
        const bounds =
          'first_id' in body || 'last_id' in body
            ? { first_id: idOf(data[0]) ?? null, last_id: idOf(data.at(-1)) ?? null }
            : {}
        return { ...body, data, ...bounds, ...('has_more' in body ? { has_more: hasMore } : {}) }
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

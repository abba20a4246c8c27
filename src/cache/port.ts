// Where sealed replies are kept: a port with a memory adapter (the embedded store) and a
// Redis adapter (a fleet). Both hold each scope to its byte cap, evicting its oldest
// entries first, and the memory one holds the whole cache to its own bound.

/** What an entry is, besides its sealed bytes: who stored it, for DELETE /admin/cache. */
export interface EntryLabels {
  readonly keyId: string
  readonly owner: string
  /** The owner's tenant when it has one, else the owner. */
  readonly tenant: string
  readonly model: string
}

/** Entries to remove: every filter given must match (none given: all). */
export interface PurgeFilter {
  readonly tenant?: string
  readonly keyId?: string
  readonly model?: string
}

export interface PutResult {
  /** Entries evicted to make room (caps), not those that expired. */
  readonly evicted: number
  /** False when the entry alone is over its scope's cap: not kept. */
  readonly stored: boolean
}

export interface ResponseCacheStore {
  get(scope: string, key: string): Promise<Buffer | undefined>
  put(scope: string, key: string, value: Buffer, ttlMs: number, labels: EntryLabels): Promise<PutResult>
  /** Removes the matching entries; resolves with how many. */
  purge(filter: PurgeFilter): Promise<number>
  /** Bytes held now, where the store can say cheaply (memory); undefined on Redis. */
  bytes(): number | undefined
  close(): Promise<void>
}

/** What an entry costs beyond its value: its key, its labels and the bookkeeping around them. */
export const ENTRY_OVERHEAD_BYTES = 256

/** Labels as both Redis adapters keep them beside an entry: one space-separated, URI-encoded line. */
export const encodeEntryLabels = (l: EntryLabels): string =>
  [l.keyId, l.owner, l.tenant, l.model].map(encodeURIComponent).join(' ')

export function decodeEntryLabels(meta: string): EntryLabels | undefined {
  const [, keyId, owner, tenant, model] = meta.split(' ').map(decodeURIComponent)
  if (keyId === undefined || owner === undefined || tenant === undefined || model === undefined) return undefined
  return { keyId, owner, tenant, model }
}

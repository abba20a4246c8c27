// The embedded store's response cache: in memory, least recently used first out, held
// to a byte bound overall and one per scope. Lost on a restart (docs/cache.md).
import { ENTRY_OVERHEAD_BYTES, type EntryLabels, type PurgeFilter, type ResponseCacheStore } from './port.ts'

interface Entry {
  readonly scope: string
  readonly value: Buffer
  readonly labels: EntryLabels
  readonly expiresAt: number
  readonly size: number
}

export function createMemoryCacheStore(bounds: { maxBytes: number; scopeMaxBytes: number }): ResponseCacheStore {
  // Map order is recency: a hit moves its entry to the end, eviction takes from the front.
  const entries = new Map<string, Entry>()
  const scopeBytes = new Map<string, number>()
  let total = 0
  const id = (scope: string, key: string): string => `${scope}\u0000${key}`
  const remove = (name: string, entry: Entry): void => {
    entries.delete(name)
    total -= entry.size
    const left = (scopeBytes.get(entry.scope) ?? 0) - entry.size
    if (left > 0) scopeBytes.set(entry.scope, left)
    else scopeBytes.delete(entry.scope)
  }
  return {
    async get(scope, key) {
      const name = id(scope, key)
      const entry = entries.get(name)
      if (entry === undefined) return undefined
      if (entry.expiresAt <= Date.now()) {
        remove(name, entry)
        return undefined
      }
      entries.delete(name)
      entries.set(name, entry)
      return entry.value
    },
    async put(scope, key, value, ttlMs, labels) {
      const size = value.length + ENTRY_OVERHEAD_BYTES
      if (size > bounds.scopeMaxBytes || size > bounds.maxBytes) return { evicted: 0, stored: false }
      const name = id(scope, key)
      const previous = entries.get(name)
      if (previous !== undefined) remove(name, previous)
      let evicted = 0
      const now = Date.now()
      // The scope's own oldest first, then anyone's, until both bounds have room.
      if ((scopeBytes.get(scope) ?? 0) + size > bounds.scopeMaxBytes)
        for (const [other, entry] of entries) {
          if (entry.scope !== scope) continue
          remove(other, entry)
          if (entry.expiresAt > now) evicted++
          if ((scopeBytes.get(scope) ?? 0) + size <= bounds.scopeMaxBytes) break
        }
      for (const [other, entry] of entries) {
        if (total + size <= bounds.maxBytes) break
        remove(other, entry)
        if (entry.expiresAt > now) evicted++
      }
      entries.set(name, { scope, value, labels, expiresAt: now + ttlMs, size })
      total += size
      scopeBytes.set(scope, (scopeBytes.get(scope) ?? 0) + size)
      return { evicted, stored: true }
    },
    async purge(filter) {
      let removed = 0
      for (const [name, entry] of entries)
        if (matches(entry.labels, filter)) {
          remove(name, entry)
          removed++
        }
      return removed
    },
    bytes: () => total,
    async close() {
      entries.clear()
      scopeBytes.clear()
      total = 0
    },
  }
}

export function matches(labels: EntryLabels, filter: PurgeFilter): boolean {
  return (
    (filter.tenant === undefined || labels.tenant === filter.tenant) &&
    (filter.keyId === undefined || labels.keyId === filter.keyId) &&
    (filter.model === undefined || labels.model === filter.model)
  )
}

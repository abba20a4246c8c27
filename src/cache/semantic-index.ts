// The semantic cache's index: per scope, the vectors of the prompts whose replies the exact
// cache holds, each naming that reply's exact key. A port with a memory adapter (below) and a
// Redis adapter (semantic-redis.ts); the search itself is the gateway's (nearest), on either
// store, over one partition of one scope, so it never sees another scope's vectors.
// Vectors are kept unit length, so cosine similarity is a dot product.
import { ENTRY_OVERHEAD_BYTES, type EntryLabels, type PurgeFilter, type PutResult } from './port.ts'
import { matches } from './memory-store.ts'

export interface Candidate {
  /** The exact key of the reply this prompt got. */
  readonly key: string
  readonly vector: Float32Array
}

export interface SemanticIndex {
  /** The live vectors of one partition of one scope (at most the scope's count bound). */
  vectors(scope: string, partition: string): Promise<Candidate[]>
  add(
    scope: string,
    partition: string,
    key: string,
    vector: Float32Array,
    ttlMs: number,
    labels: EntryLabels,
  ): Promise<PutResult>
  purge(filter: PurgeFilter): Promise<number>
  close(): Promise<void>
}

export interface SemanticBounds {
  readonly scopeMaxVectors: number
  readonly scopeMaxBytes: number
  /** All scopes together (the memory adapter). */
  readonly maxBytes: number
}

/** What a vector counts against the byte bounds: its floats and the bookkeeping around them. */
export const vectorBytes = (vector: Float32Array): number => vector.byteLength + ENTRY_OVERHEAD_BYTES

/** The vector scaled to unit length, or undefined when it has none (all zeros, not finite). */
export function unit(values: readonly number[]): Float32Array | undefined {
  let sum = 0
  for (const v of values) sum += v * v
  const norm = Math.sqrt(sum)
  if (!Number.isFinite(norm) || norm === 0) return undefined
  const out = new Float32Array(values.length)
  for (let i = 0; i < values.length; i++) out[i] = (values[i] ?? 0) / norm
  return out
}

export interface Match {
  readonly key: string
  readonly similarity: number
}

/** The `limit` candidates most similar to `query` at or above `threshold`, best first. */
export function nearest(
  query: Float32Array,
  candidates: readonly Candidate[],
  threshold: number,
  limit: number,
): Match[] {
  const found: Match[] = []
  for (const c of candidates) {
    if (c.vector.length !== query.length) continue // another embedding width: never comparable
    let dot = 0
    for (let i = 0; i < query.length; i++) dot += (query[i] as number) * (c.vector[i] as number)
    if (dot >= threshold) found.push({ key: c.key, similarity: Math.min(1, dot) })
  }
  return found.sort((a, b) => b.similarity - a.similarity).slice(0, limit)
}

interface Stored {
  readonly scope: string
  readonly partition: string
  readonly key: string
  readonly vector: Float32Array
  readonly labels: EntryLabels
  readonly expiresAt: number
  readonly size: number
}

interface ScopeUse {
  count: number
  bytes: number
}

export function createMemorySemanticIndex(bounds: SemanticBounds): SemanticIndex {
  // Map order is age: eviction takes from the front (a scope's oldest, or anyone's for the overall bound).
  const entries = new Map<string, Stored>()
  const partitions = new Map<string, Set<string>>()
  const use = new Map<string, ScopeUse>()
  let total = 0
  const idOf = (scope: string, partition: string, key: string): string => `${scope}\u0000${partition}\u0000${key}`
  const partOf = (scope: string, partition: string): string => `${scope}\u0000${partition}`
  const remove = (id: string, e: Stored): void => {
    entries.delete(id)
    total -= e.size
    const members = partitions.get(partOf(e.scope, e.partition))
    members?.delete(id)
    if (members?.size === 0) partitions.delete(partOf(e.scope, e.partition))
    const u = use.get(e.scope)
    if (u === undefined) return
    u.count--
    u.bytes -= e.size
    if (u.count === 0) use.delete(e.scope)
  }
  const over = (scope: string, size: number): boolean => {
    const u = use.get(scope)
    return u !== undefined && (u.count + 1 > bounds.scopeMaxVectors || u.bytes + size > bounds.scopeMaxBytes)
  }
  return {
    async vectors(scope, partition) {
      const now = Date.now()
      const out: Candidate[] = []
      for (const id of partitions.get(partOf(scope, partition)) ?? []) {
        const e = entries.get(id)
        if (e === undefined) continue
        if (e.expiresAt <= now) remove(id, e)
        else out.push({ key: e.key, vector: e.vector })
      }
      return out
    },
    async add(scope, partition, key, vector, ttlMs, labels) {
      const size = vectorBytes(vector)
      if (size > bounds.scopeMaxBytes || size > bounds.maxBytes) return { stored: false, evicted: 0 }
      const id = idOf(scope, partition, key)
      const previous = entries.get(id)
      if (previous !== undefined) remove(id, previous)
      const now = Date.now()
      let evicted = 0
      for (const [other, e] of entries) {
        if (!over(scope, size)) break
        if (e.scope !== scope) continue
        remove(other, e)
        if (e.expiresAt > now) evicted++
      }
      for (const [other, e] of entries) {
        if (total + size <= bounds.maxBytes) break
        remove(other, e)
        if (e.expiresAt > now) evicted++
      }
      entries.set(id, { scope, partition, key, vector, labels, expiresAt: now + ttlMs, size })
      total += size
      const members = partitions.get(partOf(scope, partition)) ?? new Set<string>()
      partitions.set(partOf(scope, partition), members.add(id))
      const u = use.get(scope) ?? { count: 0, bytes: 0 }
      u.count++
      u.bytes += size
      use.set(scope, u)
      return { stored: true, evicted }
    },
    async purge(filter) {
      let removed = 0
      for (const [id, e] of entries)
        if (matches(e.labels, filter)) {
          remove(id, e)
          removed++
        }
      return removed
    },
    async close() {
      entries.clear()
      partitions.clear()
      use.clear()
      total = 0
    },
  }
}

// The in-process cache in front of the key store's findByHash, used by every authenticated
// request. Entries live a short TTL; a change made on any instance removes them sooner
// (see key-events.ts). While the change feed is not known to be live, the cache is not
// trusted: every lookup goes to the store and entries only serve when the store fails.
//
// Why each piece:
// - TTL (1 s by default): the backstop if a change message is ever missed, so a revoked
//   key is refused everywhere within the bound even then.
// - Negative entries: a client hammering with the same unknown key costs one store read
//   per negative TTL, not one per request. A hash unknown now cannot become known later
//   (new secrets are fresh random), so they are safe to keep.
// - Generation counter: a lookup that started before an invalidation must not put the
//   record it read (maybe the pre-revocation one) back into the cache.
// - Single flight: a burst of requests with one key after expiry makes one store read.
// - Stale on error: while the store does not answer, a record read at most
//   staleIfErrorMs ago still serves (expiry and revocation already in it still apply),
//   so a Redis blip does not log every client out. Nothing unknown is ever accepted.
//   When the feed comes back the cache starts empty, but what it held is kept for this
//   fallback only: in a failover the feed's connection may be back before the store's,
//   and clients whose keys were just read must not get a 503 in between.
import type { KeyLookup } from '../auth/api-key.ts'
import type { KeyRecord } from './record.ts'

export interface KeyCacheOptions {
  readonly store: KeyLookup
  /** How long a found record is used without asking the store again. */
  readonly ttlMs?: number
  /** How long an unknown hash is remembered as unknown. */
  readonly negativeTtlMs?: number
  /** How old a record may be to serve while the store fails; 0 turns it off. */
  readonly staleIfErrorMs?: number
  /** Bound on each of the positive and the negative maps. */
  readonly maxEntries?: number
  /** Start trusted (embedded mode: changes are all local). Redis mode starts untrusted until subscribed. */
  readonly trusted?: boolean
  readonly now?: () => number
}

export interface KeyCacheStats {
  readonly entries: number
  readonly negativeEntries: number
  readonly hits: number
  readonly misses: number
  readonly trusted: boolean
}

export interface KeyCache extends KeyLookup {
  /** Forgets everything known about this key id (and every negative entry). */
  invalidate(id: string): void
  /** Forgets everything. */
  clear(): void
  /**
   * Trusted: the change feed is live, entries serve until their TTL. Untrusted: messages
   * may be missed, so every lookup asks the store. Becoming trusted clears the cache.
   */
  setTrusted(trusted: boolean): void
  stats(): KeyCacheStats
}

export const DEFAULT_KEY_CACHE_TTL_MS = 1000
export const DEFAULT_NEGATIVE_TTL_MS = 5000
export const DEFAULT_STALE_IF_ERROR_MS = 30_000
const DEFAULT_MAX_ENTRIES = 10_000

interface Entry {
  readonly record: KeyRecord
  readonly fetchedAt: number
}

export function createKeyCache(options: KeyCacheOptions): KeyCache {
  const ttl = options.ttlMs ?? DEFAULT_KEY_CACHE_TTL_MS
  const negativeTtl = options.negativeTtlMs ?? DEFAULT_NEGATIVE_TTL_MS
  const staleIfError = options.staleIfErrorMs ?? DEFAULT_STALE_IF_ERROR_MS
  const max = options.maxEntries ?? DEFAULT_MAX_ENTRIES
  const now = options.now ?? Date.now
  const entries = new Map<string, Entry>()
  /** Entries dropped when the feed came back: only for stale-on-error, never served fresh. */
  const fallback = new Map<string, Entry>()
  const negative = new Map<string, number>()
  const inFlight = new Map<string, Promise<KeyRecord | null>>()
  let generation = 0
  let trusted = options.trusted ?? true
  let hits = 0
  let misses = 0

  /** Map insertion order is age order: the first entry is the oldest. */
  const put = <V>(map: Map<string, V>, key: string, value: V): void => {
    map.delete(key)
    map.set(key, value)
    if (map.size > max) {
      const oldest = map.keys().next()
      if (oldest.done !== true) map.delete(oldest.value)
    }
  }

  const fetch = (hash: string): Promise<KeyRecord | null> => {
    const started = generation
    const lookup = (async () => {
      try {
        const record = await options.store.findByHash(hash)
        // An invalidation arrived while we read: what we read may predate it.
        fallback.delete(hash)
        if (started === generation) {
          if (record === null) {
            entries.delete(hash)
            put(negative, hash, now())
          } else {
            put(entries, hash, { record, fetchedAt: now() })
          }
        }
        return record
      } catch (error) {
        const stale = entries.get(hash) ?? fallback.get(hash)
        if (stale !== undefined && staleIfError > 0 && now() - stale.fetchedAt <= staleIfError) return stale.record
        throw error
      }
    })()
    inFlight.set(hash, lookup)
    const forget = (): void => {
      if (inFlight.get(hash) === lookup) inFlight.delete(hash)
    }
    lookup.then(forget, forget)
    return lookup
  }

  return {
    async findByHash(hash) {
      if (trusted) {
        const at = now()
        const entry = entries.get(hash)
        if (entry !== undefined && at - entry.fetchedAt < ttl) {
          hits++
          return entry.record
        }
        const missAt = negative.get(hash)
        if (missAt !== undefined && at - missAt < negativeTtl) {
          hits++
          return null
        }
      }
      misses++
      return inFlight.get(hash) ?? fetch(hash)
    },

    invalidate(id) {
      generation++
      for (const [hash, entry] of entries) if (entry.record.id === id) entries.delete(hash)
      for (const [hash, entry] of fallback) if (entry.record.id === id) fallback.delete(hash)
      negative.clear()
      // Lookups still running may return what they read before the change; later
      // callers must not join them.
      inFlight.clear()
    },

    clear() {
      generation++
      entries.clear()
      fallback.clear()
      negative.clear()
      inFlight.clear()
    },

    setTrusted(value) {
      if (value && !trusted) {
        // Messages may have been missed while the feed was down: nothing serves fresh
        // any more, but a record read recently still may while the store fails.
        generation++
        for (const [hash, entry] of entries) put(fallback, hash, entry)
        entries.clear()
        negative.clear()
        inFlight.clear()
      }
      trusted = value
    },

    stats: () => ({ entries: entries.size, negativeEntries: negative.size, hits, misses, trusted }),
  }
}

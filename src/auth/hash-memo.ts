// The keyed hash of a presented API key, remembered for as long as the key cache keeps the
// record it finds (keys/cache.ts, 1 s by default): a client's burst hashes its key once a
// second instead of on every request (an HMAC was about 2 % of a JSON call's CPU profile,
// bench/results.md). Only keys that passed the shape and checksum check are remembered,
// and none longer than the TTL: the map holds no more than requests in flight would.
export interface HashMemo {
  get(key: string): string | undefined
  set(key: string, hash: string): void
}

export function createHashMemo(ttlMs: number, maxEntries: number, now: () => number): HashMemo {
  const memo = new Map<string, { readonly hash: string; readonly until: number }>()
  return {
    get(key) {
      const found = memo.get(key)
      if (found === undefined) return undefined
      if (found.until > now()) return found.hash
      memo.delete(key)
      return undefined
    },
    set(key, hash) {
      // Past the bound, start over: expired entries go with it (no sweep timer).
      if (memo.size >= maxEntries) memo.clear()
      memo.set(key, { hash, until: now() + ttlMs })
    },
  }
}

// A small in-process cache whose entries live at most `ttlMs`: what the verifier read about a
// session or a user is trusted that long, which bounds how late another instance's logout,
// disable or delete is seen here. Bounded in size; the oldest entry goes first.
export interface TtlCache<V> {
  get(key: string, load: () => Promise<V>): Promise<V>
  delete(key: string): void
}

export function createTtlCache<V>(ttlMs: number, maxEntries = 10_000, now: () => number = Date.now): TtlCache<V> {
  const entries = new Map<string, { value: Promise<V>; until: number }>()
  return {
    get(key, load) {
      const at = now()
      const hit = entries.get(key)
      if (hit !== undefined && hit.until > at) return hit.value
      if (ttlMs === 0) return load()
      const value = load()
      entries.delete(key)
      entries.set(key, { value, until: at + ttlMs })
      // A failed read is not kept: the next call asks the store again.
      value.catch(() => {
        if (entries.get(key)?.value === value) entries.delete(key)
      })
      if (entries.size > maxEntries) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
      return value
    },
    delete(key) {
      entries.delete(key)
    },
  }
}

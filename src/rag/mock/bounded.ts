// The mock remembers what callers made (files, tasks, sessions) in maps that a long run or
// a fuzzer could grow without end: each is cut back to its newest entries.

/** Keeps the newest `limit` entries of a map (insertion order; re-insert to renew one). */
export function keepNewest<K, V>(map: Map<K, V>, limit: number): void {
  for (const key of map.keys()) {
    if (map.size <= limit) return
    map.delete(key)
  }
}

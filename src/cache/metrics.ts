// The response cache's own series, in the gateway's registry: lookups by result (the hit
// ratio is hits over hits + misses), bytes written, evictions, and bytes held (memory store).
import { Counter, Gauge, type Registry } from 'prom-client'

export interface CacheMetrics {
  readonly lookups: Counter<'result' | 'endpoint'>
  readonly storedBytes: Counter
  readonly evictions: Counter
}

export function cacheMetrics(registry: Registry | undefined, bytesHeld: () => number | undefined): CacheMetrics {
  const registers = registry === undefined ? [] : [registry]
  new Gauge({
    name: 'tollgate_response_cache_bytes',
    help: 'Bytes the response cache holds now (the embedded store; absent on Redis)',
    registers,
    collect() {
      const held = bytesHeld()
      if (held !== undefined) this.set(held)
    },
  })
  return {
    lookups: new Counter({
      name: 'tollgate_response_cache_lookups_total',
      help: 'Calls the response cache answered (hit), sent on and kept (miss), or let by (bypass)',
      labelNames: ['result', 'endpoint'],
      registers,
    }),
    storedBytes: new Counter({
      name: 'tollgate_response_cache_stored_bytes_total',
      help: 'Bytes of sealed replies written to the response cache',
      registers,
    }),
    evictions: new Counter({
      name: 'tollgate_response_cache_evictions_total',
      help: 'Cached replies removed before their time to make room under a cap',
      registers,
    }),
  }
}

// Gateway instances as far as key changes go, for the key-event tests: each a key cache
// fed by the Redis change feed, all reading one stand-in store. Closed at the test's end.
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { KeyLookup } from '../../src/auth/api-key.ts'
import type { RedisTarget } from '../../src/config/redis-target.ts'
import { createKeyCache, type KeyCache } from '../../src/keys/cache.ts'
import { createRedisKeyEvents, type KeyEvents } from '../../src/keys/events.ts'
import type { Logger } from '../../src/observability/logger.ts'

export interface Instance {
  cache: KeyCache
  events: KeyEvents
  name: string
}

export interface InstanceOptions {
  readonly redis: string | RedisTarget
  readonly channel: string
  readonly store: KeyLookup
  readonly log: Logger
}

/** A maker of instances on `options.redis`; every one it made is closed at `t`'s end. */
export function instanceMaker(t: Test, options: InstanceOptions): () => Instance {
  const instances: Instance[] = []
  t.teardown(async () => {
    for (const i of instances) await i.events.close()
  })
  return () => {
    // A long TTL: whatever refreshes the cache in these tests is the message, not the clock.
    const cache = createKeyCache({ store: options.store, ttlMs: 600_000, negativeTtlMs: 600_000 })
    const name = `tgtest-keys-${randomBytes(4).toString('hex')}`
    const events = createRedisKeyEvents({
      redis: options.redis,
      channel: options.channel,
      commandTimeoutMs: 1000,
      cache,
      log: options.log,
      heartbeatMs: 200,
      connectionName: name,
    })
    const created = { cache, events, name }
    instances.push(created)
    return created
  }
}

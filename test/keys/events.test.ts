// Key changes through Redis pub/sub: a change on one instance empties the others' caches
// at once (not at the TTL), a lost subscriber connection makes the cache untrusted until
// it is back, and anything unexpected on the channel clears the cache.
//
// Redis at REDIS_URL (default 127.0.0.1:6379) is shared: everything here lives under a
// random prefix and is removed at the end. Without Redis these tests fail; they never skip.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { KeyLookup } from '../../src/auth/api-key.ts'
import { createKeyCache } from '../../src/keys/cache.ts'
import { createRedisKeyEvents, decodeKeyChange, encodeKeyChange, keyChangesChannel } from '../../src/keys/events.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createRedisClient, pingRedis } from '../../src/store/redis-client.ts'
import { makeKeyRecord } from '../store/records.ts'
import { instanceMaker } from './event-instances.ts'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = `tgtest:${randomBytes(6).toString('hex')}:`
const CHANNEL = keyChangesChannel(PREFIX)
const log = createLogger('silent')
const admin = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-events-admin' })
t.teardown(() => {
  admin.disconnect()
})

/** One shared "store" the instances read; the test changes it like another instance would. */
const records = new Map<string, KeyRecord>()
let storeReads = 0
const store: KeyLookup = {
  async findByHash(hash) {
    storeReads++
    return records.get(hash) ?? null
  },
}

const instance = instanceMaker(t, { redis: REDIS_URL, channel: CHANNEL, store, log })

async function until(check: () => boolean | Promise<boolean>, ms = 1000): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() >= end) return false
    await new Promise((r) => setTimeout(r, 10))
  }
}

const redisUp = await pingRedis(admin)

t.test('the channel is under the prefix and the hash tag; messages are {"id"}', async (t) => {
  t.equal(CHANNEL, `${PREFIX}{tg}:keys:changed`)
  t.equal(encodeKeyChange('key_1'), '{"id":"key_1"}')
  t.equal(decodeKeyChange('{"id":"key_1"}'), 'key_1')
  t.equal(decodeKeyChange('{"id":5}'), null)
  t.equal(decodeKeyChange('nonsense'), null)
})

if (!redisUp) {
  t.fail(
    `Redis does not answer at ${REDIS_URL}: the key change feed tests need it (set REDIS_URL or start redis-server)`,
  )
} else {
  t.test('a change on one instance reaches the other within a second, long before its TTL', async (t) => {
    const a = instance()
    const b = instance()
    t.ok(await a.events.ready(3000), 'instance a subscribed')
    t.ok(await b.events.ready(3000), 'instance b subscribed')
    const record = makeKeyRecord()
    records.set(record.hash, record)
    t.equal((await b.cache.findByHash(record.hash))?.status, 'active')
    const reads = storeReads
    await b.cache.findByHash(record.hash)
    t.equal(storeReads, reads, 'b serves the key from memory')

    records.set(record.hash, { ...record, status: 'revoked' })
    await a.events.changed(record.id)
    t.equal(
      (await a.cache.findByHash(record.hash))?.status,
      'revoked',
      'the instance that made the change sees it at once',
    )
    t.ok(
      await until(async () => (await b.cache.findByHash(record.hash))?.status === 'revoked'),
      'b sees the revocation within a second',
    )
  })

  t.test('a malformed message on the channel clears the whole cache', async (t) => {
    const a = instance()
    t.ok(await a.events.ready(3000))
    const record = makeKeyRecord()
    records.set(record.hash, record)
    await a.cache.findByHash(record.hash)
    await a.cache.findByHash('unknown-hash')
    t.ok(a.cache.stats().entries >= 1)
    await admin.publish(CHANNEL, 'garbage')
    t.ok(await until(() => a.cache.stats().entries === 0 && a.cache.stats().negativeEntries === 0), 'cleared')
  })

  t.test(
    'when the subscriber connection drops, the cache is untrusted until it resubscribes, then starts empty',
    async (t) => {
      const a = instance()
      const b = instance()
      t.ok(await a.events.ready(3000))
      t.ok(await b.events.ready(3000))
      const record = makeKeyRecord()
      records.set(record.hash, record)
      await b.cache.findByHash(record.hash)
      t.equal(b.cache.stats().trusted, true)

      const clients = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'))
      const line = clients.split('\n').find((l) => l.includes(` name=${b.name}-sub `))
      const id = /\bid=(\d+)/.exec(line ?? '')?.[1]
      t.ok(id, "found b's subscriber connection")
      await admin.call('CLIENT', 'KILL', 'ID', id ?? '0')
      t.ok(await until(() => !b.cache.stats().trusted, 2000), 'b stops trusting its cache when the feed is lost')

      // A change published while b is away: b must not keep the old record.
      records.set(record.hash, { ...record, status: 'revoked' })
      await a.events.changed(record.id)
      t.equal((await b.cache.findByHash(record.hash))?.status, 'revoked', 'while untrusted, b reads the store')
      t.ok(await b.events.ready(5000), 'b resubscribes by itself')
      t.equal(b.cache.stats().trusted, true)
      t.equal(b.cache.stats().entries, 0, 'and starts empty: messages may have been missed meanwhile')
    },
  )

  t.test('a change published while Redis refuses is retried, then given up without throwing', async (t) => {
    const cache = createKeyCache({ store })
    const events = createRedisKeyEvents({
      redis: 'redis://127.0.0.1:1',
      channel: CHANNEL,
      commandTimeoutMs: 200,
      cache,
      log,
      publishRetryDelaysMs: [10, 10],
    })
    t.teardown(() => events.close())
    const record = makeKeyRecord()
    records.set(record.hash, record)
    await cache.findByHash(record.hash)
    await events.changed(record.id)
    t.pass('changed() resolved although Redis is unreachable')
    t.equal(cache.stats().entries, 0, 'the local cache was still invalidated')
    t.equal(await events.ready(50), false, 'the feed is not live')
  })
}

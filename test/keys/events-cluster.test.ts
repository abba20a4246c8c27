// Key changes on a Redis Cluster (test/helpers/redis-topologies.sh, started when not
// running): the feed is sharded pub/sub (SPUBLISH and SSUBSCRIBE on the master of the
// channel's slot, nothing on the cluster bus), a change published through one instance
// reaches the others, and when the subscriber's connection is cut the client subscribes
// again by itself, so changes reach the instance again. Everything lives under a random prefix.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { KeyLookup } from '../../src/auth/api-key.ts'
import { keyChangesChannel } from '../../src/keys/events.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { CLUSTER_PORTS, ensureTopology, TARGETS } from '../helpers/topologies.ts'
import { makeKeyRecord } from '../store/records.ts'
import { instanceMaker, type Instance } from './event-instances.ts'
import { Redis } from 'ioredis'

await ensureTopology('cluster')
const CHANNEL = keyChangesChannel(`tgtest:${randomBytes(6).toString('hex')}:`)
const log = createLogger('silent')
const records = new Map<string, KeyRecord>()
const store: KeyLookup = {
  async findByHash(hash) {
    return records.get(hash) ?? null
  },
}

const instance = instanceMaker(t, { redis: TARGETS.cluster, channel: CHANNEL, store, log })

async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() >= end) return false
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Caches a fresh record in b, changes it through a, and waits for b to drop it. */
async function changeReaches(a: Instance, b: Instance, ms: number): Promise<boolean> {
  const record = makeKeyRecord()
  records.set(record.hash, record)
  await b.cache.findByHash(record.hash)
  if (b.cache.stats().entries === 0) return false
  records.set(record.hash, { ...record, status: 'revoked' })
  return until(async () => {
    await a.events.changed(record.id)
    return (await b.cache.findByHash(record.hash))?.status === 'revoked'
  }, ms)
}

const a = instance()
const b = instance()

t.test('a change published through one node reaches a subscriber on another at once', async (t) => {
  t.ok(await a.events.ready(10_000), 'a is live')
  t.ok(await b.events.ready(10_000), 'b is live')
  t.ok(await changeReaches(a, b, 1000), 'b dropped the changed key within a second')
  t.ok(await changeReaches(b, a, 1000), 'and the other way round')
})

t.test('the feed is a shard channel on one master, not a classic channel anywhere', async (t) => {
  t.ok(await b.events.ready(10_000), 'b is live')
  let shard = 0
  let classic = 0
  for (const port of CLUSTER_PORTS) {
    const node = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null })
    node.on('error', () => {})
    try {
      await node.connect()
      const role = String(await node.call('ROLE')).split(',')[0]
      if (role === 'master') {
        shard += ((await node.call('PUBSUB', 'SHARDCHANNELS', CHANNEL)) as string[]).length
        classic += ((await node.call('PUBSUB', 'CHANNELS', CHANNEL)) as string[]).length
      }
    } catch {
      // a node that is down (a failover test elsewhere) holds no subscription
    } finally {
      node.disconnect()
    }
  }
  t.equal(shard, 1, 'one master has it as a shard channel')
  t.equal(classic, 0, 'no node has it as a classic channel')
})

t.test(
  'the subscriber connection is cut: the cluster client subscribes again on a node, changes reach it again',
  async (t) => {
    // ioredis names a cluster's sharded subscriber connection ioredis-cluster(ssubscriber):<name>.
    const wanted = `name=ioredis-cluster(ssubscriber):${b.name}-sub `
    // A failover test elsewhere may have moved a master meanwhile: the subscription is then
    // being made again on another node. Look until it is there (bounded).
    let killed = 0
    for (let attempt = 0; attempt < 50 && killed === 0; attempt++) {
      if (attempt > 0) await new Promise((done) => setTimeout(done, 200))
      await b.events.ready(5_000)
      // One cut, then stop looking: the client subscribes again at once, maybe on a node
      // further down this list, and cutting that one too would test something else.
      for (const port of CLUSTER_PORTS) {
        if (killed > 0) break
        const node = new Redis({
          host: '127.0.0.1',
          port,
          lazyConnect: true,
          retryStrategy: () => null,
          maxRetriesPerRequest: 0,
        })
        node.on('error', () => {})
        try {
          await node.connect()
          const line = String(await node.call('CLIENT', 'LIST', 'TYPE', 'pubsub'))
            .split('\n')
            .find((l) => l.includes(wanted))
          const id = /\bid=(\d+)/.exec(line ?? '')?.[1]
          if (id !== undefined) killed += Number(await node.call('CLIENT', 'KILL', 'ID', id))
        } catch {
          // a node that is down (a failover test elsewhere) holds no subscription
        } finally {
          node.disconnect()
        }
      }
    }
    t.equal(killed, 1, "found and cut b's subscriber connection")
    t.ok(await changeReaches(a, b, 10_000), 'a change reaches b again')
    t.ok(await until(() => b.cache.stats().trusted, 5000), 'and b trusts its cache again')
  },
)

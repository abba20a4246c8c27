// Where per-call state lands on a Redis Cluster of three masters (issue #25): each of the
// state that belongs to one owner (or one deployment) on its own slot, so owners spread over
// the masters, and every script of theirs legal (no CROSSSLOT). The cluster is
// test/helpers/redis-topologies.sh's (127.0.0.1:7100-7105), started when it is not running.
import { randomBytes } from 'node:crypto'
import type { Cluster } from 'ioredis'
import t from 'tap'
import { createRedisStores, redisKeys } from '../../src/store/redis.ts'
import { identityNamespace } from '../../src/store/redis-kit.ts'
import {
  deleteUnderPrefix,
  ensureTopology,
  masterPorts,
  ownerOnMaster,
  resetMasterStats,
  scriptCallsPerMaster,
  topologyClient,
} from '../helpers/topologies.ts'

t.setTimeout(120_000)
await ensureTopology('cluster')
const redis = topologyClient('cluster') as Cluster
const prefix = `tgtest:${randomBytes(6).toString('hex')}:`
t.teardown(async () => {
  await deleteUnderPrefix(redis, prefix)
  redis.disconnect()
})
const ports = await masterPorts('cluster')
/** One owner per master, in port order. */
const owners = await Promise.all(ports.map((port) => ownerOnMaster(port, 'slots')))

/** The port of the master that holds `key`, or undefined when none does. */
async function masterHolding(key: string): Promise<number | undefined> {
  for (const node of redis.nodes('master')) {
    // A master that does not serve the key's slot answers MOVED.
    const held = await node.exists(key).catch(() => 0)
    if (held === 1) return Number(node.options.port)
  }
  return undefined
}

t.test("stream journal: each owner's streams on its own master, recovered from all of them", async (t) => {
  t.equal(ports.length, 3, 'three masters')
  const stores = createRedisStores(redis, prefix)
  const k = redisKeys(prefix)
  const at = Date.now()
  const day = new Date(at).toISOString().slice(0, 10)
  const entry = (id: string, owner: string, instance: string) => ({
    id,
    instance,
    keyId: `key-${owner}`,
    owner,
    tier: 'Basic',
    model: 'm',
    at,
    inputTokens: 10,
    outputTokens: 0,
    costNanos: 10,
  })
  await resetMasterStats(redis)
  for (const owner of owners) {
    // One stream settles as its call ends; one is left by a gateway that stops.
    const settled = entry(`str-s-${owner}`, owner, 'gw-up')
    const left = entry(`str-l-${owner}`, owner, 'gw-gone')
    await stores.streams.open(settled)
    await stores.streams.open(left)
    await stores.streams.checkpoint(settled, { inputTokens: 10, outputTokens: 4, costNanos: 18 }, at)
    await stores.streams.checkpoint(left, { inputTokens: 10, outputTokens: 6, costNanos: 22 }, at)
    await stores.usage.add([
      {
        keyId: settled.keyId,
        owner,
        tier: 'Basic',
        model: 'm',
        day,
        requests: 1,
        inputTokens: 10,
        outputTokens: 5,
        costNanos: 20,
        stream: settled.id,
        id: `w-${owner}`,
      },
    ])
  }
  const scripts = await scriptCallsPerMaster(redis)
  for (const port of ports)
    t.ok((scripts.get(port) ?? 0) >= 5, `master ${port} ran its owner's opens, checkpoints and settle`)
  for (const [i, owner] of owners.entries()) {
    const journal = k.journalIn(identityNamespace(prefix, { keyId: `key-${owner}`, owner }))
    t.equal(await masterHolding(journal.entry(`str-l-${owner}`)), ports[i], `${owner}'s entry on master ${ports[i]}`)
  }

  const stopped = async (instance: string): Promise<boolean> => instance === 'gw-gone'
  const left = await stores.streams.list(stopped)
  t.strictSame(left.map((e) => e.owner).sort(), [...owners].sort(), 'the stopped gateway: one stream on each master')
  for (const e of left) t.match(await stores.streams.recover(e), { requests: 1, outputTokens: 6 })
  for (const owner of owners)
    t.match(await stores.usage.query({ keyId: `key-${owner}` }), [{ requests: 2, inputTokens: 20, outputTokens: 11 }])
  t.strictSame(await stores.streams.list(), [], 'nothing left journalled')
})

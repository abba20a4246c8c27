// Where per-call state lands on a Redis Cluster of three masters (issue #25): each of the
// state that belongs to one owner (or one deployment) on its own slot, so owners spread over
// the masters, and every script of theirs legal (no CROSSSLOT). The cluster is
// test/helpers/redis-topologies.sh's (127.0.0.1:7100-7105), started when it is not running.
import { randomBytes } from 'node:crypto'
import type { Cluster } from 'ioredis'
import type { Test } from 'tap'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { capacityKeys, redisCapacityStore } from '../../src/capacity/redis.ts'
import { migrateFileQuota } from '../../src/files/quota-migration.ts'
import { createRedisFileQuotaStore, fileQuotaKeys } from '../../src/files/redis-quota-store.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { redisPortalSessions } from '../../src/store/portal-sessions.ts'
import { createRedisStores, redisKeys } from '../../src/store/redis.ts'
import { userScopedId } from '../../src/store/user-ids.ts'
import { capacityNamespace, identityNamespace, userNamespace } from '../../src/store/redis-kit.ts'
import {
  deleteUnderPrefix,
  ensureTopology,
  masterPorts,
  nameOnMaster,
  ownerOnMaster,
  resetMasterStats,
  scriptCallsPerMaster,
  topologyClient,
} from '../helpers/topologies.ts'

/**
 * Run by cluster.test.ts after the scale-out suite, in the same file: as a file of its own
 * it ran beside that suite (tap runs two files at once), and its setup restarted the master
 * the suite had just killed, empty, before its replica took over (every key then unknown).
 */
export function slotsSuite(parent: Test): void {
  parent.test('where per-call state lands on the cluster (issue #25)', async (t) => {
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
        t.equal(
          await masterHolding(journal.entry(`str-l-${owner}`)),
          ports[i],
          `${owner}'s entry on master ${ports[i]}`,
        )
      }

      const stopped = async (instance: string): Promise<boolean> => instance === 'gw-gone'
      const left = await stores.streams.list(stopped)
      t.strictSame(
        left.map((e) => e.owner).sort(),
        [...owners].sort(),
        'the stopped gateway: one stream on each master',
      )
      for (const e of left) t.match(await stores.streams.recover(e), { requests: 1, outputTokens: 6 })
      for (const owner of owners)
        t.match(await stores.usage.query({ keyId: `key-${owner}` }), [
          { requests: 2, inputTokens: 20, outputTokens: 11 },
        ])
      t.strictSame(await stores.streams.list(), [], 'nothing left journalled')
    })

    t.test("capacity: each pool of deployments on its own master, a call's pick one script there", async (t) => {
      // One pool per master: a model of two deployments (its pool named by the first in sort order).
      const pools = await Promise.all(
        ports.map((port) => nameOnMaster(port, 'pool', (p) => capacityNamespace(prefix, p))),
      )
      const models = pools.map((pool) => [pool, `${pool}~b`])
      const store = redisCapacityStore(redis, prefix)
      const capacity = createDeploymentCapacity(store, {
        deployments: Object.fromEntries(models.flat().map((id) => [id, { rpm: 100, maxConcurrent: 10 }])),
        pools: Object.fromEntries(
          models.flatMap(([pool, other]) => [
            [pool, pool],
            [other, pool],
          ]),
        ),
        onError: (error) => {
          throw error
        },
      })
      const call = async (ids: string[]): Promise<void> => {
        const got = await capacity.acquire(ids, { tokens: 1 })
        if (!got.ok) throw new Error(`no room on ${ids.join(', ')}`)
        await got.lease.release({ tokens: 1 })
      }
      // A first call per master loads the scripts there (EVALSHA, NOSCRIPT, EVAL): not counted.
      for (const ids of models) await call(ids)
      await resetMasterStats(redis)
      for (const ids of models) for (let i = 0; i < 4; i++) await call(ids)
      const scripts = await scriptCallsPerMaster(redis)
      // At least: the stats count every client's scripts (a gateway's timers may run one meanwhile).
      for (const port of ports)
        t.ok((scripts.get(port) ?? 0) >= 8, `master ${port}: its pool's four acquires and releases`)
      const keys = capacityKeys(prefix)
      for (const [i, ids] of models.entries()) {
        // The pick between the two is weighted at random: all five calls may land on one of them
        // (1 in 16), so each count found must be on the pool's master, and one must be found.
        const held = await Promise.all(ids.map((id) => masterHolding(keys.of({ id, pool: ids[0] })[3] as string)))
        t.strictSame(
          [...new Set(held.filter((port) => port !== undefined))],
          [ports[i]],
          `${ids[0]}'s counts on ${ports[i]}`,
        )
      }
      t.match(
        await capacity.inspect(models.flat()),
        models.flat().map((deploymentId) => ({ deploymentId })),
        'inspect spans the pools',
      )
    })

    t.test("file quota: each key's counts on its own master; the {tg} layout carried over from all", async (t) => {
      const keyIds = await Promise.all(
        ports.map((port) => nameOnMaster(port, 'fq-key', (keyId) => identityNamespace(prefix, { keyId }))),
      )
      const store = createRedisFileQuotaStore(redis, prefix)
      const k = fileQuotaKeys(prefix)
      for (const [i, keyId] of keyIds.entries()) {
        // One file counted by a Tollgate before #25, one uploaded now.
        await redis.hset(k.old.files(keyId), `old-${i}`, 7)
        await redis.hset(k.old.total(keyId), { n: 1, b: 7 })
        await redis.set(k.of(`old-${i}`), keyId)
        t.equal(await store.hold(keyId, 'h', 3, { files: 5, bytes: 100 }, 60_000).then((h) => h.held), true)
        await store.commit(keyId, 'h', `new-${i}`, 3)
      }
      t.equal(await migrateFileQuota(redis, prefix, createLogger('silent')), 3, 'one old file of each key')
      for (const [i, keyId] of keyIds.entries()) {
        t.strictSame(await store.usage(keyId), { files: 2, bytes: 10 })
        t.equal(await masterHolding(k.files(keyId)), ports[i], `${keyId}'s files on master ${ports[i]}`)
        await store.release(`old-${i}`)
        t.strictSame(await store.usage(keyId), { files: 1, bytes: 3 }, 'a deleted file is given back')
      }
    })

    t.test("sessions: each user's RAG and portal sessions on its own master, found from their ids alone", async (t) => {
      const users = await Promise.all(
        ports.map((port) => nameOnMaster(port, 'usr', (user) => userNamespace(prefix, user))),
      )
      const stores = createRedisStores(redis, prefix)
      const portal = redisPortalSessions(redis, prefix)
      const now = new Date()
      const until = new Date(now.getTime() + 60_000)
      for (const [i, user] of users.entries()) {
        const id = userScopedId(`ses_${i}`, user)
        const hash = userScopedId('a'.repeat(64), user)
        await stores.sessions.create(
          {
            id,
            userId: user,
            username: user,
            createdAt: now.toISOString(),
            expiresAt: until.toISOString(),
            revokedAt: null,
          },
          hash,
        )
        const next = { hash: userScopedId('b'.repeat(64), user), seed: 's' }
        t.match(
          await stores.sessions.rotateRefresh(hash, next, now, 0),
          { outcome: 'rotated' },
          'a refresh: one script',
        )
        const portalId = userScopedId('c'.repeat(64), user)
        await portal.put(
          {
            id: portalId,
            userId: user,
            username: user,
            csrfToken: 'x',
            createdAt: now.toISOString(),
            lastSeenAt: now.toISOString(),
            expiresAt: until.toISOString(),
          },
          until,
        )
        await portal.putOnce(userScopedId('d', user), 'sealed', until)
        t.match(await portal.get(portalId), { userId: user })
        t.equal(await portal.takeOnce(userScopedId('d', user)), 'sealed')
        const slot = userNamespace(prefix, user)
        t.equal(await masterHolding(`${slot}sess:${id}`), ports[i], `${user}'s RAG session on master ${ports[i]}`)
        t.equal(await masterHolding(`${slot}portal:session:${portalId}`), ports[i], 'and its portal session')
      }
    })
  })
}

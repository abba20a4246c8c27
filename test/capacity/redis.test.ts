// Deployment capacity on the shared Redis: the contract, with each of the three
// "instances" on its own ioredis connection; plus what only Redis has: one round trip per
// acquire and per release, and the key layout under `<prefix>{c:<pool>}:cap:`.
//
// Everything lives under a random `tgtest:capacity:` prefix, deleted at the end.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { Redis } from 'ioredis'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { DEFAULT_RULES, type DeploymentCapacity } from '../../src/capacity/port.ts'
import {
  capacityKeys,
  capacityLearnedChannel,
  capacityRoomChannel,
  redisCapacityStore,
} from '../../src/capacity/redis.ts'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'
import { createRedisClient, pingRedis } from '../../src/store/redis-client.ts'
import { pollUntil } from '../helpers/poll.ts'
import { startQuotaUpstream } from '../helpers/quota-upstream.ts'
import { deleteUnder, keysUnder, REDIS_URL } from '../helpers/redis.ts'
import { countCommands } from '../limits/helpers.ts'
import { capacityContract, seeded, T0 } from './contract.ts'

const NAMESPACE = `tgtest:capacity:${randomBytes(6).toString('hex')}:`
let n = 0
const clients: Redis[] = []
const client = (): Redis => {
  const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-capacity' })
  clients.push(redis)
  return redis
}
const admin = client()

/** What is published on `channel` from now on, as it arrives (a connection of its own). */
async function heardOn(channel: string): Promise<string[]> {
  const listener = client()
  await pingRedis(listener)
  const heard: string[] = []
  listener.on('message', (_channel: string, message: string) => heard.push(message))
  await listener.subscribe(channel)
  return heard
}
t.teardown(async () => {
  try {
    await deleteUnder(admin, NAMESPACE)
  } finally {
    for (const c of clients) c.disconnect()
  }
})

if (!(await pingRedis(admin))) {
  t.fail(`Redis does not answer at ${REDIS_URL}: the capacity tests need it (set REDIS_URL or start redis-server)`)
} else {
  capacityContract(t, 'redis', async (rules) => {
    const prefix = `${NAMESPACE}${n++}:`
    const connections = [client(), client(), client()]
    await Promise.all(connections.map((redis) => pingRedis(redis)))
    const stores = connections.map((redis) => redisCapacityStore(redis, prefix, rules))
    return stores as unknown as readonly [(typeof stores)[0], (typeof stores)[0], (typeof stores)[0]]
  })

  t.test('redis: one round trip per acquire and per release, whatever the number of candidates', async (t) => {
    const redis = client()
    await pingRedis(redis)
    const store = redisCapacityStore(redis, `${NAMESPACE}${n++}:`)
    await store.warm()
    const capacity = createDeploymentCapacity(store, {
      deployments: { a: { rpm: 100, tpm: 10_000 }, b: { maxConcurrent: 4 }, c: { weight: 2 } },
      now: () => T0,
      random: seeded(7),
    })
    const commands = countCommands(redis)
    t.teardown(() => commands.restore())
    const got = await capacity.acquire(['a', 'b', 'c'], { tokens: 50 })
    t.equal(commands.count(), 1)
    t.equal(commands.count('evalsha'), 1)
    if (!got.ok) throw new Error('no lease')
    got.lease.observe(
      observeResponse(200, { 'x-ratelimit-remaining-requests': '10', 'x-ratelimit-reset-requests': '1s' }, { now: T0 }),
    )
    await got.lease.release({ tokens: 40 })
    t.equal(commands.count(), 2, 'the release carries the observation')
  })

  t.test('redis: a release that makes room where a call was refused is published, once per refusal', async (t) => {
    const prefix = `${NAMESPACE}${n++}:`
    const channel = capacityRoomChannel(prefix)
    const heard = await heardOn(channel)
    const connections = [client(), client()]
    await Promise.all(connections.map((redis) => pingRedis(redis)))
    const [one, two] = connections.map((redis) =>
      createDeploymentCapacity(redisCapacityStore(redis, prefix), {
        deployments: { a: { maxConcurrent: 1 } },
        now: () => T0,
      }),
    ) as [DeploymentCapacity, DeploymentCapacity]
    /** Everything published before it has arrived once this marker has (one channel keeps its order). */
    const settled = async (marker: string): Promise<string[]> => {
      await admin.publish(channel, marker)
      await pollUntil(
        async () => heard.includes(marker),
        (yes) => yes,
      )
      return heard.filter((m) => !m.startsWith('marker'))
    }
    const first = await one.acquire(['a'], { tokens: 1 })
    if (!first.ok) throw new Error('no lease')
    await first.lease.release()
    t.same(await settled('marker 1'), [], 'no call was refused: a freed slot is not published')
    const held = await one.acquire(['a'], { tokens: 1 })
    if (!held.ok) throw new Error('no lease')
    t.equal((await two.acquire(['a'], { tokens: 1 })).ok, false, 'full: refused on another instance')
    await held.lease.release()
    t.same(await settled('marker 2'), ['a'], 'the slot it waits for freed: published')
    const again = await two.acquire(['a'], { tokens: 1 })
    if (!again.ok) throw new Error('no lease')
    await again.lease.release()
    t.same(await settled('marker 3'), ['a'], 'once: no refusal since, nothing more')
  })

  t.test('redis: a limit one instance learns is announced once; the others then ask the store about it', async (t) => {
    const prefix = `${NAMESPACE}${n++}:`
    const channel = capacityLearnedChannel(prefix)
    const heard = await heardOn(channel)
    const connections = [client(), client()]
    await Promise.all(connections.map((redis) => pingRedis(redis)))
    const clock = { now: T0 }
    const [one, two] = connections.map((redis) =>
      createDeploymentCapacity(redisCapacityStore(redis, prefix), {
        deployments: {},
        now: () => clock.now,
        random: () => 0,
      }),
    ) as [DeploymentCapacity, DeploymentCapacity]
    const got = await one.acquire(['x'], { tokens: 1 })
    if (!got.ok) throw new Error('no lease')
    got.lease.observe(observeResponse(429, { 'retry-after': '30' }, { now: clock.now }))
    await got.lease.release()
    await one.observe('x', observeResponse(429, { 'retry-after': '40' }, { now: clock.now }))
    await admin.publish(channel, 'marker')
    await pollUntil(
      async () => heard.includes('marker'),
      (yes) => yes,
    )
    t.same(heard, ['x', 'marker'], 'announced once, on its first lesson')
    // Nothing declared, nothing learned here: x is picked by weight (first), without the store.
    const blind = await two.acquire(['x', 'y'], { tokens: 1 })
    t.equal(blind.ok && blind.lease.deploymentId, 'x', 'before the announcement: blind to the cooldown')
    two.learnedElsewhere('x')
    const told = await two.acquire(['x', 'y'], { tokens: 1 })
    t.equal(told.ok && told.lease.deploymentId, 'y', 'after it: the cooldown another instance learned is skipped')
  })

  t.test(
    "redis: keys under <prefix>{c:<pool>}:cap:, URI-encoded, on the pool's slot, and every one expires",
    async (t) => {
      const prefix = `${NAMESPACE}${n++}:`
      const store = redisCapacityStore(client(), prefix)
      const capacity = createDeploymentCapacity(store, {
        deployments: { 'azure/gpt 4o:east': { rpm: 10, tpm: 100, maxConcurrent: 2 }, 'azure/gpt 4o:west': { rpm: 1 } },
        pools: { 'azure/gpt 4o:east': 'azure/gpt 4o:west', 'azure/gpt 4o:west': 'azure/gpt 4o:west' },
        now: Date.now,
      })
      const got = await capacity.acquire(['azure/gpt 4o:east'], { tokens: 5 })
      if (!got.ok) throw new Error('no lease')
      got.lease.observe(
        observeResponse(
          429,
          { 'retry-after': '1', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '2s' },
          { now: Date.now() },
        ),
      )
      const taken = await capacity.acquire(['azure/gpt 4o:east'], { tokens: 5 })
      t.equal(taken.ok, true)
      await got.lease.release()
      const keys = await keysUnder(admin, prefix)
      const base = `${prefix}{c:azure%2Fgpt%204o%3Awest}:cap:azure%2Fgpt%204o%3Aeast:`
      t.same(
        keys,
        ['c', 'f', 'l', 'r', 't'].map((s) => base + s),
      )
      for (const key of keys) {
        const ttl = await admin.pttl(key)
        t.ok(ttl > 0 && ttl <= DEFAULT_RULES.leaseTtlMs, `${key} expires (${ttl} ms)`)
      }
      t.throws(() => capacityKeys('bad{prefix}'), RangeError)
    },
  )

  t.test('redis: candidates of two pools in one acquire are refused (one script cannot pick among them)', async (t) => {
    const store = redisCapacityStore(client(), `${NAMESPACE}${n++}:`)
    const spec = (id: string, pool: string) => ({ id, pool, weight: 1, rpm: 1, tpm: 0, maxConcurrent: 0 })
    const request = { now: T0, leaseId: 'l', tokens: 1, random: 0 }
    await t.rejects(store.acquire({ ...request, candidates: [spec('a', 'a'), spec('b', 'b')] }), TypeError)
    t.match(await store.acquire({ ...request, candidates: [spec('a', 'a'), spec('b', 'a')] }), { ok: true })
    t.match(
      await store.inspect([spec('a', 'a'), spec('c', 'c'), spec('b', 'a')], T0),
      [{ deploymentId: 'a' }, { deploymentId: 'c' }, { deploymentId: 'b' }],
      'inspect reads each pool apart, in the order asked',
    )
  })

  t.test('redis: maxConcurrent 4 across three instances, measured at the upstream', async (t) => {
    const up = await startQuotaUpstream({ maxConcurrent: 4 })
    t.teardown(() => up.close())
    const prefix = `${NAMESPACE}${n++}:`
    const connections = [client(), client(), client()]
    await Promise.all(connections.map((redis) => pingRedis(redis)))
    const instances = connections.map((redis) =>
      createDeploymentCapacity(redisCapacityStore(redis, prefix), { deployments: { ollama: { maxConcurrent: 4 } } }),
    )
    const body = JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'hi' }] })
    async function call(capacity: DeploymentCapacity): Promise<boolean> {
      const got = await capacity.acquire(['ollama'], { tokens: 10 })
      if (!got.ok) return false
      try {
        const res = await fetch(`${up.url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        })
        got.lease.observe(
          observeResponse(res.status, Object.fromEntries(res.headers), { now: Date.now(), body: await res.text() }),
        )
      } finally {
        await got.lease.release()
      }
      return true
    }
    for (let round = 0; round < 3; round++) {
      up.pause()
      const calls = Array.from({ length: 30 }, (_, i) => call(instances[i % 3] as DeploymentCapacity))
      t.ok(
        (
          await pollUntil(
            async () => up.inFlight(),
            (k) => k === 4,
          )
        ).met,
        `round ${round}: four calls reach the upstream`,
      )
      up.resume()
      const served = (await Promise.all(calls)).filter(Boolean).length
      t.ok(served >= 4, `round ${round}: ${served} served, the rest told to come back`)
    }
    t.equal(up.stats().peakInFlight, 4)
    t.equal(up.stats().overConcurrency, 0)
  })
}

// The queue store contract on the shared Redis (under a random prefix, deleted at the
// end), and what only Redis has: several instances on one line, the key layout, and the
// sweep that takes out calls of gateways that stopped and requests whose record is gone.
import t from 'tap'
import type { Redis } from 'ioredis'
import { createRedisQueueStore, queueKeys, queueShards } from '../../src/queue/redis-store.ts'
import type { Ticket } from '../../src/queue/ports.ts'
import { shardOfId, shardOfKey } from '../../src/queue/shards.ts'
import { jobTicket, lineOf } from '../../src/queue/tickets.ts'
import { redisNamespace } from '../../src/store/redis-kit.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { CONTRACT_SHARDS, newRequest, queueStoreContract } from './store-contract.ts'
import { openInFreshSpace } from './spaces.ts'

const client = (): Redis => createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-queue' })
const { namespace: NAMESPACE, admin, fresh } = testNamespace(t, 'queue', 'tgtest-queue')

const space = async () => {
  const { prefix, cleanup } = fresh()
  return {
    prefix,
    open: async (options: { resultTtlMs?: number } = {}) =>
      createRedisQueueStore(client(), prefix, { resultTtlMs: options.resultTtlMs ?? 60_000 }, CONTRACT_SHARDS),
    cleanup,
  }
}

queueStoreContract(t, 'redis', space)

t.test(
  "redis: every key is under the prefix: a key's requests and lines on its shard's hash tag, the rest on {tg}",
  async (t) => {
    const {
      opened: [store],
    } = await openInFreshSpace(t, space, async (s) => [await s.open()])
    const r = newRequest()
    const shard = shardOfKey(r.keyId, CONTRACT_SHARDS)
    t.equal(shardOfId(r.id), shard, "the id names its key's shard")
    await store.submit(r, Buffer.from('body'))
    await store.join(r.line, { kind: 'call', instance: 'i', id: 'c', joinedAt: 1 })
    await store.heartbeat('i', 5000)
    const keys = await keysUnder(admin, NAMESPACE)
    t.ok(keys.length >= 6)
    const onShard = keys.filter((key) => key.includes(`:{q${shard}}:q:`))
    for (const key of keys) t.match(key, /^tgtest:queue:[0-9a-f]+:\d+:\{(tg|q\d)\}:q:/)
    t.same(
      onShard.map((key) => key.replace(/^.*\}:q:/, '').replace(/:.*$/, '')).sort(),
      ['body', 'line', 'lines', 'pend', 'pendb', 'req', 'seq'],
      "the request, its body, line and the key's pending counters on the shard",
    )
    t.same(
      keys
        .filter((key) => key.includes(':{tg}:q:'))
        .map((key) => key.replace(/^.*\}:q:/, '').replace(/:.*$/, ''))
        .sort(),
      ['alive', 'owner'],
      'the owner index and the heartbeat on {tg}',
    )
    t.throws(() => queueKeys(redisNamespace('bad{prefix}:')), RangeError)
    t.throws(() => queueShards('bad{prefix}:', 2), RangeError)
    t.throws(() => queueShards('ok:', 0), RangeError)
  },
)

t.test('redis: two instances joining at once get one order', async (t) => {
  const {
    opened: [a, b],
  } = await openInFreshSpace(t, space, async (s) => [await s.open(), await s.open()])
  const line = lineOf('key_c', 'm')
  const tickets: Ticket[] = Array.from({ length: 40 }, (_, i) => ({
    kind: 'call',
    instance: i % 2 ? 'ia' : 'ib',
    id: `c${i}`,
    joinedAt: 1,
  }))
  const ranks = await Promise.all(tickets.map((ticket, i) => (i % 2 ? a : b).join(line, ticket)))
  t.same(
    [...ranks].sort((x, y) => x - y),
    tickets.map((_, i) => i),
    'each place given once',
  )
  for (const [i, ticket] of tickets.entries()) t.equal(await a.position(line, ticket), ranks[i])
})

t.test('redis: the sweep takes out calls of stopped gateways and requests without a record', async (t) => {
  const {
    opened: [store],
  } = await openInFreshSpace(t, space, async (s) => [await s.open()])
  const line = lineOf('key_d', 'm')
  const dead: Ticket = { kind: 'call', instance: 'gone', id: 'c1', joinedAt: 1 }
  const orphan: Ticket = { kind: 'job', id: 'qreq_orphan', joinedAt: 1 }
  const live: Ticket = { kind: 'call', instance: 'here', id: 'c2', joinedAt: 1 }
  await store.heartbeat('here', 10_000)
  await store.join(line, dead)
  await store.join(line, orphan)
  await store.join(line, live)
  const r = newRequest({ keyId: 'key_e', line: lineOf('key_e', 'm') })
  await store.submit(r, null)
  const heads = await store.sweep(60_000)
  t.same(heads?.map((h) => h.head.id).sort(), ['c2', r.id].sort())
  t.equal(await store.position(line, live), 0, 'the live call is head now')
  t.equal(await store.sweep(60_000), null, 'one sweep per interval across instances')
  t.equal(await store.position(r.line, jobTicket(r)), 0)
})

t.test("redis: a key's pending count forgets requests whose records expired unfinished", async (t) => {
  const {
    space: s,
    opened: [store],
  } = await openInFreshSpace(t, space, async (s) => [await s.open({ resultTtlMs: 200 })])
  const caps = { requests: 1, bytes: 1_000_000 }
  const r = newRequest({ createdAt: Date.now() })
  await store.submit(r, null, undefined, caps)
  t.equal((await store.pending(r.keyId)).requests, 1)
  // A queued record lives three result ttls; then it is gone without having finished.
  while ((await admin.exists(queueShards(s.prefix, CONTRACT_SHARDS).ofId(r.id).request(r.id))) === 1)
    await new Promise((done) => setTimeout(done, 50))
  t.same(await store.pending(r.keyId), { requests: 0, bytes: 0 })
  // (Its dead ticket stays ahead in the line until the next sweep.)
  t.ok(
    (await store.submit(newRequest({ createdAt: Date.now() }), null, undefined, caps)) >= 0,
    'its place is free again',
  )
  t.equal((await store.pending(r.keyId)).requests, 1)
})

// The stored queue before it was sharded (issue #25) kept everything under `{tg}`: records,
// lines, leases, the key's pending counters, and BullMQ's jobs under `{tg}:bull`. A
// gateway of this version, sharded, must finish what such a gateway left queued: the head
// whose job waits in the old BullMQ queue, and the request behind it in its old line.
import t from 'tap'
import { createRequire } from 'node:module'
import type * as BullMQ from 'bullmq'
import { createRedisQueueStore } from '../../src/queue/redis-store.ts'
import { lineOf } from '../../src/queue/tickets.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { keysUnder, REDIS_URL } from '../helpers/redis.ts'
import { cluster, get, MODEL, until, type QueueView } from './helpers.ts'
import { newRequest } from './store-contract.ts'

t.test('requests queued under the unsharded layout ({tg}) complete and read after the upgrade', async (t) => {
  const c = await cluster(t)
  const front = await c.start({ queue: { concurrency: 0, shards: 4 } })
  const { key, id: keyId } = await front.createKey({ tier: 'Standard4000' })

  // What the earlier version wrote: ids of 16 random characters (no shard), under {tg}.
  const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-upgrade' })
  const old = createRedisQueueStore(redis, c.ns.prefix, { resultTtlMs: 60_000 })
  t.teardown(() => old.close())
  const request = (id: string, at: number) =>
    newRequest({
      id,
      keyId,
      owner: keyId,
      tier: 'Standard4000',
      line: lineOf(keyId, MODEL),
      createdAt: at,
      call: {
        endpoint: 'chat.completions',
        model: MODEL,
        params: {},
        query: '',
        body: { kind: 'json', value: { model: MODEL, messages: [{ role: 'user', content: 'old' }], max_tokens: 5 } },
        estimate: { inputTokens: 9, outputTokens: 5, outputDefaulted: false },
      },
    })
  const now = Date.now()
  const head = request('qreq_oldLayoutHead00001', now)
  const behind = request('qreq_oldLayoutBehind001', now + 1)
  t.equal(await old.submit(head, null), 0)
  t.equal(await old.submit(behind, null), 1)
  const { Queue } = createRequire(import.meta.url)('bullmq') as typeof BullMQ
  const bull = new Queue('requests', { prefix: `${c.ns.prefix}{tg}:bull`, connection: { url: REDIS_URL } })
  await bull.add('run', { line: head.line, createdAt: head.createdAt }, { jobId: head.id })
  await bull.close()
  const keys = await keysUnder(c.ns.redis, c.ns.prefix)
  t.ok(keys.some((k) => k.endsWith(`{tg}:q:req:${head.id}`)))
  t.notOk(
    keys.some((k) => /\{q\d+\}:q:/.test(k)),
    'nothing stored on a shard yet',
  )

  // The sharded gateway that takes over.
  const worker = await c.start({ queue: { shards: 4 } })
  for (const id of [head.id, behind.id]) {
    const done = await until(`${worker.url}/queue/requests/${id}`, key, ['completed', 'failed'], 30_000)
    t.equal(done.status, 'completed', `${id} ran`)
    t.equal(
      (await get(`${front.url}/queue/requests/${id}`, key)).json<QueueView>().status,
      'completed',
      'and reads so anywhere',
    )
  }
  const listed = (await get(`${front.url}/queue/requests`, key)).json<{ data: QueueView[] }>().data.map((r) => r.id)
  t.same(listed.sort(), [head.id, behind.id].sort(), 'listed for their owner')

  // A new request of the same key goes to its shard and runs too.
  const fresh = (await (
    await fetch(`${front.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'respond-async' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'new' }], max_tokens: 5 }),
    })
  ).json()) as QueueView
  t.match(fresh.id, /^qreq_[\w-]{16}s[0-3]$/, 'a new id names its shard')
  t.equal(
    (await until(`${worker.url}/queue/requests/${fresh.id}`, key, ['completed', 'failed'], 30_000)).status,
    'completed',
  )
})

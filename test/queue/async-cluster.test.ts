// Asynchronous /queue requests with Redis: a request accepted by one gateway runs on
// another and its result reads the same on both; accepted requests outlive the gateway
// that accepted them; a running request is cancelled through a gateway that does not run
// it; requests a gateway was running when it was killed run again elsewhere; and one
// key's thousand waiting requests do not hold back another key's single one by more than
// one admission slot.
import t, { type Test } from 'tap'
import { adminCall } from '../admin/helpers.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { ASYNC, chatBody, cluster, del, get, MODEL, post, sleep, until, type QueueView } from './helpers.ts'
import { queuedRequestKey } from '../../src/queue/redis-store.ts'

/**
 * An upstream that streams `words` events `eventDelayMs` apart, served as 'slow-model'
 * (closed when the test ends), and a streamed chat body for it.
 */
async function slowModel(t: Test, words: number, eventDelayMs: number) {
  const upstream = await startFakeUpstream({
    replyText: Array.from({ length: words }, (_, i) => `w${i}`).join(' '),
    eventDelayMs,
  })
  t.teardown(() => upstream.close())
  const config = (doc: Record<string, unknown>): void => {
    ;(doc.backends as Record<string, unknown>).fake = { type: 'openai', baseUrl: upstream.url }
    ;(doc.models as unknown[]).push({ name: 'slow-model', kind: 'chat', deployments: [{ backend: 'fake' }] })
  }
  return { upstream, config, body: { model: 'slow-model', messages: [{ role: 'user', content: 'x' }], stream: true } }
}

// Each test has a namespace of its own: a gateway of one test must not take another's jobs.
t.test('accepted by A (which runs nothing), run by B, read on either; outlives A', async (t) => {
  const c = await cluster(t)
  const a = await c.start({ windowMs: 3000, queue: { concurrency: 0 } })
  const { key } = await a.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 1 } } })
  const ids: string[] = []
  for (let i = 0; i < 3; i++)
    ids.push((await post(`${a.url}/queue/chat/completions`, key, chatBody(`cluster ${i}`), ASYNC)).json<QueueView>().id)
  t.same(((await (await fetch(`${a.url}/readyz`)).json()) as { queue_worker: string }).queue_worker, 'accept_only')
  await sleep(500)
  t.equal(
    (await get(`${a.url}/queue/requests/${ids[0]}`, key)).json<QueueView>().status,
    'queued',
    'nobody runs it yet',
  )
  t.equal(await a.stop(), 0, 'the accepting gateway stops')

  const b = await c.start({ windowMs: 3000 })
  const a2 = await c.start({ windowMs: 3000, queue: { concurrency: 0 } })
  for (const id of ids) {
    const onB = await until(`${b.url}/queue/requests/${id}`, key, ['completed', 'failed'], 20_000)
    t.equal(onB.status, 'completed', `${id} ran on B`)
    const onA = (await get(`${a2.url}/queue/requests/${id}`, key)).json<QueueView>()
    t.same(onA, onB, 'and reads the same on another gateway')
  }
  const started = await Promise.all(
    ids.map(async (id) => (await get(`${b.url}/queue/requests/${id}`, key)).json<QueueView>().started_at ?? 0),
  )
  t.ok(started[2]! - started[0]! >= 5, `one per 3 s window, in order (${started.join(', ')})`)
})

t.test('a running request is cancelled through the gateway that does not run it', async (t) => {
  const c = await cluster(t)
  const { upstream, config, body } = await slowModel(t, 60, 80)
  const runner = await c.start({ config })
  const front = await c.start({ queue: { concurrency: 0 }, config })
  const { key } = await front.createKey({ tier: 'Standard4000' })
  const id = (await post(`${front.url}/queue/chat/completions`, key, body, ASYNC)).json<QueueView>().id
  await until(`${runner.url}/queue/requests/${id}`, key, ['in_progress'])
  await sleep(500)
  const cancelled = await del(`${front.url}/queue/requests/${id}`, key)
  t.equal(cancelled.status, 200)
  t.equal(cancelled.json<QueueView>().status, 'cancelled')
  t.equal(await upstream.requests[0]?.ended, 'closed', 'the upstream saw the abort')
  const output = cancelled.json<QueueView>().response?.usage.output_tokens ?? 0
  t.ok(output > 0 && output < 60, `tokens so far charged (${output})`)
})

t.test("fairness: key A queues 1,000 requests; key B's single request starts within one admission slot", async (t) => {
  // Two workers and calls that take a while: A's requests keep both busy, and A's
  // limits never stop it, so only the order of dispatch decides when B runs.
  const c = await cluster(t)
  const gw = await c.start({
    queue: { concurrency: 2 },
    config: (doc) => {
      ;(doc.backends as Record<string, Record<string, unknown>>).mock!.tokensPerSecond = 20
    },
  })
  const admin = adminCall(gw.url, c.adminToken)
  const a = await gw.createKey({
    tier: 'Standard4000',
    limits: { '*': { rpm: 1_000_000, input_tpm: 100_000_000, output_tpm: 100_000_000 } },
  })
  const b = await gw.createKey({ tier: 'Standard4000' })
  const slow = (content: string): Record<string, unknown> => chatBody(content, { stream: true, max_tokens: 8 })
  let sent = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (sent < 1000) {
        sent++
        const res = await post(`${gw.url}/queue/chat/completions`, a.key, slow(`a ${sent}`), ASYNC)
        if (res.status !== 202) throw new Error(`A's request refused: ${res.status} ${res.text}`)
      }
    }),
  )
  const depth = (await admin('GET', '/admin/queue')).json<{ data: Array<{ key_id: string; depth: number }> }>()
  const aDepth = depth.data.find((l) => l.key_id === a.id)?.depth ?? 0
  t.ok(aDepth > 800, `A has ${aDepth} requests waiting`)

  const bId = (await post(`${gw.url}/queue/chat/completions`, b.key, slow('b'), ASYNC)).json<QueueView>().id
  const done = await until(`${gw.url}/queue/requests/${bId}`, b.key, ['completed'], 60_000)
  t.equal(done.status, 'completed')

  // Admission times in ms, as the store has them: how many of A's requests were admitted
  // after B joined and before B was admitted?
  const redis = c.ns.redis
  const meta = await redis.hgetall(queuedRequestKey(c.ns.prefix, bId))
  const bCreated = (JSON.parse(meta.meta ?? '{}') as { createdAt: number }).createdAt
  const bStarted = Number(meta.startedAt)
  const aIds = await redis.zrange(`${c.ns.prefix}{tg}:q:owner:${encodeURIComponent(a.id)}`, '0', '-1')
  const pipeline = redis.pipeline()
  for (const id of aIds) pipeline.hget(queuedRequestKey(c.ns.prefix, id), 'startedAt')
  const aStarts = ((await pipeline.exec()) ?? []).map(([, v]) => Number(v)).filter((v) => v > 0)
  const overtaking = aStarts.filter((s) => s > bCreated && s < bStarted).length
  t.comment(
    `B waited ${bStarted - bCreated} ms; ${aStarts.length} of A's had started; ${overtaking} of them after B joined and before B started`,
  )
  t.ok(overtaking <= 1, `at most one of A's requests was admitted ahead of B (${overtaking})`)
  t.ok(aStarts.length < 900, 'A still had hundreds waiting when B ran')
})

t.test(
  'a gateway killed (SIGKILL) while running requests: another instance runs them again and they complete',
  async (t) => {
    // Two requests run on the doomed gateway, each first run slow (a stream of 30 events
    // 100 ms apart) and cut by the kill. One it accepted itself with a worker free, so it
    // holds it on a lease: its heartbeat then runs out and the survivor hands the request to
    // the shared queue. The other was accepted by a gateway that runs nothing, and the
    // doomed one's BullMQ worker took it: BullMQ's lock on the job runs out and the
    // survivor's worker takes it over. Both within queue.recoverAfterMs; nothing else tells them to.
    const c = await cluster(t)
    const { upstream, config, body } = await slowModel(t, 30, 100)
    const settings = { queue: { recoverAfterMs: 2000 }, config }
    const front = await c.start({ ...settings, queue: { ...settings.queue, concurrency: 0 } })
    const doomed = await c.start(settings)
    const leasedKey = (await doomed.createKey({ tier: 'Standard4000' })).key
    const sharedKey = (await doomed.createKey({ tier: 'Standard4000' })).key
    const leased = (await post(`${doomed.url}/queue/chat/completions`, leasedKey, body, ASYNC)).json<QueueView>().id
    const shared = (await post(`${front.url}/queue/chat/completions`, sharedKey, body, ASYNC)).json<QueueView>().id
    await until(`${doomed.url}/queue/requests/${leased}`, leasedKey, ['in_progress'])
    await until(`${doomed.url}/queue/requests/${shared}`, sharedKey, ['in_progress'])
    const runnerOf = async (id: string): Promise<string | null> =>
      c.ns.redis.hget(queuedRequestKey(c.ns.prefix, id), 'runner')
    t.ok(((await runnerOf(leased)) ?? '') !== '', 'the one the doomed gateway accepted runs there on a lease')
    t.equal(await runnerOf(shared), null, 'the other came through the shared queue')
    await sleep(300)
    t.equal(upstream.requests.length, 2, 'both first runs reached the upstream')
    await doomed.stop('SIGKILL')
    t.same(await Promise.all(upstream.requests.map((r) => r.ended)), ['closed', 'closed'], 'and were cut by the kill')

    const survivor = await c.start(settings)
    const startedAt = Date.now()
    for (const [id, key] of [
      [leased, leasedKey],
      [shared, sharedKey],
    ] as const) {
      const done = await until(`${survivor.url}/queue/requests/${id}`, key, ['completed', 'failed'], 30_000)
      t.equal(
        done.status,
        'completed',
        `${id === leased ? 'the leased one' : 'the shared one'} ran again and completed (${Date.now() - startedAt} ms after the survivor started)`,
      )
      const text = String(done.response?.body ?? '')
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map(
          (e) =>
            (JSON.parse(e.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta
              ?.content ?? '',
        )
        .join('')
      t.equal(text.trim(), upstream.options.replyText, 'the result is the whole second stream')
      t.equal(done.response?.usage.output_tokens, 30, "and its usage is the second run's")
    }
    t.equal(upstream.requests.length, 4, 'exactly one more upstream call for each')
    t.equal(await runnerOf(leased), null, 'the lease is gone')
    const scrape = async (gw: { metricsUrl: string }): Promise<string> =>
      (await fetch(`${gw.metricsUrl}/metrics`)).text()
    const recovered = (text: string): number =>
      Number(/^tollgate_queue_leases_recovered_total (\d+)$/m.exec(text)?.[1] ?? 0)
    const [onFront, onSurvivor] = await Promise.all([scrape(front), scrape(survivor)])
    t.equal(
      recovered(onFront) + recovered(onSurvivor),
      1,
      'the lease was handed on once (by whichever live gateway checked first), and counted',
    )
    t.match(
      onSurvivor,
      /^tollgate_queue_async_starts_total\{path="shared"\} 2$/m,
      'the survivor started both through the shared queue',
    )
  },
)

t.test(
  'a gateway stopped (SIGTERM) while running a request it holds hands it to another instance once its grace is up',
  async (t) => {
    const c = await cluster(t)
    const slow = await slowModel(t, 30, 100)
    const { upstream } = slow
    const config = (doc: Record<string, unknown>): void => {
      slow.config(doc)
      ;(doc.server as Record<string, unknown>).shutdownGraceMs = 500
    }
    // The stopping gateway hands its run to the shared queue itself; should that fail (a
    // loaded machine: the hand-back has the queue's command deadline), its lease goes there
    // once its heartbeat runs out, which queue.recoverAfterMs bounds (30 s by default).
    const queue = { recoverAfterMs: 4000 }
    const stopping = await c.start({ config, queue })
    const other = await c.start({ config, queue })
    const { key } = await stopping.createKey({ tier: 'Standard4000' })
    const id = (await post(`${stopping.url}/queue/chat/completions`, key, slow.body, ASYNC)).json<QueueView>().id
    await until(`${other.url}/queue/requests/${id}`, key, ['in_progress'])
    t.ok(
      ((await c.ns.redis.hget(queuedRequestKey(c.ns.prefix, id), 'runner')) ?? '') !== '',
      'it runs on a lease where it was accepted',
    )
    t.match(
      await (await fetch(`${stopping.metricsUrl}/metrics`)).text(),
      /^tollgate_queue_async_starts_total\{path="here"\} 1$/m,
      'and was counted as started there',
    )
    await sleep(200)
    t.equal(await stopping.stop(), 0, 'the gateway stops cleanly')
    t.equal(await upstream.requests[0]?.ended, 'closed', 'its run was cut when the grace was up')
    const done = await until(`${other.url}/queue/requests/${id}`, key, ['completed', 'failed'], 20_000)
    t.equal(done.status, 'completed', 'the other instance ran it again')
    t.equal(upstream.requests.length, 2, 'one more upstream call')
    t.equal(done.response?.usage.output_tokens, 30, 'the whole second stream')
  },
)

t.test(
  "tier priority: with every worker busy, a request of a higher-priority tier starts before the lower tier's waiting ones",
  async (t) => {
    // One worker and calls that take a while: eight Basic keys each have a request waiting
    // (eight heads of eight lines), then a Standard4000 key sends one. Standard4000 is
    // listed first in queue.tierPriority, so it is the next to start. One shard: with
    // several, each shard's worker holds its head as it comes (one per free place), so a
    // higher tier's request on a shard whose worker already holds a Basic one waits behind
    // that one (docs/queue.md, Storage; 8 shards here: 5 of the 8 Basic ones went first).
    const c = await cluster(t)
    const gw = await c.start({
      queue: { concurrency: 1, tierPriority: { Standard4000: 1, Basic: 10 }, shards: 1 },
      config: (doc) => {
        ;(doc.backends as Record<string, Record<string, unknown>>).mock!.tokensPerSecond = 20
      },
    })
    const slow = (content: string): Record<string, unknown> => chatBody(content, { stream: true, max_tokens: 6 })
    const low = await Promise.all(Array.from({ length: 8 }, () => gw.createKey({ tier: 'Basic' })))
    const lowIds: string[] = []
    for (const [i, k] of low.entries())
      lowIds.push((await post(`${gw.url}/queue/chat/completions`, k.key, slow(`low ${i}`), ASYNC)).json<QueueView>().id)
    const high = await gw.createKey({ tier: 'Standard4000' })
    const highId = (await post(`${gw.url}/queue/chat/completions`, high.key, slow('high'), ASYNC)).json<QueueView>().id
    await until(`${gw.url}/queue/requests/${highId}`, high.key, ['completed'], 60_000)
    for (const [i, id] of lowIds.entries())
      await until(`${gw.url}/queue/requests/${id}`, low[i]!.key, ['completed'], 60_000)

    // Admission times in ms as the store has them.
    const startedAt = async (id: string): Promise<number> =>
      Number(await c.ns.redis.hget(queuedRequestKey(c.ns.prefix, id), 'startedAt'))
    const highStarted = await startedAt(highId)
    const lowStarts = await Promise.all(lowIds.map(startedAt))
    const before = lowStarts.filter((s) => s < highStarted).length
    t.comment(`Basic requests started before the Standard4000 one: ${before} of ${lowIds.length}`)
    t.ok(before <= 2, `the Standard4000 request started after at most the two Basic ones already taken (${before})`)
    t.ok(
      lowStarts.filter((s) => s > highStarted).length >= 6,
      'and ahead of the other Basic ones, which joined before it',
    )
  },
)

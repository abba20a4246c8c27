// The behaviour every QueueStore adapter must show. Run by store-embedded.test.ts and
// store-redis.test.ts with a "space": a place where stores can be opened, more than once
// (a restart of the embedded store; a second instance on the same Redis).
import type { Test } from 'tap'
import {
  QueueFullError,
  RequestTakenError,
  type NewRequest,
  type QueuedRequest,
  type QueueStore,
  type RequestRef,
  type StoredResult,
  type Ticket,
} from '../../src/queue/ports.ts'
import { newRequestId, shardOfKey } from '../../src/queue/shards.ts'
import { jobTicket, lineOf } from '../../src/queue/tickets.ts'
import { bandOf } from '../../src/priority/classes.ts'
import { openInFreshSpace } from './spaces.ts'
import { pollUntil } from '../helpers/poll.ts'

export interface StoreSpace {
  open(options?: { resultTtlMs?: number }): Promise<QueueStore>
  cleanup(): Promise<void>
}

const MODEL = 'gpt-4o-mini'
/** The shards a Redis store under contract is opened with: the ids made here name a key's shard of them. */
export const CONTRACT_SHARDS = 4
let counter = 0

export function newRequest(overrides: Partial<NewRequest> = {}): NewRequest {
  const keyId = overrides.keyId ?? 'key_a'
  const model = overrides.call?.model ?? MODEL
  return {
    id: newRequestId(shardOfKey(keyId, CONTRACT_SHARDS)),
    keyId,
    owner: 'owner-a',
    tier: 'Basic',
    line: lineOf(keyId, model ?? '*'),
    createdAt: Date.now() + counter++,
    call: {
      endpoint: 'chat.completions',
      model,
      params: {},
      query: '',
      body: { kind: 'json', value: { model, messages: [{ role: 'user', content: 'hi' }] } },
      estimate: { inputTokens: 9, outputTokens: 1024, outputDefaulted: true },
    },
    ...overrides,
  }
}

/** A request as a store holds it once submitted: queued, never tried, leased to `runner` (nobody unless said). */
export function queuedAs(request: NewRequest, runner: string | null = null): QueuedRequest {
  return {
    ...request,
    status: 'queued',
    attempts: 0,
    startedAt: null,
    finishedAt: null,
    cancelRequested: false,
    result: null,
    runner,
  }
}

/** The ids of a page (or a slice of what was submitted), in order. */
const ids = (requests: ReadonlyArray<{ readonly id: string }>): string[] => requests.map((r) => r.id)

const call = (id: string): Ticket => ({ kind: 'call', instance: 'inst1', id, joinedAt: 1_700_000_000_000 })
const result = (statusCode = 200): StoredResult => ({
  statusCode,
  contentType: 'application/json',
  encoding: 'json',
  body: { ok: true, text: 'ünï' },
  usage: { inputTokens: 9, outputTokens: 3 },
})

export function queueStoreContract(t: Test, name: string, makeSpace: () => Promise<StoreSpace>): void {
  const withStore = (
    title: string,
    body: (t: Test, store: QueueStore, space: StoreSpace) => Promise<void>,
    resultTtlMs?: number,
  ): void => {
    t.test(`${name}: ${title}`, async (t) => {
      const {
        space,
        opened: [store],
      } = await openInFreshSpace(t, makeSpace, async (space) => [
        await space.open(resultTtlMs === undefined ? {} : { resultTtlMs }),
      ])
      await body(t, store, space)
    })
  }

  withStore('a submitted request reads back as it was given, queued at the back of its line', async (t, store) => {
    const first = newRequest()
    const second = newRequest()
    t.equal(await store.submit(first, null), 0, 'nobody ahead of the first')
    t.equal(await store.submit(second, null), 1, 'one ahead of the second')
    const read = await store.get(first.id)
    t.strictSame(read, queuedAs(first))
    t.equal(await store.position(second.line, jobTicket(second)), 1)
    t.equal(await store.get('qreq_missing'), null)
    await t.rejects(store.submit(first, null), 'the same id twice is refused')
  })

  withStore('lines are FIFO per key and model; calls and stored requests share them', async (t, store) => {
    const a1 = newRequest()
    const other = newRequest({ keyId: 'key_b', line: lineOf('key_b', MODEL) })
    await store.submit(a1, null)
    t.equal(await store.join(a1.line, call('c1')), 1, 'a call joins behind the stored request')
    t.equal(await store.submit(other, null), 0, 'another key has a line of its own')
    const a2 = newRequest()
    t.equal(await store.submit(a2, null), 2)
    const lines = await store.lines()
    const mine = lines.find((l) => l.line === a1.line)
    t.equal(mine?.depth, 3)
    t.equal(mine?.keyId, 'key_a')
    t.equal(mine?.model, MODEL)
    t.same(mine?.head, jobTicket(a1))
    t.same(await store.head(a1.line), jobTicket(a1))
    t.equal(await store.head(lineOf('key_none', MODEL)), null)
    t.equal(lines.find((l) => l.line === other.line)?.depth, 1)

    const started = await store.start(a1, Date.now())
    t.ok(started.started)
    t.same(started.next, call('c1'), 'the call is next')
    t.equal(await store.position(a1.line, call('c1')), 0)
    t.equal(
      await store.leave(a1.line, call('c1')).then((n) => (n?.kind === 'job' ? n.id : null)),
      a2.id,
      'then the second request',
    )
    t.equal(await store.leave(a1.line, call('c1')), null, 'leaving twice changes nothing')
  })

  withStore('leave names the next head only when the head left; the last one empties the line', async (t, store) => {
    const line = lineOf('key_x', MODEL)
    await store.join(line, call('a'))
    await store.join(line, call('b'))
    await store.join(line, call('c'))
    t.equal(await store.join(line, call('b')), 1, 'joining again keeps the place')
    t.equal(await store.leave(line, call('b')), null, 'the middle one left: the head is unchanged')
    t.same(await store.leave(line, call('a')), call('c'))
    t.equal(await store.leave(line, call('c')), null)
    t.notOk(
      (await store.lines()).some((l) => l.line === line),
      'an empty line is not listed',
    )
    t.equal(await store.position(line, call('c')), null)
  })

  withStore('a call put back goes to the front', async (t, store) => {
    const line = lineOf('key_y', MODEL)
    await store.join(line, call('a'))
    await store.join(line, call('b'))
    await store.leave(line, call('a'))
    t.equal(await store.join(line, call('a'), 'front'), 0)
    t.equal(await store.position(line, call('b')), 1)
    t.equal(await store.join(line, call('z')), 2, 'later joins still go to the back')
  })

  withStore(
    'a class band orders the line: priority, then default, then flex, first come first served within each',
    async (t, store) => {
      const line = lineOf('key_band', MODEL)
      t.equal(await store.join(line, call('f1'), 'back', bandOf('flex')), 0, 'alone, flex is the head')
      t.equal(await store.join(line, call('d1'), 'back', bandOf('default')), 0, 'default goes before flex')
      t.equal(await store.join(line, call('p1'), 'back', bandOf('priority')), 0, 'priority before both')
      t.equal(await store.join(line, call('f2'), 'back', bandOf('flex')), 3, 'flex at the back of flex')
      t.equal(await store.join(line, call('p2'), 'back', bandOf('priority')), 1, 'priority at the back of priority')
      t.equal(await store.join(line, call('d2'), 'back', bandOf('default')), 3, 'default at the back of default')
      const order = ['p1', 'p2', 'd1', 'd2', 'f1', 'f2']
      for (const [i, id] of order.entries()) t.equal(await store.position(line, call(id)), i, `${id} is ${i}th`)
      t.same(await store.leave(line, call('p1')), call('p2'), 'the next head is the next priority call')
      t.equal(
        await store.join(line, call('f1'), 'front', bandOf('flex')),
        0,
        'a call put back goes to the front whatever its class',
      )
    },
  )

  withStore(
    "a batch's line waits behind every interactive call and stored request of its key's line, joined before or after it",
    async (t, store) => {
      const base = newRequest({ keyId: 'key_batch' })
      const batchLine = (): NewRequest => {
        const r = newRequest({ keyId: 'key_batch' })
        return { ...r, call: { ...r.call, batch: true } }
      }
      const b1 = batchLine()
      const b2 = batchLine()
      t.equal(await store.submit(b1, null), 0, "alone, a batch's line is the head")
      t.equal(await store.submit(b2, null), 1, 'behind the first line of the batch')
      t.equal(await store.join(base.line, call('live'), 'back', bandOf('default')), 0, 'a waiting call goes first')
      t.equal(await store.submit(base, null), 1, 'a stored request goes before the batch too')
      const prio = await store.join(base.line, call('fast'), 'back', bandOf('priority'))
      t.equal(prio, 0, 'and priority before all')
      const order = [call('fast'), call('live'), jobTicket(base), jobTicket(b1), jobTicket(b2)]
      for (const [i, ticket] of order.entries())
        t.equal(await store.position(base.line, ticket), i, `${ticket.id} is ${i}th`)
      t.equal((await store.get(b1.id))?.call.batch, true, 'the store keeps that it is a batch line')
    },
  )

  withStore(
    'start takes a request out of line once, counting attempts; a retry goes back to the front',
    async (t, store) => {
      const r = newRequest()
      const behind = newRequest()
      await store.submit(r, null)
      await store.submit(behind, null)
      const at = Date.now()
      const first = await store.start(r, at)
      t.ok(first.started)
      t.equal(first.next?.kind === 'job' ? first.next.id : null, behind.id)
      let read = await store.get(r.id)
      t.equal(read?.status, 'in_progress')
      t.equal(read?.attempts, 1)
      t.equal(read?.startedAt, at)
      t.equal(await store.position(r.line, jobTicket(r)), null, 'out of line while it runs')

      t.ok(await store.requeue(r), 'an upstream failure puts it back')
      t.equal(await store.position(r.line, jobTicket(r)), 0, 'at the front, ahead of the one behind')
      t.equal(await store.position(behind.line, jobTicket(behind)), 1)
      t.notOk(await store.requeue(r), 'only a running request can be put back')
      const again = await store.start(r, at + 50)
      t.ok(again.started)
      read = await store.get(r.id)
      t.equal(read?.attempts, 2)
      t.equal(read?.startedAt, at, 'started_at is the first start')
      t.ok((await store.start(r, at + 60)).started, 'a running request may start again (its gateway stopped mid-run)')
    },
  )

  withStore('finish keeps the reply, drops the body, leaves the line, and happens once', async (t, store) => {
    const r = newRequest()
    const bytes = Buffer.from([0, 1, 2, 255, 254, 0x0d, 0x0a])
    await store.submit(
      {
        ...r,
        call: {
          ...r.call,
          body: {
            kind: 'multipart',
            contentType: 'multipart/form-data; boundary=x',
            fields: { model: MODEL },
            files: [{ field: 'file', filename: 'a.wav', mimeType: 'audio/wav', size: 7 }],
            size: 7,
          },
        },
      },
      bytes,
    )
    t.same(await store.body(r.id), bytes, 'binary bytes round-trip')
    const next = newRequest()
    await store.submit(next, null)
    await store.start(r, Date.now())
    const at = Date.now()
    const done = await store.finish(r, 'completed', result(), at)
    t.ok(done.finished)
    t.equal(done.next, null, 'it was not in line any more')
    const read = await store.get(r.id)
    t.equal(read?.status, 'completed')
    t.equal(read?.finishedAt, at)
    t.same(read?.result, result())
    t.equal(await store.body(r.id), null, 'the body is gone')
    t.notOk((await store.finish(r, 'failed', result(500), at)).finished, 'finished once')
    t.notOk((await store.start(r, at)).started, 'a finished request does not start')
    t.equal((await store.get(r.id))?.status, 'completed')

    // A queued request can finish too (refused before it ran): it leaves its line.
    const failed = await store.finish(next, 'failed', result(401), at)
    t.ok(failed.finished)
    t.equal(await store.position(next.line, jobTicket(next)), null)
  })

  withStore('cancel: a queued request is cancelled and leaves; a running one is asked to stop', async (t, store) => {
    const queued = newRequest()
    const behind = newRequest()
    await store.submit(queued, null)
    await store.submit(behind, null)
    const cancelled = await store.cancel(queued, Date.now())
    t.equal(cancelled.was, 'queued')
    t.equal(cancelled.next?.kind === 'job' ? cancelled.next.id : null, behind.id, 'the next one is head')
    t.equal((await store.get(queued.id))?.status, 'cancelled')
    t.notOk((await store.start(queued, Date.now())).started)

    await store.start(behind, Date.now())
    const running = await store.cancel(behind, Date.now())
    t.equal(running.was, 'in_progress')
    const read = await store.get(behind.id)
    t.equal(read?.status, 'in_progress', 'still running until its worker stops it')
    t.ok(read?.cancelRequested)
    t.notOk((await store.start(behind, Date.now())).started, 'a request asked to stop does not start again')
    t.ok((await store.finish(behind, 'cancelled', result(200), Date.now())).finished)

    t.equal((await store.cancel(behind, Date.now())).was, 'cancelled', 'cancelling a finished request changes nothing')
    t.equal((await store.cancel({ id: 'qreq_nope', line: behind.line, createdAt: 1 }, Date.now())).was, null)
  })

  withStore("list: an owner's requests, newest first, page by page, without their bodies", async (t, store) => {
    const base = Date.now()
    const mine = [0, 1, 2, 3, 4].map((i) => newRequest({ createdAt: base + i }))
    for (const r of mine) await store.submit(r, null)
    await store.submit(newRequest({ owner: 'owner-b', createdAt: base + 10 }), null)
    const first = await store.list('owner-a', { limit: 2 })
    t.same(
      first.data.map((r) => r.id),
      [mine[4]?.id, mine[3]?.id],
    )
    t.equal(first.hasMore, true)
    const second = await store.list('owner-a', { after: first.data[1]?.id ?? '', limit: 2 })
    t.same(
      second.data.map((r) => r.id),
      [mine[2]?.id, mine[1]?.id],
    )
    t.equal(second.hasMore, true)
    const last = await store.list('owner-a', { after: second.data[1]?.id ?? '', limit: 2 })
    t.same(
      last.data.map((r) => r.id),
      [mine[0]?.id],
    )
    t.equal(last.hasMore, false)
    t.same(await store.list('owner-a', { after: mine[0]?.id ?? '', limit: 2 }), { data: [], hasMore: false })
    t.same(await store.list('owner-a', { after: 'qreq_unknown', limit: 2 }), { data: [], hasMore: false })
    const exact = await store.list('owner-a', { limit: 5 })
    t.equal(exact.data.length, 5)
    t.equal(exact.hasMore, false, 'a page that ends exactly at the last request says no more')
    t.equal((await store.list('owner-b', { limit: 10 })).data.length, 1, 'another owner sees only its own')
    t.same(
      await store.list('owner-a', { after: (await store.list('owner-b', { limit: 1 })).data[0]?.id ?? '', limit: 10 }),
      { data: [], hasMore: false },
      "another owner's id is no cursor",
    )
    const shown = first.data[0]
    t.ok(shown !== undefined && !('body' in shown.call), 'a listed request carries no body')
    t.same(shown?.call.model, mine[4]?.call.model)
    t.same((await store.get(mine[4]?.id ?? ''))?.call.body, mine[4]?.call.body, 'get reads the body')
  })

  withStore(
    'list by status: full pages while more match and has_more exact, across more than 2000 records',
    async (t, store) => {
      const base = Date.now() - 10_000
      const all = Array.from({ length: 2100 }, (_, i) => newRequest({ createdAt: base + i }))
      for (const r of all) await store.submit(r, null)
      // The oldest 150 completed, one failed among the newest: a filter must look past 2000 queued ones.
      for (const r of all.slice(0, 150)) {
        await store.start(r, Date.now())
        await store.finish(r, 'completed', result(), Date.now())
      }
      const newest = all.at(-1) as NewRequest
      await store.start(newest, Date.now())
      await store.finish(newest, 'failed', result(500), Date.now())

      const page1 = await store.list('owner-a', { limit: 100, status: 'completed' })
      t.equal(page1.data.length, 100)
      t.equal(page1.hasMore, true)
      t.same(ids(page1.data), ids(all.slice(50, 150).reverse()), 'newest completed first')
      t.ok(page1.data.every((r) => r.status === 'completed'))
      const page2 = await store.list('owner-a', { limit: 100, status: 'completed', after: page1.data.at(-1)?.id })
      t.same(ids(page2.data), ids(all.slice(0, 50).reverse()))
      t.equal(page2.hasMore, false)
      const exact = await store.list('owner-a', { limit: 50, status: 'completed', after: page1.data.at(-1)?.id })
      t.equal(exact.data.length, 50)
      t.equal(exact.hasMore, false, 'no more completed after the last one')

      const failed = await store.list('owner-a', { limit: 100, status: 'failed' })
      t.same(ids(failed.data), [newest.id])
      t.equal(failed.hasMore, false)
      const queued = await store.list('owner-a', { limit: 100, status: 'queued' })
      t.equal(queued.data.length, 100)
      t.equal(queued.hasMore, true)
      t.equal(queued.data[0]?.id, all.at(-2)?.id)
      const lastQueued = await store.list('owner-a', { limit: 100, status: 'queued', after: all[249]?.id })
      t.same(ids(lastQueued.data), ids(all.slice(150, 249).reverse()))
      t.equal(lastQueued.hasMore, false)
      t.same(await store.list('owner-a', { limit: 100, status: 'cancelled' }), { data: [], hasMore: false })
      t.same(await store.list('owner-a', { limit: 100, status: 'in_progress' }), { data: [], hasMore: false })
      t.same(await store.list('owner-b', { limit: 100, status: 'queued' }), { data: [], hasMore: false })
    },
  )

  withStore(
    'list by status: "expired" as a client sees it, once a result\'s time is up',
    async (t, store) => {
      const done = newRequest({ createdAt: Date.now() })
      const waiting = newRequest({ createdAt: Date.now() + 1 })
      await store.submit(done, null)
      await store.submit(waiting, null)
      await store.start(done, Date.now())
      const finishedAt = Date.now()
      await store.finish(done, 'completed', result(), finishedAt)
      t.same(
        (await store.list('owner-a', { limit: 10, status: 'completed' })).data.map((r) => r.id),
        [done.id],
      )
      // A clock condition, not a sleep: the ttl is the store's own.
      while (Date.now() <= Math.max(finishedAt, waiting.createdAt) + 1000)
        await new Promise((resolve) => setTimeout(resolve, 20))
      t.same((await store.list('owner-a', { limit: 10, status: 'completed' })).data, [])
      t.same(
        (await store.list('owner-a', { limit: 10, status: 'expired' })).data.map((r) => r.id).sort(),
        [done.id, waiting.id].sort(),
      )
      t.same(
        (await store.list('owner-a', { limit: 10, status: 'queued' })).data,
        [],
        'a request waiting past the ttl reads expired',
      )
    },
    1000,
  )

  withStore(
    "caps: a key's pending requests are bounded by count, atomically; finishing or cancelling frees a place",
    async (t, store) => {
      const caps = { requests: 5, bytes: 1_000_000 }
      const tries = Array.from({ length: 20 }, () => newRequest())
      const settled = await Promise.allSettled(tries.map((r) => store.submit(r, null, undefined, caps)))
      t.equal(settled.filter((s) => s.status === 'fulfilled').length, 5, 'concurrent submits stop exactly at the cap')
      const refused = settled.find((s) => s.status === 'rejected')
      t.ok(refused?.status === 'rejected' && refused.reason instanceof QueueFullError)
      if (refused?.status === 'rejected' && refused.reason instanceof QueueFullError)
        t.equal(refused.reason.pending.requests, 5)
      t.equal((await store.pending('key_a')).requests, 5)
      const other = newRequest({ keyId: 'key_b', line: lineOf('key_b', MODEL) })
      t.equal(await store.submit(other, null, undefined, caps), 0, 'another key has caps of its own')
      t.equal((await store.pending('key_b')).requests, 1)

      const accepted = tries.filter((_, i) => settled[i]?.status === 'fulfilled')
      const [first, second] = accepted as [NewRequest, NewRequest]
      await store.start(first, Date.now())
      t.equal((await store.pending('key_a')).requests, 5, 'a running request still counts')
      await store.finish(first, 'completed', result(), Date.now())
      t.equal((await store.pending('key_a')).requests, 4)
      await store.cancel(second, Date.now())
      t.equal((await store.pending('key_a')).requests, 3)
      await store.submit(newRequest(), null, undefined, caps)
      await store.submit(newRequest(), null, undefined, caps)
      await t.rejects(store.submit(newRequest(), null, undefined, caps), QueueFullError)
      t.equal((await store.pending('key_a')).requests, 5)
      t.equal(
        (await store.list('owner-a', { limit: 100, status: 'queued' })).data.length,
        6,
        'a refused request is not stored (five of key_a, one of key_b)',
      )
    },
  )

  withStore(
    "caps: a key's pending bytes (bodies and uploads) are bounded; the size is given back when it finishes",
    async (t, store) => {
      const upload = Buffer.alloc(10_000, 1)
      const caps = { requests: 100, bytes: 25_000 }
      const a = newRequest()
      await store.submit(a, upload, undefined, caps)
      const after1 = await store.pending('key_a')
      t.ok(after1.bytes > 10_000 && after1.bytes < 12_000, `an upload counts with its body (${after1.bytes})`)
      await store.submit(newRequest(), upload, undefined, caps)
      const err = await store.submit(newRequest(), upload, undefined, caps).catch((e: unknown) => e)
      t.ok(err instanceof QueueFullError, 'a third upload would pass the byte cap')
      if (err instanceof QueueFullError) {
        t.equal(err.pending.requests, 2)
        t.ok(err.size > 10_000)
      }
      t.ok((await store.submit(newRequest(), null, undefined, caps)) >= 0, 'a small JSON request still fits')
      await store.start(a, Date.now())
      await store.finish(a, 'completed', result(), Date.now())
      t.ok((await store.pending('key_a')).bytes < after1.bytes + 2000, 'the finished upload gave its bytes back')
      t.same(await store.body(a.id), null)
      t.same((await store.get(a.id))?.call.body, { kind: 'none' }, 'a finished request keeps no body')
      await store.submit(newRequest(), upload, undefined, caps)
    },
  )

  withStore(
    'a result is kept for its time to live, then only the record remains',
    async (t, store) => {
      const r = newRequest()
      await store.submit(r, null)
      await store.start(r, Date.now())
      await store.finish(r, 'completed', result(), Date.now())
      t.same((await store.get(r.id))?.result, result())
      await new Promise((done) => setTimeout(done, 700))
      const read = await store.get(r.id)
      t.equal(read?.status, 'completed', 'the record is still there')
      t.equal(read?.result, null, 'the result is gone')
    },
    400,
  )

  withStore(
    "an id kept past its record is refused again once the record is gone (a batch's line after any downtime)",
    async (t, store) => {
      const kept = newRequest()
      const plain = newRequest()
      await store.submit(kept, null, undefined, undefined, Date.now() + 60_000)
      await store.submit(plain, null)
      await t.rejects(store.submit(kept, null), RequestTakenError, 'refused while its record is there')
      for (const r of [kept, plain]) {
        await store.start(r, Date.now())
        await store.finish(r, 'completed', result(), Date.now())
      }
      const gone = await pollUntil(
        async () => [await store.get(kept.id), await store.get(plain.id)],
        (records) => records.every((r) => r === null),
        300,
        10,
      )
      t.ok(gone.met, 'both records purged')
      await t.rejects(
        store.submit(kept, null, undefined, undefined, Date.now() + 60_000),
        RequestTakenError,
        'taken once: its id outlives its record',
      )
      // Without a kept id, a purged id is free again: that is what kept ids are for.
      await t.resolves(store.submit(plain, null), 'an id not kept is taken again')
    },
    100,
  )

  withStore(
    'a request that is a head at once is leased to the runner that asked; only that runner may start it',
    async (t, store) => {
      const ref = (r: NewRequest): RequestRef => ({ id: r.id, line: r.line, createdAt: r.createdAt })
      const first = newRequest()
      const second = newRequest()
      t.equal(await store.submit(first, null, 'inst-a'), 0)
      t.equal(await store.submit(second, null, 'inst-a'), 1, 'the second has one ahead')
      t.equal((await store.get(first.id))?.runner, 'inst-a', 'the head is leased')
      t.equal((await store.get(second.id))?.runner, null, 'one behind it is not')
      t.same(
        await store.leases(),
        [{ request: ref(first), runner: 'inst-a', alive: false }],
        'listed; no heartbeat yet',
      )
      t.equal(await store.isAlive('inst-a'), false, 'not alive before its first heartbeat')
      await store.heartbeat('inst-a', 10_000)
      t.same(
        (await store.leases()).map((l) => l.alive),
        [true],
        'alive once it beats',
      )
      t.equal(await store.isAlive('inst-a'), true, 'isAlive says so too')
      t.equal(await store.isAlive('inst-b'), false, 'another instance that never beat is not')

      t.same(await store.start(ref(first), 5), { started: false, next: null }, 'the shared runner may not start it')
      t.same(await store.start(ref(first), 5, 'inst-b'), { started: false, next: null }, 'nor another instance')
      t.equal((await store.get(first.id))?.status, 'queued')
      const started = await store.start(ref(first), 6, 'inst-a')
      t.equal(started.started, true, 'its runner may')
      t.same(started.next, jobTicket(second), 'and the turn passes on')
      t.equal((await store.get(first.id))?.runner, 'inst-a', 'it stays leased while it runs')

      t.equal(await store.release(ref(first), 'inst-b'), false, 'another instance cannot end the lease')
      t.equal(await store.release(ref(first), 'inst-a'), true, 'its runner can')
      t.equal(await store.release(ref(first), 'inst-a'), false, 'once')
      t.equal((await store.get(first.id))?.runner, null)
      t.same(await store.leases(), [])
      t.equal((await store.start(ref(first), 7)).started, true, 'the shared runner may run it again now')
    },
  )

  withStore('a lease ends when its request finishes or is cancelled', async (t, store) => {
    const done = newRequest()
    const cancelled = newRequest({ keyId: 'key_c' })
    await store.submit(done, null, 'inst-a')
    await store.submit(cancelled, null, 'inst-a')
    t.equal((await store.leases()).length, 2)
    await store.start(done, 1, 'inst-a')
    t.equal((await store.finish(done, 'completed', result(), 2)).finished, true)
    t.equal((await store.get(done.id))?.runner, null, 'finished: not leased')
    t.equal((await store.cancel(cancelled, 3)).was, 'queued')
    t.equal((await store.get(cancelled.id))?.runner, null, 'cancelled: not leased')
    t.same(await store.leases(), [])
  })

  withStore('sweep names the head of every line', async (t, store) => {
    const r = newRequest()
    await store.submit(r, null)
    await store.submit(newRequest(), null)
    const line = lineOf('key_z', MODEL)
    await store.heartbeat('inst1', 10_000)
    await store.join(line, call('c'))
    const heads = await store.sweep(10)
    t.ok(heads !== null)
    t.same(heads?.map((h) => h.head.id).sort(), ['c', r.id].sort())
    t.same(heads?.find((h) => h.head.id === 'c')?.line, line)
  })

  withStore('what was accepted is there when the store is opened again, in the same order', async (t, store, space) => {
    const a = newRequest()
    const b = newRequest()
    const c = newRequest()
    for (const r of [a, b, c]) await store.submit(r, null)
    const again = await space.open()
    t.teardown(() => again.close())
    t.same(await again.get(b.id), await store.get(b.id))
    t.equal(await again.position(a.line, jobTicket(a)), 0)
    t.equal(await again.position(b.line, jobTicket(b)), 1)
    t.equal(await again.position(c.line, jobTicket(c)), 2)
    const started = await again.start(a, Date.now())
    t.equal(started.next?.kind === 'job' ? started.next.id : null, b.id)
  })
}

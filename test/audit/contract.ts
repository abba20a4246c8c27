// The behaviour every AuditStore adapter must show, and the retention of the log built on
// it; run by embedded.test.ts and redis.test.ts.
import type { Test } from 'tap'
import { createAuditLog } from '../../src/audit/log.ts'
import { AuditCursorError, type AuditStore } from '../../src/audit/port.ts'
import type { AuditEntry, NewAuditEntry } from '../../src/audit/record.ts'
import { spaceCases, type StoreSpace } from '../store/with-stores.ts'

export type AuditSpace = StoreSpace<AuditStore>

const T0 = Date.UTC(2026, 0, 1)
const DAY = 86_400_000

export function entry(i: number, overrides: Partial<NewAuditEntry> = {}): NewAuditEntry {
  return {
    at: T0 + i * 1000,
    actor:
      i % 3 === 0
        ? { type: 'user', id: `usr_${i % 2}`, name: `user${i % 2}` }
        : { type: 'admin', id: 'admin:00ff00ff00ff00ff' },
    via: i % 3 === 0 ? 'portal' : 'api',
    action: i % 2 === 0 ? 'key.create' : 'key.update',
    objectType: i % 5 === 0 ? 'user' : 'key',
    objectId: `obj_${i % 4}`,
    before: i % 2 === 0 ? null : { id: `obj_${i % 4}`, tier: 'Basic', models: ['a', 'b'] },
    after: { id: `obj_${i % 4}`, tier: 'Pro', limits: { rpm: i } },
    address: '127.0.0.1',
    requestId: `req_${i}`,
    ...overrides,
  }
}

/** Every page of a query, following `after`; bounded. */
async function allPages(store: AuditStore, query: Parameters<AuditStore['query']>[0]): Promise<AuditEntry[][]> {
  const pages: AuditEntry[][] = []
  let after: string | undefined
  for (let i = 0; i < 100; i++) {
    const page = await store.query({ ...query, ...(after === undefined ? {} : { after }) })
    pages.push([...page.data])
    if (!page.hasMore) return pages
    after = page.data.at(-1)?.id
  }
  throw new Error('pagination did not end')
}

const strip = ({ id: _id, ...rest }: AuditEntry): NewAuditEntry => rest

export function auditContract(t: Test, name: string, makeSpace: () => Promise<AuditSpace>): void {
  const withStore = spaceCases(t, name, makeSpace)

  withStore('a record reads back exactly as written, with an id, newest first', async (t, store) => {
    const written: AuditEntry[] = []
    for (let i = 0; i < 5; i++) written.push(await store.append(entry(i)))
    t.equal(new Set(written.map((e) => e.id)).size, 5, 'ids are distinct')
    for (const e of written) t.match(e.id, /^aud_[0-9-]+$/)
    const page = await store.query({ limit: 10 })
    t.same(page.data, [...written].reverse(), 'newest first, every field as written')
    t.equal(page.hasMore, false)
    t.same(strip(page.data[4] as AuditEntry), entry(0))
  })

  withStore('filters: actor (id or username), action, object type and id, time range', async (t, store) => {
    const all: AuditEntry[] = []
    for (let i = 0; i < 30; i++) all.push(await store.append(entry(i)))
    const newest = [...all].reverse()
    const check = async (
      what: string,
      filter: Parameters<AuditStore['query']>[0],
      keep: (e: AuditEntry) => boolean,
    ) => {
      const got = (await store.query(filter)).data.map((e) => e.id)
      const want = newest
        .filter(keep)
        .slice(0, filter.limit)
        .map((e) => e.id)
      t.ok(want.length > 0, `${what}: the filter matches something`)
      t.same(got, want, what)
    }
    await check('actor by id', { limit: 100, actor: 'admin:00ff00ff00ff00ff' }, (e) => e.actor.type === 'admin')
    await check('actor by user id', { limit: 100, actor: 'usr_1' }, (e) => e.actor.id === 'usr_1')
    await check(
      'actor by username',
      { limit: 100, actor: 'user0' },
      (e) => e.actor.type === 'user' && e.actor.name === 'user0',
    )
    await check('action', { limit: 100, action: 'key.update' }, (e) => e.action === 'key.update')
    await check('object type', { limit: 100, objectType: 'user' }, (e) => e.objectType === 'user')
    await check(
      'object id',
      { limit: 100, objectType: 'key', objectId: 'obj_2' },
      (e) => e.objectType === 'key' && e.objectId === 'obj_2',
    )
    await check(
      'since (inclusive) until (exclusive)',
      { limit: 100, since: T0 + 10_000, until: T0 + 20_000 },
      (e) => e.at >= T0 + 10_000 && e.at < T0 + 20_000,
    )
    await check(
      'everything at once',
      { limit: 100, actor: 'admin:00ff00ff00ff00ff', action: 'key.create', since: T0 + 5000 },
      (e) => e.actor.type === 'admin' && e.action === 'key.create' && e.at >= T0 + 5000,
    )
    t.same((await store.query({ limit: 10, actor: 'nobody' })).data, [], 'no match: an empty page')
  })

  withStore('pages by cursor: every record once, in order, has_more exact; with a filter too', async (t, store) => {
    const all: AuditEntry[] = []
    for (let i = 0; i < 25; i++) all.push(await store.append(entry(i)))
    const pages = await allPages(store, { limit: 10 })
    t.same(
      pages.map((p) => p.length),
      [10, 10, 5],
    )
    t.same(
      pages.flat().map((e) => e.id),
      [...all].reverse().map((e) => e.id),
      'newest first, none twice, none missed',
    )
    const exact = await allPages(store, { limit: 5 })
    t.same(
      exact.map((p) => p.length),
      [5, 5, 5, 5, 5],
      'a last page that is exactly full says has_more false',
    )
    const filtered = await allPages(store, { limit: 3, action: 'key.update', objectType: 'key' })
    const want = [...all].reverse().filter((e) => e.action === 'key.update' && e.objectType === 'key')
    t.same(
      filtered.flat().map((e) => e.id),
      want.map((e) => e.id),
      'filtered pages',
    )
    t.ok(filtered.length > 2, 'more than two pages of a sparse filter')
  })

  withStore('a cursor this store never gave is refused', async (t, store) => {
    await store.append(entry(1))
    for (const after of ['nope', 'aud_x', 'key_123', '']) {
      await t.rejects(store.query({ limit: 5, after }), AuditCursorError, after)
    }
  })

  withStore('append-only: the store offers nothing that changes or removes one record', async (t, store) => {
    t.same(Object.keys(store).sort(), ['append', 'close', 'kind', 'prune', 'query'])
  })

  withStore('concurrent appends: every one kept under its own id', async (t, store) => {
    const made = await Promise.all(Array.from({ length: 50 }, (_, i) => store.append(entry(i))))
    t.equal(new Set(made.map((e) => e.id)).size, 50)
    const read = (await allPages(store, { limit: 100 })).flat()
    t.same(new Set(read.map((e) => e.requestId)), new Set(made.map((e) => e.requestId)))
  })

  withStore('prune removes exactly what is older than the time; ids are not reused', async (t, store) => {
    const old = [await store.append(entry(0, { at: T0 })), await store.append(entry(1, { at: T0 + DAY - 1 }))]
    const kept = [await store.append(entry(2, { at: T0 + DAY })), await store.append(entry(3, { at: T0 + 2 * DAY }))]
    t.equal(await store.prune(T0 + DAY), 2, 'two were older')
    t.same(
      (await store.query({ limit: 10 })).data.map((e) => e.id),
      [...kept].reverse().map((e) => e.id),
    )
    t.equal(await store.prune(T0 + DAY), 0, 'again: nothing')
    const next = await store.append(entry(4, { at: T0 + 3 * DAY }))
    t.notOk(
      [...old, ...kept].some((e) => e.id === next.id),
      'a new record has a new id',
    )
    t.equal((await store.query({ limit: 10 })).data[0]?.id, next.id, 'and is the newest')
  })

  withStore('retention: the log, on an injected clock, keeps retentionDays and sweeps the rest', async (t, store) => {
    const clock = { at: T0 }
    const log = createAuditLog({ store, retentionDays: 30, now: () => clock.at })
    const base = { ...entry(0) }
    const { at: _at, ...rest } = base
    const first = await log.record({ ...rest, requestId: 'day-0' })
    t.equal(first.at, T0, 'stamped with the clock')
    clock.at = T0 + 20 * DAY
    await log.record({ ...rest, requestId: 'day-20' })
    t.equal(await log.sweep(), 0, 'day 20: nothing is 30 days old')
    clock.at = T0 + 30 * DAY
    t.equal(await log.sweep(), 0, 'day 30 exactly: the first is 30 days old, not older')
    clock.at = T0 + 30 * DAY + 1
    t.equal(await log.sweep(), 1, 'a millisecond later it goes')
    t.same(
      (await log.query({ limit: 10 })).data.map((e) => e.requestId),
      ['day-20'],
    )
    clock.at = T0 + 51 * DAY
    t.equal(await log.sweep(), 1)
    t.same((await log.query({ limit: 10 })).data, [])
  })
}

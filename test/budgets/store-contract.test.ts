// The BudgetStore port on both adapters: what is put is listed, the version moves on every
// change (every instance's book polls it), a remove says whether there was one. Also the
// periods a budget counts in (calendar days, ISO weeks, months) in UTC and in zones with DST.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { openEmbeddedBudgetStore } from '../../src/budgets/embedded-store.ts'
import { periodOf, zonedIso, type BudgetPeriod } from '../../src/budgets/period.ts'
import type { BudgetRecord, BudgetStore } from '../../src/budgets/port.ts'
import { createRedisBudgetStore } from '../../src/budgets/redis-store.ts'
import { deleteUnder } from '../helpers/redis.ts'
import { redisClient } from '../limits/helpers.ts'

const record = (over: Partial<BudgetRecord> = {}): BudgetRecord => ({
  scope: 'owner',
  id: 'team-a',
  amountNanos: 50_000_000_000,
  period: 'month',
  timeZone: 'Europe/Berlin',
  thresholds: null,
  revision: 'r1',
  updatedAt: '2026-11-27T12:00:00.000Z',
  ...over,
})

function contract(name: string, open: () => Promise<BudgetStore>): void {
  t.test(`${name}: put, list, version, remove`, async (t) => {
    const store = await open()
    t.teardown(() => store.close())
    const v0 = await store.version()
    t.same(await store.list(), [])
    await store.put(record())
    await store.put(record({ scope: 'key', id: 'key_1', period: 'day', timeZone: null, thresholds: [90] }))
    const v1 = await store.version()
    t.not(v1, v0, 'a change moves the version')
    t.same(
      (await store.list()).map((r) => [r.scope, r.id]),
      [
        ['key', 'key_1'],
        ['owner', 'team-a'],
      ],
    )
    await store.put(record({ amountNanos: 1, revision: 'r2' }))
    t.not(await store.version(), v1)
    t.match(
      (await store.list()).find((r) => r.scope === 'owner'),
      { amountNanos: 1, revision: 'r2' },
      'replaced',
    )
    t.equal(await store.remove('owner', 'team-a'), true)
    t.equal(await store.remove('owner', 'team-a'), false)
    t.same(
      (await store.list()).map((r) => r.id),
      ['key_1'],
    )
  })
}

contract('embedded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-budget-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return openEmbeddedBudgetStore(dir)
})

const prefix = `tgtest:budgets:${randomBytes(6).toString('hex')}:`
const admin = redisClient()
t.teardown(async () => {
  await deleteUnder(admin, prefix)
  admin.disconnect()
})
contract('redis', async () => createRedisBudgetStore(redisClient(), prefix, true))

t.test('periods: calendar days, ISO weeks and months on the wall clock of a zone', async (t) => {
  const span = (period: BudgetPeriod, zone: string, at: string): [string, string, number] => {
    const s = periodOf(period, zone, Date.parse(at))
    return [zonedIso(s.start, zone), zonedIso(s.end, zone), (s.end - s.start) / 3_600_000]
  }
  t.same(span('month', 'UTC', '2026-02-14T10:00:00Z'), ['2026-02-01T00:00:00Z', '2026-03-01T00:00:00Z', 672])
  t.same(span('month', 'UTC', '2028-02-29T23:59:59Z'), ['2028-02-01T00:00:00Z', '2028-03-01T00:00:00Z', 696])
  t.same(span('month', 'UTC', '2026-12-31T23:59:59Z'), ['2026-12-01T00:00:00Z', '2027-01-01T00:00:00Z', 744])
  t.same(span('month', 'Europe/Berlin', '2026-11-30T23:30:00Z'), [
    '2026-12-01T00:00:00+01:00',
    '2027-01-01T00:00:00+01:00',
    744,
  ])
  t.same(span('month', 'Europe/Berlin', '2026-03-15T12:00:00Z'), [
    '2026-03-01T00:00:00+01:00',
    '2026-04-01T00:00:00+02:00',
    743,
  ])
  t.same(span('day', 'Europe/Berlin', '2026-03-29T12:00:00Z'), [
    '2026-03-29T00:00:00+01:00',
    '2026-03-30T00:00:00+02:00',
    23,
  ])
  t.same(span('day', 'Europe/Berlin', '2026-10-25T12:00:00Z'), [
    '2026-10-25T00:00:00+02:00',
    '2026-10-26T00:00:00+01:00',
    25,
  ])
  t.same(span('week', 'America/New_York', '2026-03-10T12:00:00Z'), [
    '2026-03-09T00:00:00-04:00',
    '2026-03-16T00:00:00-04:00',
    168,
  ])
  t.same(span('week', 'America/New_York', '2026-03-08T12:00:00Z'), [
    '2026-03-02T00:00:00-05:00',
    '2026-03-09T00:00:00-04:00',
    167,
  ])
  // A zone whose DST change skips midnight itself: the day begins at 01:00.
  t.same(span('day', 'America/Santiago', '2026-09-06T12:00:00Z'), [
    '2026-09-06T01:00:00-03:00',
    '2026-09-07T00:00:00-03:00',
    23,
  ])
  t.same(span('day', 'Asia/Kolkata', '2026-02-28T20:00:00Z'), [
    '2026-03-01T00:00:00+05:30',
    '2026-03-02T00:00:00+05:30',
    24,
  ])
  t.same(periodOf('lifetime', 'UTC', Date.now()), { start: 0, end: Infinity })
})

// Audit records speak the admin API's names: a budget's `amount` (currency units, as PUT
// /admin/budgets takes it) and `time_zone`, a webhook's `events` and `created_at`, never the
// stores' amountNanos, timeZone or createdAt. A webhook test event changes nothing and leaves
// no record.
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'

const gw = await startTollgate()
t.teardown(() => gw.stop())
const call = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${gw.adminToken}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  t.ok(res.status < 300, `${method} ${path}: ${res.status}`)
  return (await res.json()) as Record<string, unknown>
}
interface Entry {
  action: string
  object_id: string
  before: Record<string, unknown> | null
  after: Record<string, unknown> | null
}
const records = async (action: string): Promise<Entry[]> =>
  ((await call('GET', `/admin/audit?action=${action}`)) as unknown as { data: Entry[] }).data

t.test('a budget set: amount and time_zone, as the API takes them', async (t) => {
  const { id } = await gw.createKey({ tier: 'Standard4000' })
  await call('PUT', `/admin/budgets/key/${id}`, { amount: 12.5, period: 'month', time_zone: 'Europe/Berlin' })
  await call('PUT', `/admin/budgets/key/${id}`, { amount: 20, period: 'month' })
  const [second, first] = await records('budget.set')
  t.match(first?.after, { scope: 'key', id, amount: 12.5, period: 'month', time_zone: 'Europe/Berlin' })
  t.match(second?.before, { amount: 12.5, time_zone: 'Europe/Berlin' })
  t.match(second?.after, { amount: 20, time_zone: null, updated_at: String })
  for (const e of [first, second])
    for (const internal of ['amountNanos', 'timeZone', 'updatedAt'])
      t.notOk(internal in (e?.after ?? {}), `no ${internal}`)
})

t.test('a webhook created: its events and created_at; a test event: no record', async (t) => {
  const created = await call('POST', '/admin/webhooks', {
    url: 'https://hooks.example.com/tg',
    events: ['key.revoked'],
  })
  const [record] = await records('webhook.create')
  t.match(record?.after, { id: created.id, events: ['key.revoked'], created_at: String, updated_at: String })
  for (const internal of ['eventTypes', 'createdAt', 'updatedAt']) t.notOk(internal in (record?.after ?? {}))
  const before = ((await call('GET', '/admin/audit')) as unknown as { data: Entry[] }).data.length
  await call('POST', `/admin/webhooks/${String(created.id)}/test`)
  const after = ((await call('GET', '/admin/audit')) as unknown as { data: Entry[] }).data.length
  t.equal(after, before, 'the test event is not a change')
  t.same(await records('webhook.test'), [])
})

t.test('a reload: the configuration as GET /admin/reload shows it', async (t) => {
  await call('POST', '/admin/reload', {})
  const [record] = await records('config.reload')
  t.match(record?.after, { hash: String, plans_hash: String, loaded_at: /^\d{4}-\d\d-\d\dT/ })
  for (const internal of ['plansHash', 'loadedAt']) t.notOk(internal in (record?.after ?? {}))
})

// The behaviour every WebhookStore adapter must show; run by store-embedded.test.ts and
// store-redis.test.ts.
import type { Test } from 'tap'
import type { GatewayEvent } from '../../src/events/types.ts'
import type { WebhookEndpoint, WebhookStore } from '../../src/webhooks/port.ts'
import { spaceCases, type StoreSpace } from '../store/with-stores.ts'

export type WebhookSpace = StoreSpace<WebhookStore>

const T0 = 1_700_000_000_000

export function endpointAt(id: string, overrides: Partial<WebhookEndpoint> = {}): WebhookEndpoint {
  return {
    id,
    url: `https://hooks.example.com/${id}`,
    description: null,
    eventTypes: null,
    enabled: true,
    secret: `whsec_${Buffer.from(id).toString('base64')}`,
    createdAt: new Date(T0).toISOString(),
    updatedAt: new Date(T0).toISOString(),
    ...overrides,
  }
}

export function eventOf(id: string, type: GatewayEvent['type'] = 'key.created'): GatewayEvent {
  return {
    id,
    type,
    timestamp: new Date(T0).toISOString(),
    data: { key_id: 'key_1', name: null, owner: 'alice', tier: null, prefix: 'tg-abc' },
  }
}

export function webhookStoreContract(t: Test, name: string, makeSpace: () => Promise<WebhookSpace>): void {
  const withStore = spaceCases(t, name, makeSpace)

  withStore('endpoints: create, list oldest first, get, update, delete', async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a', { eventTypes: ['key.created', 'key.revoked'] }))
    await store.createEndpoint(endpointAt('whe_b', { description: 'second', enabled: false }))
    t.same(
      (await store.listEndpoints()).map((e) => e.id),
      ['whe_a', 'whe_b'],
    )
    t.same(await store.getEndpoint('whe_a'), endpointAt('whe_a', { eventTypes: ['key.created', 'key.revoked'] }))
    t.equal(await store.getEndpoint('whe_none'), null)
    const changed = endpointAt('whe_b', { url: 'https://other.example.com/', enabled: true, eventTypes: null })
    t.equal(await store.updateEndpoint(changed), true)
    t.same(await store.getEndpoint('whe_b'), changed)
    t.equal(await store.updateEndpoint(endpointAt('whe_none')), false, 'no endpoint to update')
    t.equal(await store.deleteEndpoint('whe_a'), true)
    t.equal(await store.deleteEndpoint('whe_a'), false, 'gone already')
    t.same(
      (await store.listEndpoints()).map((e) => e.id),
      ['whe_b'],
    )
  })

  withStore(
    'append commits the event and its deliveries; a dedupe key makes a second one nothing',
    async (t, store) => {
      await store.createEndpoint(endpointAt('whe_a'))
      await store.createEndpoint(endpointAt('whe_b'))
      const deliveries = [
        { id: 'whd_1', endpointId: 'whe_a' },
        { id: 'whd_2', endpointId: 'whe_b' },
      ]
      t.equal(await store.append(eventOf('evt_1'), deliveries, 'k1', T0), true)
      t.same(await store.getEvent('evt_1'), eventOf('evt_1'))
      const d1 = await store.getDelivery('whd_1')
      t.match(d1, {
        id: 'whd_1',
        endpointId: 'whe_a',
        eventId: 'evt_1',
        eventType: 'key.created',
        status: 'pending',
        attempts: 0,
        nextAttemptAt: T0,
        createdAt: T0,
        lastStatus: null,
        lastError: null,
        replayOf: null,
      })
      t.equal(await store.append(eventOf('evt_2'), [{ id: 'whd_3', endpointId: 'whe_a' }], 'k1', T0 + 1), false)
      t.equal(await store.getEvent('evt_2'), null, 'the duplicate is not stored')
      t.equal(await store.getDelivery('whd_3'), null, 'nor its deliveries')
      t.equal(await store.append(eventOf('evt_3'), [], null, T0 + 2), true, 'no dedupe key: always stored')
      t.equal(await store.append(eventOf('evt_4'), [], null, T0 + 3), true)
      t.same((await store.due(T0 + 10, 10)).map((d) => d.id).sort(), ['whd_1', 'whd_2'])
      t.same(await store.due(T0 - 1, 10), [], 'nothing due before its time')
    },
  )

  withStore('attempts: retry moves the next attempt, delivered and failed end it, once', async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a'))
    await store.append(
      eventOf('evt_1'),
      [
        { id: 'whd_1', endpointId: 'whe_a' },
        { id: 'whd_2', endpointId: 'whe_a' },
      ],
      null,
      T0,
    )
    t.equal(
      await store.recordAttempt(
        'whd_1',
        { at: T0 + 5, status: 503, error: 'answered 503', durationMs: 12 },
        { kind: 'retry', at: T0 + 1000 },
      ),
      true,
    )
    t.match(await store.getDelivery('whd_1'), {
      status: 'pending',
      attempts: 1,
      nextAttemptAt: T0 + 1000,
      lastStatus: 503,
      lastError: 'answered 503',
      updatedAt: T0 + 5,
    })
    t.same(
      (await store.due(T0 + 500, 10)).map((d) => d.id),
      ['whd_2'],
      'the retried one is due later',
    )
    t.same(
      (await store.due(T0 + 1000, 10)).map((d) => [d.id, d.nextAttemptAt, d.createdAt]),
      [
        ['whd_2', T0, T0],
        ['whd_1', T0 + 1000, T0],
      ],
      'soonest first',
    )
    t.equal(
      await store.recordAttempt(
        'whd_1',
        { at: T0 + 1001, status: null, error: 'ECONNREFUSED', durationMs: 1 },
        { kind: 'retry', at: T0 + 3000 },
      ),
      true,
    )
    t.equal(
      await store.recordAttempt(
        'whd_1',
        { at: T0 + 3001, status: 204, error: null, durationMs: 3 },
        { kind: 'delivered' },
      ),
      true,
    )
    t.match(await store.getDelivery('whd_1'), {
      status: 'delivered',
      attempts: 3,
      nextAttemptAt: null,
      lastStatus: 204,
      lastError: null,
    })
    t.same(
      (await store.attempts('whd_1')).map((a) => [a.at, a.status, a.error, a.durationMs]),
      [
        [T0 + 5, 503, 'answered 503', 12],
        [T0 + 1001, null, 'ECONNREFUSED', 1],
        [T0 + 3001, 204, null, 3],
      ],
    )
    t.equal(
      await store.recordAttempt(
        'whd_1',
        { at: T0 + 4000, status: 200, error: null, durationMs: 1 },
        { kind: 'delivered' },
      ),
      false,
      'a finished delivery takes no attempt',
    )
    t.equal((await store.attempts('whd_1')).length, 3)
    t.equal(
      await store.recordAttempt(
        'whd_2',
        { at: T0 + 9, status: 500, error: 'answered 500', durationMs: 1 },
        { kind: 'failed' },
      ),
      true,
    )
    t.match(await store.getDelivery('whd_2'), { status: 'failed', attempts: 1, nextAttemptAt: null })
    t.same(await store.due(T0 + 100_000, 10), [], 'nothing pending')
    t.equal(
      await store.recordAttempt('whd_none', { at: T0, status: 200, error: null, durationMs: 1 }, { kind: 'delivered' }),
      false,
    )
  })

  withStore("history: an endpoint's deliveries newest first, in pages", async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a'))
    await store.createEndpoint(endpointAt('whe_b'))
    for (let i = 1; i <= 5; i++)
      await store.append(
        eventOf(`evt_${i}`),
        [
          { id: `whd_a${i}`, endpointId: 'whe_a' },
          { id: `whd_b${i}`, endpointId: 'whe_b' },
        ],
        null,
        T0 + i,
      )
    const first = await store.listDeliveries('whe_a', { limit: 2 })
    t.same(
      first.data.map((d) => d.id),
      ['whd_a5', 'whd_a4'],
    )
    t.equal(first.hasMore, true)
    const second = await store.listDeliveries('whe_a', { after: 'whd_a4', limit: 2 })
    t.same(
      second.data.map((d) => d.id),
      ['whd_a3', 'whd_a2'],
    )
    const last = await store.listDeliveries('whe_a', { after: 'whd_a2', limit: 2 })
    t.same(
      last.data.map((d) => d.id),
      ['whd_a1'],
    )
    t.equal(last.hasMore, false)
    t.same(
      await store.listDeliveries('whe_a', { after: 'whd_b3', limit: 2 }),
      { data: [], hasMore: false },
      "another endpoint's id is no cursor",
    )
  })

  withStore('replay adds a delivery of a kept event; deleting an endpoint drops its deliveries', async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a'))
    await store.append(eventOf('evt_1', 'key.revoked'), [{ id: 'whd_1', endpointId: 'whe_a' }], null, T0)
    await store.recordAttempt(
      'whd_1',
      { at: T0 + 1, status: 500, error: 'answered 500', durationMs: 1 },
      { kind: 'failed' },
    )
    const replay = await store.addDelivery('evt_1', { id: 'whd_2', endpointId: 'whe_a', replayOf: 'whd_1' }, T0 + 10)
    t.match(replay, {
      id: 'whd_2',
      eventId: 'evt_1',
      eventType: 'key.revoked',
      status: 'pending',
      attempts: 0,
      replayOf: 'whd_1',
      nextAttemptAt: T0 + 10,
    })
    t.same(
      (await store.listDeliveries('whe_a', { limit: 10 })).data.map((d) => d.id),
      ['whd_2', 'whd_1'],
    )
    t.equal(await store.addDelivery('evt_none', { id: 'whd_3', endpointId: 'whe_a', replayOf: null }, T0), null)
    t.equal(await store.addDelivery('evt_1', { id: 'whd_4', endpointId: 'whe_none', replayOf: null }, T0), null)
    t.equal(await store.deleteEndpoint('whe_a'), true)
    t.equal(await store.getDelivery('whd_1'), null)
    t.equal(await store.getDelivery('whd_2'), null)
    t.same(await store.due(T0 + 100, 10), [], 'its pending delivery is gone from the due list')
  })

  withStore('prune drops finished deliveries and events older than the cut, not pending ones', async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a'))
    await store.append(eventOf('evt_old'), [{ id: 'whd_old', endpointId: 'whe_a' }], 'dedupe-old', T0)
    await store.append(eventOf('evt_pending'), [{ id: 'whd_pending', endpointId: 'whe_a' }], null, T0)
    await store.append(eventOf('evt_bare'), [], 'dedupe-bare', T0)
    await store.recordAttempt('whd_old', { at: T0 + 1, status: 200, error: null, durationMs: 1 }, { kind: 'delivered' })
    t.ok((await store.prune(T0 + 1000)) >= 2)
    t.equal(await store.getDelivery('whd_old'), null)
    t.equal(await store.getEvent('evt_old'), null)
    t.equal(await store.getEvent('evt_bare'), null)
    t.ok(await store.getDelivery('whd_pending'), 'a pending delivery stays')
    t.ok(await store.getEvent('evt_pending'), 'and its event')
    t.equal(
      await store.append(eventOf('evt_again'), [], 'dedupe-old', T0 + 2000),
      true,
      'a pruned dedupe key is free again',
    )
  })

  withStore('concurrent appends with one dedupe key store exactly one event', async (t, store) => {
    await store.createEndpoint(endpointAt('whe_a'))
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.append(eventOf(`evt_${i}`), [{ id: `whd_${i}`, endpointId: 'whe_a' }], 'same', T0 + i),
      ),
    )
    t.equal(results.filter(Boolean).length, 1)
    t.equal((await store.listDeliveries('whe_a', { limit: 100 })).data.length, 1)
    t.equal(await store.ping(), true)
  })
}

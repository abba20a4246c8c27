// Priority classes at a deployment's capacity (issue #39, item 3), on a running gateway with
// one deployment of maxConcurrent 5 whose upstream holds every call until the test lets it go:
// flex calls may fill flexShare (0.8: 4) of its slots. On /v2 the fifth flex call in flight is
// shed at once (429 flex_capacity_exceeded with a retry hint) while a default call still gets
// the slot kept for it; on /queue, calls of other keys waiting for the deployment are let
// through priority first, then default, then flex, whatever order they came in; and a
// deployment with room runs every class at once, nobody overtaking anybody. On the embedded
// store and on Redis.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startGatedUpstream } from '../helpers/gated-upstream.ts'
import { onSharedRedis, startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { counterSum } from '../helpers/metrics.ts'
import { deleteUnder } from '../helpers/redis.ts'
import { redisClient } from '../limits/helpers.ts'

const MODEL = 'gated-model'
const SLOTS = 5
const up = await startGatedUpstream()
t.teardown(() => up.close())
let gw: RunningTollgate

interface Answer {
  readonly status: number
  readonly code: string
  readonly tier: string
  readonly retryMs: number
}

async function call(path: '/v2' | '/queue', key: string, name: string, tier: string): Promise<Answer> {
  const res = await fetch(`${gw.url}${path}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: name }],
      max_tokens: 5,
      service_tier: tier,
    }),
  })
  const json = (await res.json()) as { service_tier?: string; error?: { code?: string } }
  return {
    status: res.status,
    code: json.error?.code ?? '',
    tier: json.service_tier ?? '',
    retryMs: Number(res.headers.get('retry-after-ms')),
  }
}

/** Until `n` calls of this gateway wait for a deployment to have room (the capacity line). */
async function waitingForRoom(n: number): Promise<void> {
  const seen = await pollUntil(
    () => counterSum(gw, 'tollgate_queue_capacity_waiting'),
    (count) => count >= n,
    2000,
    10,
  )
  if (!seen.met) throw new Error(`only ${seen.value} calls waited for room, not ${n}`)
}

const keyOf = async (name: string): Promise<string> => (await gw.createKey({ name })).key

// The same on the embedded store and on Redis (the deployment's state in the capacity store's script).
for (const store of ['embedded', 'redis'] as const) {
  t.test(store, async (t) => {
    const prefix = `tgtest:flexcap:${randomBytes(6).toString('hex')}:`
    const shared = store === 'redis' ? onSharedRedis(prefix) : {}
    if (store === 'redis') {
      const redis = redisClient()
      t.teardown(async () => {
        await deleteUnder(redis, prefix)
        redis.disconnect()
      })
    }
    gw = await startTollgate({
      ...shared,
      config: (doc) => {
        shared.config?.(doc)
        doc.backends = { ...(doc.backends as object), gated: { type: 'openai', baseUrl: up.url } }
        doc.models = [
          ...(doc.models as object[]),
          { name: MODEL, kind: 'chat', deployments: [{ backend: 'gated', maxConcurrent: SLOTS }] },
        ]
        doc.plans = { defaultTier: 'Open', tiers: { Open: { default: { rpm: 10_000 } } } }
        ;(doc.queue as Record<string, unknown>).maxWaitMs = 60_000
        // Classes alone: with /v2's fair shares, the holder (a newcomer lifted above the key just
        // served) would be kept from the last slot for a second (docs/limits.md "Fair shares").
        ;(doc.queue as Record<string, unknown>).fairShareReserve = 0
      },
    })
    t.teardown(() => gw.stop())

    t.test('/v2: at the deployment’s capacity flex is shed first, default still gets its slot', async (t) => {
      const { key, id } = await gw.createKey({ name: 'v2' })
      const base = up.received.length
      // Four flex calls fill flex's share of the five slots.
      const flex = Array.from({ length: 4 }, (_, i) => call('/v2', key, `flex-${i}`, 'flex'))
      await up.arrived(base + 4)
      const shed = await call('/v2', key, 'flex-shed', 'flex')
      t.equal(shed.status, 429, 'the fifth flex call is shed')
      t.equal(shed.code, 'flex_capacity_exceeded')
      t.ok(shed.retryMs >= 1 && shed.retryMs <= 1000, `a retry hint: retry-after-ms ${shed.retryMs}`)
      // A default call is not: the fifth slot is kept for it.
      const kept = call('/v2', key, 'default-kept', 'default')
      await up.arrived(base + 5)
      const full = await call('/v2', key, 'default-full', 'default')
      t.equal(full.status, 429, 'with every slot taken, a default call is refused too')
      t.equal(full.code, 'upstream_capacity_exceeded', 'as the deployment being full, not as flex')
      up.release()
      const served = await Promise.all([...flex, kept])
      t.same(
        served.map((a) => a.status),
        [200, 200, 200, 200, 200],
      )
      t.same(
        served.slice(0, 4).map((a) => a.tier),
        ['flex', 'flex', 'flex', 'flex'],
        'the flex replies say flex',
      )
      t.notOk(up.received.includes('flex-shed'), 'the shed call never reached the upstream')
      // With room again, flex runs.
      const again = call('/v2', key, 'flex-again', 'flex')
      await up.arrived(base + 6)
      up.release()
      t.equal((await again).status, 200, 'flex is served once there is room')
      // Shed or refused at capacity, a call reached no upstream: its request is given back, no usage row counts it.
      const usage = (await (
        await fetch(`${gw.url}/admin/usage?group_by=key`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
      ).json()) as { data: Array<{ key_id?: string; requests?: number }> }
      t.equal(usage.data.find((row) => row.key_id === id)?.requests, 6, 'six served calls metered, the shed one not')
    })

    t.test('/queue: under contention priority overtakes flex, default comes between', async (t) => {
      const base = up.received.length
      // Every slot taken by default calls of one key (held upstream).
      const holder = await keyOf('holder')
      const holding = Array.from({ length: SLOTS }, (_, i) => call('/v2', holder, `hold-${i}`, 'default'))
      await up.arrived(base + SLOTS)
      // Then, each from a key of its own (the capacity line orders them, not a key's line):
      // two flex calls, a priority call, a default call, in that order.
      const order = ['flex-a', 'flex-b', 'priority', 'default']
      const tiers: Record<string, string> = {
        'flex-a': 'flex',
        'flex-b': 'flex',
        priority: 'priority',
        default: 'default',
      }
      const queued: Array<Promise<Answer>> = []
      for (const [i, name] of order.entries()) {
        queued.push(call('/queue', await keyOf(name), name, tiers[name] ?? 'default'))
        await waitingForRoom(i + 1)
      }
      // Two slots free at once: flex-a, first in line and within its four, could take one, but
      // the priority and the default call waiting behind it go first and take both.
      up.release(2)
      await up.arrived(base + SLOTS + 2)
      t.equal(up.held(), SLOTS, 'both slots taken again')
      // Flex only takes a slot within its four: two more must free before flex-a goes, then one for flex-b.
      up.release(2)
      await up.arrived(base + SLOTS + 3)
      t.equal(up.held(), SLOTS - 1, 'flex-a within its share')
      up.release(1)
      await up.arrived(base + SLOTS + 4)
      const arrivedOrder = up.received.slice(base + SLOTS)
      t.same(
        arrivedOrder,
        ['priority', 'default', 'flex-a', 'flex-b'],
        `priority first, then default, then flex in its order: ${arrivedOrder.join(', ')}`,
      )
      up.release()
      t.same(
        (await Promise.all([...holding, ...queued])).map((a) => a.status),
        Array.from({ length: SLOTS + order.length }, () => 200),
      )
    })

    t.test('/queue: with room, every class runs at once and nobody overtakes', async (t) => {
      const base = up.received.length
      const names = ['flex-1', 'priority-1', 'default-1', 'flex-2']
      const calls: Array<Promise<Answer>> = []
      for (const name of names) {
        calls.push(call('/queue', await keyOf(name), name, name.split('-')[0] ?? 'default'))
        await up.arrived(base + calls.length)
      }
      t.same(up.received.slice(base), names, 'each reached the upstream as it came, none waiting for another')
      t.equal(up.held(), names.length, 'all in flight at once (flex within its four slots)')
      up.release()
      t.same(
        (await Promise.all(calls)).map((a) => a.status),
        [200, 200, 200, 200],
      )
    })
  })
}

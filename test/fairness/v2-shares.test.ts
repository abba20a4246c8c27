// Fair shares on /v2 (issue #39 item 2; src/fairness/capacity-share.ts), on running gateways:
// one deployment of two calls at a time, a tenant flooding it over /v2 with ten clients and a
// light tenant with a few, each client waiting the retry-after-ms of a 429 before it sends
// again. Each run is measured twice in the same test: first come first served
// (`queue.fairShareReserve: 0`, what /v2 did before) and with the reserve kept for the party
// below its share (the default). The flood's clients outnumber the light tenant's, so first
// come first served gives the light tenant about its share of the clients; with the scheme it
// gets its weight's share of the served tokens within ±10 %: 1:1 on the embedded store, 1:2
// over two gateways on one Redis (the capacity and the counters are one). The flood's extra
// calls are refused with fair_share_exceeded and a retry hint. On a deployment with room, or
// with one tenant alone, nobody is refused for share.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { REDIS_URL, deleteUnder } from '../helpers/redis.ts'
import { load, shares, type Load } from './load.ts'

const MODEL = 'gpt-4o-mini'
const WARM = 20
const MEASURED = 160

interface Setup {
  readonly lightWeight: number
  /** queue.fairShareReserve; 0: first come first served. */
  readonly reserve: number
  readonly maxConcurrent?: number
}

function configure(doc: Record<string, unknown>, s: Setup): void {
  const models = doc.models as Array<{ name: string; deployments: Array<Record<string, unknown>> }>
  const model = models.find((m) => m.name === MODEL)
  if (model === undefined) throw new Error(`no ${MODEL} in the default configuration`)
  model.deployments = [{ backend: 'mock', maxConcurrent: s.maxConcurrent ?? 2 }]
  ;(doc.queue as Record<string, unknown>).fairShareReserve = s.reserve
  Object.assign((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}, { tokensPerSecond: 1000 })
  doc.plans = {
    defaultTier: 'Flood',
    tiers: { Flood: { fairShare: { weight: 1 } }, Light: { fairShare: { weight: s.lightWeight } } },
  }
}

/** Starts `n` gateways (on one Redis under a prefix of its own when `redis`), stopped and cleaned at teardown. */
async function gateways(t: Test, n: number, s: Setup, redis: boolean): Promise<RunningTollgate[]> {
  const prefix = `tgtest:fairv2:${randomBytes(6).toString('hex')}:`
  const shared: StartOptions = redis ? onSharedRedis(prefix) : {}
  const options: StartOptions = { ...shared, config: (doc) => (shared.config?.(doc), configure(doc, s)) }
  const client = redis ? createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'fair-v2-test' }) : undefined
  const started = await Promise.all(Array.from({ length: n }, () => startTollgate(options)))
  t.teardown(async () => {
    await Promise.all(started.map((gw) => gw.stop()))
    if (client !== undefined) {
      await deleteUnder(client, prefix).finally(() => client.disconnect())
    }
  })
  return started
}

interface Run {
  readonly light: number
  readonly refused: Record<string, number>
  readonly served: Record<string, number>
}

/** The flood (10 clients) and the light tenant (`lightClients`) over /v2 until MEASURED calls were served after WARM. */
async function measure(
  t: Test,
  gws: readonly RunningTollgate[],
  lightClients: number,
  maxTokens: { flood: number; light: number },
): Promise<Run> {
  const flood = (await (gws[0] as RunningTollgate).createKey({ name: 'flood', tier: 'Flood' })).key
  const light = (await (gws[0] as RunningTollgate).createKey({ name: 'light', tier: 'Light' })).key
  const urls = gws.map((gw) => gw.url)
  const l: Load = load()
  l.start({ name: 'flood', key: flood, urls, clients: 10, maxTokens: maxTokens.flood, path: '/v2' })
  l.start({ name: 'light', key: light, urls, clients: lightClients, maxTokens: maxTokens.light, path: '/v2' })
  await l.until(WARM)
  l.reset()
  await l.until(MEASURED)
  const run = {
    light: shares(l.served).light ?? 0,
    refused: Object.fromEntries(l.refused),
    served: Object.fromEntries(l.served),
  }
  t.same(await l.stop(), [], 'no call failed other than with a 429')
  t.comment(`served ${JSON.stringify(run.served)}; refused ${JSON.stringify(run.refused)}`)
  return run
}

function within(t: Test, share: number, due: number, what: string): void {
  t.ok(Math.abs(share - due) <= 0.1 * due, `${what}: ${share.toFixed(3)} of the tokens, due ${due.toFixed(3)} ±10 %`)
}

t.test('1:1 on the embedded store: the flood cannot push the light tenant below half', async (t) => {
  const tokens = { flood: 120, light: 60 }
  const fcfs = await measure(t, await gateways(t, 1, { lightWeight: 1, reserve: 0 }, false), 3, tokens)
  const fair = await measure(t, await gateways(t, 1, { lightWeight: 1, reserve: 0.1 }, false), 3, tokens)
  t.comment(`light's share: first come first served ${fcfs.light.toFixed(3)}, fair ${fair.light.toFixed(3)}`)
  t.equal(fcfs.refused['flood fair_share_exceeded'], undefined, 'first come first served: nobody refused for share')
  within(t, fair.light, 0.5, 'light (weight 1, replies half as long)')
  t.ok((fair.refused['flood fair_share_exceeded'] ?? 0) > 0, 'the flood was refused for its share')
  // The light tenant is refused for share too, when its counter passes the flood's (the roles swap), but far less.
  t.ok(
    (fair.refused['light fair_share_exceeded'] ?? 0) < (fair.refused['flood fair_share_exceeded'] ?? 0) / 2,
    'the light tenant, seldom above its share, was seldom refused for it',
  )
})

t.test('1:2 over two gateways on one Redis: shares follow the weights', async (t) => {
  const tokens = { flood: 120, light: 120 }
  const fcfs = await measure(t, await gateways(t, 2, { lightWeight: 2, reserve: 0 }, true), 4, tokens)
  const fair = await measure(t, await gateways(t, 2, { lightWeight: 2, reserve: 0.1 }, true), 4, tokens)
  t.comment(`light's share: first come first served ${fcfs.light.toFixed(3)}, fair ${fair.light.toFixed(3)}`)
  within(t, fair.light, 2 / 3, 'light (weight 2)')
  t.ok((fair.refused['flood fair_share_exceeded'] ?? 0) > 0, 'the flood was refused for its share')
})

t.test('uncontended, nobody is refused for share', async (t) => {
  // Room for every client at once (12 in flight at most, of the 14 slots an above-share party may fill): nobody waits.
  const [roomy] = await gateways(t, 1, { lightWeight: 1, reserve: 0.1, maxConcurrent: 16 }, false)
  const gw = roomy as RunningTollgate
  const flood = (await gw.createKey({ name: 'flood', tier: 'Flood' })).key
  const light = (await gw.createKey({ name: 'light', tier: 'Light' })).key
  const l = load()
  l.start({ name: 'flood', key: flood, urls: [gw.url], clients: 10, maxTokens: 60, path: '/v2' })
  l.start({ name: 'light', key: light, urls: [gw.url], clients: 2, maxTokens: 60, path: '/v2' })
  await l.until(60)
  t.same(await l.stop(), [], 'no call failed')
  t.same(Object.fromEntries(l.refused), {}, 'a deployment with room refused nobody')

  // A tenant alone on a full deployment is above nobody: only the deployment's own 429s.
  const [full] = await gateways(t, 1, { lightWeight: 1, reserve: 0.1 }, false)
  const alone = (await (full as RunningTollgate).createKey({ name: 'flood', tier: 'Flood' })).key
  const one = load()
  one.start({
    name: 'flood',
    key: alone,
    urls: [(full as RunningTollgate).url],
    clients: 10,
    maxTokens: 60,
    path: '/v2',
  })
  await one.until(40)
  t.same(await one.stop(), [], 'no call failed')
  t.equal(one.refused.get('flood fair_share_exceeded'), undefined, 'alone: never refused for share')
  t.ok((one.refused.get('flood upstream_capacity_exceeded') ?? 0) > 0, 'the full deployment refused it as before')
})

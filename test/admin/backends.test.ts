// GET /admin/backends and the per-deployment gauges, over a real capacity (memory store)
// taught by real upstream answers: what an operator sees (declared limits, in flight,
// what the upstream said is left, cooldowns), what is refused (no admin token, the admin
// API disabled), and a store that fails (states of null, no samples, never an error).
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { registerBackendRoutes } from '../../src/admin/backends.ts'
import { runBackendsCommand } from '../../src/cli/backends.ts'
import { BackendList } from '../../src/api/admin.ts'
import { createAdminAuthenticator } from '../../src/auth/admin.ts'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { memoryCapacityStore } from '../../src/capacity/memory.ts'
import type { CapacityStore, DeploymentCapacity } from '../../src/capacity/port.ts'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'
import { capacityReadings, type ConfiguredModel } from '../../src/capacity/view.ts'
import { toGatewayError } from '../../src/errors.ts'
import { createContext } from '../../src/http/context.ts'
import { sendError } from '../../src/http/reply.ts'
import { RouteTable, type RouteHandler } from '../../src/http/router.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { CircuitBreaker } from '../../src/proxy/circuit-breaker.ts'
import { request } from '../helpers/http.ts'
import { isError } from './helpers.ts'

const TOKEN = 'adm_backends_test_token_0123456789'
const T0 = Date.parse('2026-11-26T12:00:00.000Z')

const MODELS: ConfiguredModel[] = [
  {
    name: 'gpt-4o',
    deployments: [
      { backend: 'azure-east', model: 'gpt-4o-2024-08-06', weight: 2, rpm: 300, tpm: 50_000 },
      { backend: 'azure-west', weight: 1, tpm: 30_000 },
    ],
  },
  { name: 'llama', deployments: [{ backend: 'ollama', model: 'llama3.3', maxConcurrent: 4 }] },
  // The same upstream deployment under a second public name: one id, one set of counters.
  {
    name: 'gpt-4o-alias',
    // Declares nothing: the shared deployment is held to what the first model declared.
    deployments: [{ backend: 'azure-east', model: 'gpt-4o-2024-08-06', weight: 1 }],
  },
]
const DECLARED = {
  'azure-east/gpt-4o-2024-08-06': { weight: 2, rpm: 300, tpm: 50_000 },
  'azure-west/gpt-4o': { tpm: 30_000 },
  'ollama/llama3.3': { maxConcurrent: 4 },
}

interface Served {
  readonly url: string
  readonly server: Server
}

async function serve(
  capacity: DeploymentCapacity | undefined,
  token: string | undefined,
  breaker?: CircuitBreaker,
): Promise<Served> {
  const router = new RouteTable<RouteHandler>()
  registerBackendRoutes(router, {
    authenticateAdmin: createAdminAuthenticator(token),
    runtime: {
      current: {
        config: {
          models: MODELS.map((m) => ({
            ...m,
            kind: 'chat' as const,
            ownedBy: 'tollgate',
            deployments: m.deployments.map((d) => ({ ...d, weight: d.weight ?? 1 })),
          })),
        },
        ...(capacity === undefined ? {} : { capacity }),
      },
    },
    ...(breaker === undefined ? {} : { breaker }),
  })
  const log = createLogger('silent')
  const server = createServer((req, res) => {
    const ctx = createContext(req, res, 'req_test', log)
    const match = router.match(req.method ?? 'GET', req.url ?? '/')
    if (!match.found) {
      res.statusCode = 404
      res.end()
      return
    }
    match.route(ctx, match.params, match.query).catch((err: unknown) => sendError(ctx, toGatewayError(err)))
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }
}

function capacityAt(store: CapacityStore, clock: { now: number }): DeploymentCapacity {
  return createDeploymentCapacity(store, { deployments: DECLARED, now: () => clock.now, random: () => 0 })
}

const get = (s: Served, token: string | null = TOKEN) =>
  request(`${s.url}/admin/backends`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } })

t.test('happy: declared limits and the learned state of every deployment, in config order', async (t) => {
  const clock = { now: T0 }
  const capacity = capacityAt(memoryCapacityStore(), clock)
  // East: two calls counted, one still in flight; the upstream said how much is left.
  const first = await capacity.acquire(['azure-east/gpt-4o-2024-08-06'], { tokens: 1000 })
  const second = await capacity.acquire(['azure-east/gpt-4o-2024-08-06'], { tokens: 500 })
  t.ok(first.ok && second.ok)
  if (!first.ok || !second.ok) return
  first.lease.observe(
    observeResponse(
      200,
      {
        'x-ratelimit-remaining-requests': '120',
        'x-ratelimit-reset-requests': '30s',
        'x-ratelimit-remaining-tokens': '40000',
        'x-ratelimit-reset-tokens': '20s',
      },
      { now: clock.now },
    ),
  )
  await first.lease.release({ tokens: 800 })
  // West: a 429 that names its wait cools it down.
  await capacity.observe('azure-west/gpt-4o', observeResponse(429, { 'retry-after-ms': '4500' }, { now: clock.now }))
  // Ollama: two calls in flight.
  for (let i = 0; i < 2; i++) t.ok((await capacity.acquire(['ollama/llama3.3'], { tokens: 10 })).ok)

  const s = await serve(capacity, TOKEN)
  t.teardown(() => s.server.close())
  // The reply's times are read against the real clock; the capacity's clock is T0.
  const res = await get(s)
  t.equal(res.status, 200)
  t.equal(res.headers.get('cache-control'), 'no-store')
  const body = res.json<Record<string, unknown>>()
  t.ok(BackendList.safeParse(body).success, 'the reply matches its documented schema')
  const list = BackendList.parse(body)
  t.equal(list.store, 'memory')
  t.equal(list.state_available, true)
  t.same(
    list.data.map((m) => [m.name, m.deployments.map((d) => d.id)]),
    [
      ['gpt-4o', ['azure-east/gpt-4o-2024-08-06', 'azure-west/gpt-4o']],
      ['llama', ['ollama/llama3.3']],
      ['gpt-4o-alias', ['azure-east/gpt-4o-2024-08-06']],
    ],
  )
  const [east, west] = list.data[0]?.deployments ?? []
  t.match(east, {
    object: 'deployment',
    backend: 'azure-east',
    upstream_model: 'gpt-4o-2024-08-06',
    weight: 2,
    limits: { rpm: 300, tpm: 50_000, max_concurrent: null },
    state: {
      in_flight: 0,
      requests: 2,
      tokens: 1300,
      // rpm 300 - 2 counted, but the upstream said 120 (less the second call, sent after the
      // first and maybe not counted in its answer): the tighter wins.
      remaining_requests: 119,
      // tpm 50000 - 1300 = 48700, the upstream 40000 less the second call's 500.
      remaining_tokens: 39_500,
      learned: {
        remaining_requests: 119,
        requests_reset_at: new Date(T0 + 30_000).toISOString(),
        remaining_tokens: 39_500,
        tokens_reset_at: new Date(T0 + 20_000).toISOString(),
      },
      cooling_until: null,
      cooling_down: false,
    },
  })
  t.match(west, {
    backend: 'azure-west',
    upstream_model: 'gpt-4o',
    weight: 1,
    limits: { rpm: null, tpm: 30_000, max_concurrent: null },
    state: {
      remaining_requests: null,
      remaining_tokens: 30_000,
      cooling_until: new Date(T0 + 4500).toISOString(),
    },
  })
  t.match(list.data[1]?.deployments[0], {
    limits: { rpm: null, tpm: null, max_concurrent: 4 },
    state: { in_flight: 2, remaining_requests: null, remaining_tokens: null, cooling_until: null },
  })
  t.same(list.data[2]?.deployments[0]?.state, east?.state, 'a shared deployment shows one state')
  t.same(list.data[2]?.deployments[0]?.limits, east?.limits, 'and the limits it is held to')
  t.equal(list.data[2]?.deployments[0]?.weight, 1, 'with its own weight')
})

t.test('no admin token, a wrong one: 401; the admin API disabled: 403', async (t) => {
  const clock = { now: T0 }
  const s = await serve(capacityAt(memoryCapacityStore(), clock), TOKEN)
  t.teardown(() => s.server.close())
  isError(t, await get(s, null), 401, 'invalid_admin_token', 'no token')
  isError(t, await get(s, `${TOKEN}x`), 401, 'invalid_admin_token', 'wrong token')
  const off = await serve(capacityAt(memoryCapacityStore(), clock), undefined)
  t.teardown(() => off.server.close())
  isError(t, await get(off, TOKEN), 403, 'admin_disabled', 'admin disabled')
})

t.test('a store that fails: 200 with the declared side and states of null', async (t) => {
  const failing: CapacityStore = {
    ...memoryCapacityStore(),
    inspect: () => Promise.reject(new Error('Redis did not answer')),
  }
  const s = await serve(capacityAt(failing, { now: T0 }), TOKEN)
  t.teardown(() => s.server.close())
  const res = await get(s)
  t.equal(res.status, 200)
  const list = BackendList.parse(res.json())
  t.equal(list.state_available, false)
  t.ok(list.data.every((m) => m.deployments.every((d) => d.state === null)))
  t.same(list.data[0]?.deployments[0]?.limits, { rpm: 300, tpm: 50_000, max_concurrent: null })
})

t.test('a gateway without a capacity: the declared side only', async (t) => {
  const s = await serve(undefined, TOKEN)
  t.teardown(() => s.server.close())
  const list = BackendList.parse((await get(s)).json())
  t.equal(list.store, null)
  t.equal(list.state_available, false)
  t.equal(list.data[1]?.deployments[0]?.limits.max_concurrent, 4)
})

t.test("each deployment's circuit, as the instance that answers sees it", async (t) => {
  const clock = { now: T0 }
  const breaker = new CircuitBreaker({ now: () => clock.now })
  for (let i = 0; i < 3; i++) breaker.recordFailure('azure-west')
  breaker.recordFailure('ollama')
  const s = await serve(capacityAt(memoryCapacityStore(), clock), TOKEN, breaker)
  t.teardown(() => s.server.close())
  const list = BackendList.parse((await get(s)).json())
  const circuits = list.data.flatMap((m) => m.deployments.map((d) => [d.id, d.circuit]))
  t.same(circuits, [
    ['azure-east/gpt-4o-2024-08-06', { open: false, failures: 0, open_until: null }],
    ['azure-west/gpt-4o', { open: true, failures: 3, open_until: new Date(T0 + 10_000).toISOString() }],
    ['ollama/llama3.3', { open: false, failures: 1, open_until: null }],
    ['azure-east/gpt-4o-2024-08-06', { open: false, failures: 0, open_until: null }],
  ])
  const without = await serve(capacityAt(memoryCapacityStore(), clock), TOKEN)
  t.teardown(() => without.server.close())
  const none = BackendList.parse((await get(without)).json())
  t.equal(none.data[0]?.deployments[0]?.circuit, null, 'no breaker: not shown')
})

/** The samples of one metric, by `deployment|model`. */
async function samples(metrics: ReturnType<typeof createMetrics>, name: string): Promise<Map<string, number>> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name)
  const out = new Map<string, number>()
  for (const v of (metric?.values ?? []) as Array<{ labels: Record<string, string>; value: number }>)
    out.set(`${v.labels.deployment}|${v.labels.model}`, v.value)
  return out
}

t.test('gauges: read at scrape time, one inspect per scrape, labelled by deployment and model', async (t) => {
  const clock = { now: Date.now() }
  const store = memoryCapacityStore()
  let inspects = 0
  const counted: CapacityStore = {
    ...store,
    inspect: (c, now) => {
      inspects++
      return store.inspect(c, now)
    },
  }
  const capacity = capacityAt(counted, clock)
  const metrics = createMetrics({ defaultMetrics: false })
  metrics.setCapacitySource(capacityReadings(capacity, MODELS))
  await capacity.observe(
    'azure-west/gpt-4o',
    observeResponse(429, { 'retry-after': '30', 'x-ratelimit-remaining-tokens': '0' }, { now: clock.now }),
  )
  const held = await capacity.acquire(['ollama/llama3.3'], { tokens: 10 })
  t.ok(held.ok)
  const text = await metrics.registry.metrics()
  t.equal(inspects, 1, 'five gauges, one read of the store')
  t.match(text, /tollgate_deployment_inflight\{deployment="ollama\/llama3.3",model="llama"\} 1/)
  const remainingTokens = await samples(metrics, 'tollgate_deployment_remaining_tokens')
  t.equal(remainingTokens.get('azure-east/gpt-4o-2024-08-06|gpt-4o'), 50_000, 'declared tpm, nothing used')
  t.equal(remainingTokens.get('azure-east/gpt-4o-2024-08-06|gpt-4o-alias'), 50_000, 'under each model')
  t.equal(remainingTokens.get('azure-west/gpt-4o|gpt-4o'), 0, 'the upstream said none is left')
  t.notOk(remainingTokens.has('ollama/llama3.3|llama'), 'nothing declared or learned: no sample')
  const remainingRequests = await samples(metrics, 'tollgate_deployment_remaining_requests')
  t.equal(remainingRequests.get('azure-east/gpt-4o-2024-08-06|gpt-4o'), 300)
  t.notOk(remainingRequests.has('azure-west/gpt-4o|gpt-4o'))
  const cooling = await samples(metrics, 'tollgate_deployment_cooling_down')
  t.equal(cooling.get('azure-west/gpt-4o|gpt-4o'), 1)
  t.equal(cooling.get('ollama/llama3.3|llama'), 0)
  const left = (await samples(metrics, 'tollgate_deployment_cooldown_seconds')).get('azure-west/gpt-4o|gpt-4o') ?? 0
  t.ok(left > 25 && left <= 30, `seconds left of the cooldown (${left})`)
})

t.test('gauges: a failing store gives no sample and no error; no source gives none either', async (t) => {
  const store = memoryCapacityStore()
  let fail = false
  const flaky: CapacityStore = {
    ...store,
    inspect: (c, now) => (fail ? Promise.reject(new Error('Redis did not answer')) : store.inspect(c, now)),
  }
  const capacity = capacityAt(flaky, { now: Date.now() })
  const metrics = createMetrics({ defaultMetrics: false })
  t.notMatch(await metrics.registry.metrics(), /tollgate_deployment_inflight\{/, 'no source: no samples')
  metrics.setCapacitySource(capacityReadings(capacity, MODELS))
  t.match(await metrics.registry.metrics(), /tollgate_deployment_inflight\{/)
  fail = true
  const text = await metrics.registry.metrics()
  for (const name of [
    'tollgate_deployment_remaining_requests',
    'tollgate_deployment_remaining_tokens',
    'tollgate_deployment_inflight',
    'tollgate_deployment_cooling_down',
    'tollgate_deployment_cooldown_seconds',
  ]) {
    t.match(text, new RegExp(`# TYPE ${name} gauge`), `${name} is still exported`)
    t.notMatch(text, new RegExp(`${name}\\{`), `${name}: no stale sample`)
  }
  fail = false
  t.match(await metrics.registry.metrics(), /tollgate_deployment_inflight\{/, 'and back once it answers')
})

t.test('`tollgate backends list`: a table, --json, and the refusals as exit codes', async (t) => {
  const clock = { now: Date.now() }
  const capacity = capacityAt(memoryCapacityStore(), clock)
  await capacity.observe('azure-west/gpt-4o', observeResponse(429, { 'retry-after': '30' }, { now: clock.now }))
  const breaker = new CircuitBreaker()
  for (let i = 0; i < 3; i++) breaker.recordFailure('ollama')
  const s = await serve(capacity, TOKEN, breaker)
  t.teardown(() => s.server.close())
  const cli = async (args: string[], token = TOKEN): Promise<{ code: number; out: string; err: string }> => {
    let out = ''
    let err = ''
    const code = await runBackendsCommand(args, {
      env: { TOLLGATE_URL: s.url, TOLLGATE_ADMIN_TOKEN: token },
      stdout: (x) => {
        out += x
      },
      stderr: (x) => {
        err += x
      },
    })
    return { code, out, err }
  }
  const listed = await cli(['list'])
  t.equal(listed.code, 0)
  const lines = listed.out.trimEnd().split('\n')
  t.match(
    lines[0],
    /^MODEL\s+DEPLOYMENT\s+RPM\s+TPM\s+MAX CONC\.\s+IN FLIGHT\s+REQ\. LEFT\s+TOKENS LEFT\s+COOLING DOWN\s+CIRCUIT$/,
  )
  t.match(lines[1], /^gpt-4o\s+azure-east\/gpt-4o-2024-08-06\s+300\s+50,000\s+-\s+0\s+300\s+50,000\s+-\s+closed$/)
  t.match(lines[2], /^gpt-4o\s+azure-west\/gpt-4o\s+-\s+30,000\s+-\s+0\s+-\s+30,000\s+until 20\d\d-\S+\s+closed$/)
  t.match(lines[3], /^llama\s+ollama\/llama3.3\s+-\s+-\s+4\s+0\s+-\s+-\s+-\s+open until 20\d\d-/)
  const json = await cli(['list', '--json'])
  t.equal(json.code, 0)
  t.ok(BackendList.safeParse(JSON.parse(json.out)).success, '--json prints the API reply')
  const refused = await cli(['list'], `${TOKEN}x`)
  t.equal(refused.code, 1)
  t.match(refused.err, /admin token/i)
  t.equal((await cli(['list', 'extra'])).code, 64, 'no argument')
})

// `tollgate serve --workers N` (runtime/workers.ts): a real gateway of two workers on the
// shared Redis, driven as users drive it. Concurrent SDK calls spread over both workers
// (both pids in the access log) and a key's limit holds exactly across them; one /metrics
// page adds the workers' counters up; SIGHUP to the primary and a POST /admin/reload that
// reached one worker both put the new file in force on every worker; SIGTERM drains the
// streams in flight on both and every process exits. The embedded store with more than one
// worker, and a bad --workers, are refused at once with a message that says what to do.
import { readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { Readable } from 'node:stream'
import OpenAI from 'openai'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { runTollgate } from '../helpers/cli.ts'
import { onSharedRedis, startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { reloadMetrics } from '../../src/runtime/metrics.ts'
import { GAUGE_AGGREGATION, workerCount, workersRefusal } from '../../src/runtime/workers.ts'

const MODEL = 'gpt-oss-120b'
const LIMIT = 12
const CALLS = 20

function rewrite(gw: RunningTollgate, change: (doc: Record<string, unknown>) => void): void {
  const doc = parse(readFileSync(gw.configPath, 'utf8')) as Record<string, unknown>
  change(doc)
  writeFileSync(gw.configPath, stringify(doc))
}

/** The tier Basic with `rpm` on every model (a reload changes it). */
const plansWith = (rpm: number): Record<string, unknown> => ({
  defaultTier: 'Basic',
  tiers: { Basic: { default: { rpm, tpm: 10_000_000 } }, Standard4000: { default: { rpm, tpm: 10_000_000 } } },
})

const pidsOf = (lines: Array<Record<string, unknown>>): number[] =>
  [...new Set(lines.map((l) => l.pid).filter((p): p is number => typeof p === 'number'))].sort()

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * One kept-alive connection to the gateway (an agent of one socket) and a fetch that sends on
 * it: node:cluster hands a new connection to one worker, and every request on it stays there.
 * `ports` holds the socket's local port for each reply, to show the requests shared it.
 */
interface Lane {
  readonly agent: http.Agent
  readonly fetch: typeof fetch
  readonly ports: number[]
}

function openLane(): Lane {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const ports: number[] = []
  const send = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    new Promise((resolve, reject) => {
      if (init?.body !== undefined && init.body !== null && typeof init.body !== 'string')
        throw new TypeError('a lane sends string bodies only')
      const url = input instanceof Request ? input.url : String(input)
      const headers = Object.fromEntries(new Headers(init?.headers).entries())
      const req = http.request(url, { method: init?.method ?? 'GET', headers, agent }, (res) => {
        ports.push(res.socket.localPort ?? 0)
        const replyHeaders = new Headers()
        for (const [name, value] of Object.entries(res.headers))
          if (value !== undefined) replyHeaders.set(name, Array.isArray(value) ? value.join(', ') : value)
        const body = Readable.toWeb(res) as ReadableStream<Uint8Array>
        resolve(new Response(body, { status: res.statusCode ?? 0, headers: replyHeaders }))
      })
      req.on('error', reject)
      init?.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')))
      req.end(init?.body ?? undefined)
    })
  return { agent, fetch: send, ports }
}

/** The worker a lane's connection is with: the pid of the access-log line of a probe sent on it. */
async function workerOf(gw: RunningTollgate, lane: Lane): Promise<number | undefined> {
  const res = await lane.fetch(`${gw.url}/healthz`)
  await res.arrayBuffer()
  const id = res.headers.get('x-request-id')
  const line = await pollUntil(
    async () => gw.logs().find((l) => l.msg === 'request' && l.reqId === id),
    (l) => l !== undefined,
  )
  return typeof line.value?.pid === 'number' ? line.value.pid : undefined
}

/**
 * `count` lanes, on each of `pids` at least one: fresh connections are probed, a round at a
 * time, until both workers have one (the primary's round robin hands a connection to the
 * first free worker, so a round may land on one). The lanes not chosen are closed.
 */
async function lanesOnEvery(
  gw: RunningTollgate,
  pids: readonly number[],
  count: number,
): Promise<{ lanes: Lane[]; rounds: number; workers: number }> {
  const byPid = new Map<number, Lane[]>(pids.map((pid) => [pid, []]))
  const spare: Lane[] = []
  let rounds = 0
  while (rounds < 10 && [...byPid.values()].some((lanes) => lanes.length === 0)) {
    rounds++
    const fresh = Array.from({ length: count }, openLane)
    const placed = await Promise.all(fresh.map((lane) => workerOf(gw, lane)))
    fresh.forEach((lane, i) => (byPid.get(placed[i] ?? -1) ?? spare).push(lane))
  }
  // One on each worker first, then the rest from any.
  const firsts = [...byPid.values()].flatMap((lanes) => lanes.slice(0, 1))
  const rest = [...byPid.values()].flatMap((lanes) => lanes.slice(1))
  const lanes = [...firsts, ...rest].slice(0, count)
  for (const lane of [...rest.slice(count - firsts.length), ...spare]) lane.agent.destroy()
  return { lanes, rounds, workers: firsts.length }
}

async function reloadLines(gw: RunningTollgate, outcome: string): Promise<Array<Record<string, unknown>>> {
  return gw.logs().filter((l) => l.msg === `configuration reload: ${outcome}`)
}

t.test('two workers on Redis: spread, exact limits, one metrics page, reload, SIGTERM', async (t) => {
  const ns = testNamespace(t, 'workers', 'workers-test')
  const gw = await startTollgate({
    ...onSharedRedis(ns.fresh().prefix),
    args: ['--workers', '2'],
    config: (doc) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = `${ns.namespace}gw:`
      doc.plans = plansWith(100_000)
      // Streams slow enough to be in flight when SIGTERM comes.
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 40
    },
  })
  t.teardown(() => gw.stop('SIGKILL'))
  const listening = gw.logs().find((l) => l.msg === 'tollgate listening')!
  let workerPids = (listening.workerPids as number[]).slice().sort()
  t.equal(listening.workers, 2, 'the primary says it runs two workers')
  t.equal(workerPids.length, 2, 'and names their pids')
  t.notOk(workerPids.includes(gw.child.pid!), 'which are not its own')

  await t.test('concurrent calls spread over both workers; the limit is exact across them', async (t) => {
    const { key, id } = await gw.createKey({ tier: 'Standard4000', limits: { '*': { rpm: LIMIT } } })
    const client = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0 })
    const outcomes = await Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        client.chat.completions
          .create({ model: MODEL, messages: [{ role: 'user', content: `call ${i}` }], max_tokens: 2 })
          .then(
            () => 200,
            (err: unknown) => (err instanceof OpenAI.APIError ? (err.status ?? 0) : -1),
          ),
      ),
    )
    t.equal(outcomes.filter((s) => s === 200).length, LIMIT, `exactly ${LIMIT} of ${CALLS} calls admitted`)
    t.equal(outcomes.filter((s) => s === 429).length, CALLS - LIMIT, 'the rest refused 429')
    // A line is written once its call settled, just after the reply went out.
    const logged = await pollUntil(
      async () => gw.logs().filter((l) => l.msg === 'request' && l.keyId === id && l.model === MODEL),
      (lines) => lines.length >= CALLS,
    )
    const served = logged.value
    t.equal(served.length, CALLS, 'every call has its access-log line')
    t.same(pidsOf(served), workerPids, 'both workers served calls of the key')
    // Counted per worker, a worker refusing calls would have admitted LIMIT itself first.
    const refusedEarly = workerPids.filter((pid) => {
      const mine = served.filter((l) => l.pid === pid)
      return mine.some((l) => l.status === 429) && mine.filter((l) => l.status === 200).length < LIMIT
    })
    t.ok(refusedEarly.length > 0, 'a worker refused calls having admitted fewer than the limit: the count is shared')
  })

  await t.test('one /metrics page: the workers summed', async (t) => {
    t.equal(await counterSum(gw, 'tollgate_workers', { state: 'running' }), 2, 'tollgate_workers{state="running"} 2')
    t.equal(await counterSum(gw, 'tollgate_workers', { state: 'scraped' }), 2, 'both workers on the page')
    t.equal(
      await counterSum(gw, 'tollgate_requests_total', { model: MODEL, status: '200' }),
      LIMIT,
      'the admitted calls of both workers, summed',
    )
    t.equal(
      await counterSum(gw, 'tollgate_requests_total', { model: MODEL, status: '429' }),
      CALLS - LIMIT,
      'and the refused ones',
    )
    t.equal(await counterSum(gw, 'tollgate_store_up'), 1, 'store up: 1 (every worker reaches Redis), not 2')
    const page = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
    t.equal(page.match(/^# TYPE tollgate_requests_total counter$/gm)?.length, 1, 'each metric once on the page')
  })

  await t.test('SIGHUP to the primary reloads every worker', async (t) => {
    rewrite(gw, (doc) => {
      doc.plans = plansWith(90_000)
    })
    gw.child.kill('SIGHUP')
    const applied = await pollUntil(
      () => reloadLines(gw, 'applied'),
      (lines) => pidsOf(lines).length === 2,
    )
    t.same(pidsOf(applied.value), workerPids, 'both workers applied the new file')
    t.equal(
      await counterSum(gw, 'tollgate_config_reloads_total', { outcome: 'applied' }),
      2,
      'two reloads applied, on one page',
    )
  })

  await t.test('POST /admin/reload reaches one worker, which passes it on', async (t) => {
    rewrite(gw, (doc) => {
      doc.plans = plansWith(80_000)
    })
    const res = await fetch(`${gw.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    })
    const report = (await res.json()) as { outcome: string; pid: number; hash: string }
    t.equal(res.status, 200)
    t.equal(report.outcome, 'applied', 'the worker that answered applied it')
    const applied = await pollUntil(
      () => counterSum(gw, 'tollgate_config_reloads_total', { outcome: 'applied' }),
      (n) => n === 4,
    )
    t.ok(applied.met, 'and the other worker applied it too (4 reloads applied in all)')
    const info = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
    const hashes = [...info.matchAll(/^tollgate_config_info\{hash="(\w+)"/gm)].map((m) => m[1])
    t.same(hashes, [report.hash], 'one configuration in force on every worker')
  })

  await t.test('a worker killed is replaced; the gateway serves on', async (t) => {
    const [victim, survivor] = workerPids as [number, number]
    process.kill(victim, 'SIGKILL')
    const replaced = await pollUntil(
      async () => gw.logs().filter((l) => l.msg === 'tollgate worker listening'),
      (lines) => lines.length === 3,
      3000,
    )
    t.ok(replaced.met, 'a third worker started')
    t.ok(
      gw
        .logs()
        .some((l) => l.msg === 'a worker stopped on its own: starting another in a second' && l.signal === 'SIGKILL'),
      'the primary said why',
    )
    workerPids = pidsOf(replaced.value).filter((pid) => pid !== victim)
    t.ok(workerPids.includes(survivor) && workerPids.length === 2, 'two workers again: the survivor and the new one')
    const running = await pollUntil(
      () => counterSum(gw, 'tollgate_workers', { state: 'scraped' }),
      (n) => n === 2,
      500,
      20,
    )
    t.ok(running.met, 'both on the metrics page')
    const { key } = await gw.createKey({ tier: 'Standard4000' })
    const client = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0 })
    const replies = await Promise.all(
      Array.from({ length: 6 }, () =>
        client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
      ),
    )
    t.equal(replies.length, 6, 'calls are served')
  })

  await t.test('SIGTERM drains the streams in flight on both workers and every process exits', async (t) => {
    const { key, id } = await gw.createKey({ tier: 'Standard4000' })
    const STREAMS = 4
    // Each stream on a connection of its own, placed so that both workers have one in flight.
    const { lanes, rounds, workers } = await lanesOnEvery(gw, workerPids, STREAMS)
    t.equal(workers, 2, `a connection on each worker, found in ${rounds} round(s) of ${STREAMS}`)
    t.equal(lanes.length, STREAMS, `${STREAMS} connections`)
    let started = 0
    let startedAll!: () => void
    const allStarted = new Promise<void>((done) => (startedAll = done))
    const streams = lanes.map(async (lane, i) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0, fetch: lane.fetch })
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `stream ${i}` }],
        max_tokens: 30,
        stream: true,
      })
      let text = ''
      let finish: string | null = null
      for await (const chunk of stream) {
        if (text === '' && ++started === STREAMS) startedAll()
        text += chunk.choices[0]?.delta.content ?? ''
        finish = chunk.choices[0]?.finish_reason ?? finish
      }
      return { text, finish }
    })
    await allStarted
    const code = gw.stop('SIGTERM')
    const done = await Promise.all(streams)
    t.ok(
      done.every((s) => s.finish !== null && s.text.length > 0),
      'every stream in flight ended whole',
    )
    t.equal(await code, 0, 'the primary exited 0')
    const stopped = gw.logs().filter((l) => l.msg === 'stopped')
    t.same(pidsOf(stopped), workerPids, 'each worker drained and said stopped')
    t.ok(
      gw.logs().some((l) => l.msg === 'stopped: every worker has exited'),
      'the primary waited for them',
    )
    t.same(workerPids.filter(alive), [], 'no worker process is left')
    const served = gw.logs().filter((l) => l.msg === 'request' && l.keyId === id && l.model === MODEL)
    t.same(pidsOf(served), workerPids, 'the streams were on both workers')
    t.ok(
      lanes.every((lane) => lane.ports.length === 2 && lane.ports[0] === lane.ports[1]),
      'each stream went on the connection its worker was found on',
    )
    for (const lane of lanes) lane.agent.destroy()
  })
})

t.test('refused at once: the embedded store with two workers, a bad --workers', async (t) => {
  const embedded = await runTollgate(['serve', '--workers', '2'], { PORT: '0', METRICS_PORT: '0' })
  t.equal(embedded.code, 2, 'exit 2, as a refused configuration')
  t.match(embedded.stderr, /--workers 2 .*embedded store.*REDIS_URL/s, 'the message names the store and REDIS_URL')
  t.match(
    workersRefusal(
      workerCount('auto', () => 4),
      { redis: undefined },
      'auto',
    ),
    /--workers auto runs 4 gateway processes.*REDIS_URL/,
    'auto on four cores: the same refusal',
  )
  t.equal(
    workersRefusal(
      workerCount('auto', () => 1),
      { redis: undefined },
      'auto',
    ),
    undefined,
    'auto on one core: one process, fine',
  )
  const bad = await runTollgate(['serve', '--workers', 'many'], { PORT: '0', METRICS_PORT: '0' })
  t.equal(bad.code, 64, 'a bad count is a usage error')
  t.match(bad.stderr, /--workers must be a number of processes, 1 to 256, or auto/)
})

t.test("GAUGE_AGGREGATION names the gateway's gauges as they are registered", async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  reloadMetrics(metrics.registry)
  const gauges = new Set(
    (await metrics.registry.getMetricsAsJSON()).filter((m) => String(m.type) === 'gauge').map((m) => m.name),
  )
  for (const name of Object.keys(GAUGE_AGGREGATION)) t.ok(gauges.has(name), `${name} is a gauge of the registry`)
})

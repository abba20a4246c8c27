// The issue-39 mix (bench/admission-mix/trace.ts) replayed on three embedded gateways at
// once, on one fake upstream, in the same run: "today" (fixed output reservation, no fair
// shares, every call in the default class, no deadlines: queue.deadlines wait), "fair"
// (learned reservations and fair shares only: the weights' effect without the classes') and
// "new" (learned reservations, fair shares, the trace's classes on /queue, its deadlines).
// Each call of the trace goes to all three at the same moment.
//
// Recorded per scheme (bench/admission-mix/report.ts prints a Markdown section):
// - false 429s on the /v2 slice: refused, though every call admitted in the key's window
//   (its real output) plus this one's would still fit output_tpm (the oracle of
//   bench/learned-reservations.ts, taken at the end of the window so the strictest);
// - output-token over-admission per window on that slice (real output admitted ÷ output_tpm;
//   target ≤ 110 %);
// - each tenant's share of the tokens served on the contended /queue deployment, against its
//   weight (1:1:2 → 25/25/50 %: all three are backlogged);
// - p50/p99 queue wait (x-queue-wait-ms) per class (for "today", the class the call would have had);
// - deadline refusals (429 queue_deadline) and how many of them the same call under "today"
//   served within the deadline (classes.ts's measure of a refusal that would have fitted);
// - the deadline predictor's actual ÷ predicted wait (tollgate_queue_wait_prediction_ratio).
//
//   node bench/admission-mix.ts [--seconds 60] [--seed 1] [--uncapped 0.5] [--v2-rate 2] [--dump file.json]
//   node bench/admission-mix.ts --redis [--seconds 60] [--kill-at 0.4] [--schemes today,fair,new]
//
// --redis (bench/admission-mix/chaos.ts): each scheme on two gateways over the Redis Sentinel
// topology of test/helpers/redis-topologies.sh (started when it is not running), each call to
// one of them in turn; at 40 % of the run (--kill-at; 1: never), stored streamed /queue requests on both, the master
// SIGKILLed and, once a gateway is off Redis, every scheme's second gateway SIGKILLed. The
// report adds the outage: /v2 key windows against docs/limits.md's bound through an outage,
// and how every stored request ended. At the end the killed node is started again (it rejoins
// as a replica of the new master) and `redis-topologies.sh up sentinel` checks the set is
// healthy; the bench's keys (under a prefix of its own) are deleted. ~3 min.
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { parseDuration } from '../src/limits/duration.ts'
import { randomBytes } from 'node:crypto'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import {
  deleteUnderPrefix,
  ensureTopology,
  gatewayEnv,
  restartNode,
  topologyClient,
} from '../test/helpers/topologies.ts'
import { whenReady } from '../src/store/redis-client.ts'
import {
  INSTANCES,
  chaosLines,
  failOver,
  reached,
  storeRequests,
  storedEnded,
  watchReadiness,
  type ChaosLog,
} from './admission-mix/chaos.ts'
import { report, type Outcome, type Scheme } from './admission-mix/report.ts'
import {
  MAX_CONCURRENT,
  QUEUE_MODEL,
  SOLO_MODEL,
  TENANTS,
  startUpstream,
  trace,
  type Arrivals,
  type Call,
} from './admission-mix/trace.ts'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    seed: { type: 'string', default: '1' },
    uncapped: { type: 'string', default: '0.5' },
    'v2-rate': { type: 'string', default: '2' },
    dump: { type: 'string' },
    redis: { type: 'boolean', default: false },
    schemes: { type: 'string', default: 'today,fair,new' },
    'kill-at': { type: 'string', default: '0.4' },
  },
})
const WINDOW_MS = 2000
/** Each key's output_tpm on the /v2 slice, per WINDOW_MS. */
const OUTPUT_LIMIT = 1500
const MAX_WAIT_MS = 15_000
const calls = trace(Number(values.seed), Number(values.seconds), Number(values.uncapped), Number(values['v2-rate']))

const REDIS = values.redis === true
const prefix = `mixbench:${randomBytes(6).toString('hex')}:`
if (REDIS) await ensureTopology('sentinel')

const arrivals: Arrivals = new Map()
const upstream = await startUpstream(arrivals)

/** The settings of docs/limits.md "When Redis is in trouble" that the outage exercises, as the failover test sets them. */
function onSentinel(doc: Record<string, unknown>, scheme: Scheme): void {
  Object.assign(doc.store as Record<string, unknown>, { keyPrefix: `${prefix}${scheme}:`, commandTimeoutMs: 1000 })
  Object.assign(doc.limits as Record<string, unknown>, {
    onRedisDown: 'insurance',
    insuranceInstances: INSTANCES,
    redisTimeoutMs: 1000,
    probeIntervalMs: 200,
  })
  // A stored request its gateway died running runs again on the other within about 3 s.
  Object.assign(doc.queue as Record<string, unknown>, { recoverAfterMs: 3000, sweepIntervalMs: 1000 })
}

function configure(doc: Record<string, unknown>, scheme: Scheme): void {
  doc.backends = { up: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
  doc.resourceBackend = 'up'
  doc.models = [
    { name: QUEUE_MODEL, kind: 'chat', deployments: [{ backend: 'up', maxConcurrent: MAX_CONCURRENT }] },
    { name: SOLO_MODEL, kind: 'chat', deployments: [{ backend: 'up' }] },
  ]
  doc.limits = { ...(doc.limits as object), windowMs: WINDOW_MS }
  doc.queue = {
    ...(doc.queue as object),
    maxWaitMs: MAX_WAIT_MS,
    retryBackoffMs: 50,
    fairShares: scheme !== 'today',
    deadlines: scheme === 'new' ? 'predict' : 'wait',
  }
  const reservation = scheme === 'today' ? { mode: 'fixed' } : { mode: 'learned', minSamples: 20 }
  doc.plans = {
    defaultTier: TENANTS[0]!.name,
    tiers: Object.fromEntries(
      TENANTS.map((t) => [
        t.name,
        { default: {}, models: {}, fairShare: { weight: t.weight }, outputReservation: reservation },
      ]),
    ),
  }
  if (REDIS) onSentinel(doc, scheme)
}

const schemes = values.schemes.split(',').filter((s): s is Scheme => ['today', 'fair', 'new'].includes(s))
/** Each scheme's gateways (one embedded; INSTANCES on Redis), and those still alive. */
const gateways = new Map<Scheme, RunningTollgate[]>()
const alive = new Map<Scheme, RunningTollgate[]>()
const keys = new Map<string, string>()
await Promise.all(
  schemes.map(async (s) => {
    const secret = randomBytes(24).toString('hex')
    const adminToken = `adm_${randomBytes(16).toString('hex')}`
    const start = (): Promise<RunningTollgate> =>
      startTollgate({
        adminToken,
        dropRequestLogs: true,
        startTimeoutMs: 60_000,
        ...(REDIS ? { env: { ...gatewayEnv('sentinel'), TOLLGATE_KEY_SECRET: secret } } : {}),
        config: (doc) => configure(doc, s),
      })
    const instances: RunningTollgate[] = []
    for (let i = 0; i < (REDIS ? INSTANCES : 1); i++) instances.push(await start())
    gateways.set(s, instances)
    alive.set(s, [...instances])
    const gw = instances[0]!
    for (const t of TENANTS) {
      const { key } = await gw.createKey({
        name: t.name,
        tier: t.name,
        limits: { [SOLO_MODEL]: { output_tpm: OUTPUT_LIMIT } },
      })
      keys.set(`${s}:${t.name}`, key)
    }
    if (REDIS) keys.set(`${s}:stored`, (await gw.createKey({ name: 'stored', tier: TENANTS[0]!.name })).key)
  }),
)

const msOf = (header: string | null): number => (header === null ? NaN : (parseDuration(header) ?? NaN))

async function send(scheme: Scheme, c: Call): Promise<Outcome> {
  const live = alive.get(scheme)!
  const gw = live[c.id % live.length]!
  const classed = scheme === 'new' && c.route === 'queue'
  const started = Date.now()
  try {
    const res = await fetch(`${gw.url}/${c.route}/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${keys.get(`${scheme}:${c.tenant}`)}`,
        'content-type': 'application/json',
        ...(classed && c.deadlineMs !== undefined ? { 'x-tollgate-max-wait-ms': String(c.deadlineMs) } : {}),
      },
      body: JSON.stringify({
        model: c.route === 'queue' ? QUEUE_MODEL : SOLO_MODEL,
        messages: [{ role: 'user', content: `s=${scheme} i=${c.id} n=${c.output}` }],
        ...(c.maxTokens === undefined ? {} : { max_tokens: c.maxTokens }),
        ...(classed ? { service_tier: c.cls } : {}),
      }),
    })
    const body = (await res.json()) as { error?: { code?: string }; usage?: { total_tokens?: number } }
    return {
      call: c,
      status: res.status,
      ...(body.error?.code === undefined ? {} : { code: body.error.code }),
      tokens: body.usage?.total_tokens ?? 0,
      waitMs: Number(res.headers.get('x-queue-wait-ms') ?? NaN),
      tookMs: Date.now() - started,
      resetMs: msOf(res.headers.get('x-ratelimit-reset-output-tokens')),
      hintMs: Number(res.headers.get('retry-after-ms') ?? NaN),
      answeredAt: Date.now(),
      admittedAt: arrivals.get(`${scheme}:${c.id}`) ?? NaN,
    }
  } catch {
    return {
      call: c,
      status: 0,
      tokens: 0,
      waitMs: NaN,
      tookMs: Date.now() - started,
      resetMs: NaN,
      hintMs: NaN,
      answeredAt: Date.now(),
      admittedAt: NaN,
    }
  }
}

/** The gateway's prediction histogram: per class, sum, count, count within ×2 of the prediction, and the bucket bound of its 90th percentile. */
async function predictions(
  gw: RunningTollgate,
): Promise<Map<string, { sum: number; count: number; within2: number; p90: number }>> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  const out = new Map<string, { sum: number; count: number; le: Map<string, number> }>()
  const entry = (cls: string) => out.get(cls) ?? out.set(cls, { sum: 0, count: 0, le: new Map() }).get(cls)!
  for (const m of text.matchAll(/^tollgate_queue_wait_prediction_ratio_(sum|count)\{class="(\w+)"\} (\S+)$/gm))
    entry(m[2]!)[m[1] as 'sum' | 'count'] = Number(m[3])
  for (const m of text.matchAll(/^tollgate_queue_wait_prediction_ratio_bucket\{le="([^"]+)",class="(\w+)"\} (\S+)$/gm))
    entry(m[2]!).le.set(m[1]!, Number(m[3]))
  for (const m of text.matchAll(/^tollgate_queue_wait_prediction_ratio_bucket\{class="(\w+)",le="([^"]+)"\} (\S+)$/gm))
    entry(m[1]!).le.set(m[2]!, Number(m[3]))
  return new Map(
    [...out].map(([cls, e]) => [
      cls,
      {
        sum: e.sum,
        count: e.count,
        within2: (e.le.get('2') ?? 0) - (e.le.get('0.5') ?? 0),
        p90: Number(
          [...e.le]
            .map(([le, n]) => [le === '+Inf' ? Infinity : Number(le), n] as const)
            .sort((a, b) => a[0] - b[0])
            .find(([, n]) => n >= 0.9 * e.count)?.[0] ?? NaN,
        ),
      },
    ]),
  )
}

const chaos: ChaosLog = { offRedis: new Map(), stored: [] }
let killedMaster = false

/** Redis mode, at 40 % of the run: stored requests running on both instances, then the master and the second gateways killed. */
async function midRun(): Promise<void> {
  const stored = await Promise.all(
    schemes.map((s) => storeRequests(s, gateways.get(s)!, keys.get(`${s}:stored`)!, SOLO_MODEL)),
  )
  chaos.stored.push(...stored.flat())
  await reached(() => [...arrivals.keys()].filter((k) => k.includes('Stored:')).length >= chaos.stored.length, 10_000)
  const seconds = schemes.map((s) => gateways.get(s)![1]!)
  const firsts = schemes.map((s) => gateways.get(s)![0]!)
  killedMaster = true
  await failOver(
    firsts,
    [...firsts, ...seconds],
    async () => {
      for (const s of schemes) alive.set(s, [gateways.get(s)![0]!])
      await Promise.all(seconds.map((gw) => gw.stop('SIGKILL')))
    },
    chaos,
  )
}

let stopWatching = (): void => undefined
try {
  const start = Date.now()
  const running: Promise<Outcome>[] = []
  const outcomes = new Map<Scheme, Promise<Outcome>[]>(schemes.map((s) => [s, []]))
  let chaosDone: Promise<void> | undefined
  let chaosFailed: unknown
  if (REDIS)
    stopWatching = watchReadiness(
      () => new Map(schemes.flatMap((s) => alive.get(s)!.map((gw, i) => [`${s}/${i + 1}`, gw] as const))),
      chaos,
    )
  for (const c of calls) {
    if (REDIS && chaosDone === undefined && c.at >= Number(values.seconds) * 1000 * Number(values['kill-at']))
      chaosDone = midRun().catch((error: unknown) => {
        chaosFailed = error
      })
    const wait = start + c.at - Date.now()
    if (wait > 0) await new Promise((done) => setTimeout(done, wait))
    for (const s of schemes) {
      const p = send(s, c)
      running.push(p)
      outcomes.get(s)!.push(p)
    }
  }
  await Promise.all(running)
  await chaosDone
  if (chaosFailed !== undefined) throw chaosFailed
  if (REDIS)
    await storedEnded(
      chaos.stored,
      (s) => alive.get(s)![0]!,
      (s) => keys.get(`${s}:stored`)!,
    )
  stopWatching()
  const results = new Map<Scheme, Outcome[]>()
  for (const s of schemes) results.set(s, await Promise.all(outcomes.get(s)!))
  if (values.dump !== undefined) await writeFile(values.dump, JSON.stringify({ start, results: [...results] }))
  console.log(
    report({
      calls,
      results,
      predicted: alive.has('new') ? await predictions(alive.get('new')![0]!) : new Map(),
      windowMs: WINDOW_MS,
      outputLimit: OUTPUT_LIMIT,
      seconds: Number(values.seconds),
      seed: Number(values.seed),
      uncapped: Number(values.uncapped),
      v2Rate: Number(values['v2-rate']),
      maxWaitMs: MAX_WAIT_MS,
      store: REDIS ? `Redis Sentinel, ${INSTANCES} gateways per scheme` : 'embedded, one gateway per scheme',
    }),
  )
  if (REDIS)
    console.log(
      [
        '',
        '**Through the outage (Redis mode):**',
        '',
        ...chaosLines(chaos, results, calls, WINDOW_MS, OUTPUT_LIMIT, start),
      ].join('\n'),
    )
} finally {
  stopWatching()
  await Promise.all(schemes.flatMap((s) => alive.get(s)!.map((gw) => gw.stop())))
  upstream.server.close()
  if (REDIS) await restoreTopology()
}

/** The killed node started again (a replica of the new master), the set checked healthy, the bench's keys deleted. */
async function restoreTopology(): Promise<void> {
  if (killedMaster && chaos.master !== undefined)
    await restartNode(chaos.master).catch((e: unknown) => console.error(e))
  await ensureTopology('sentinel')
  const redis = topologyClient('sentinel')
  try {
    await whenReady(redis)
    await deleteUnderPrefix(redis, prefix)
  } finally {
    redis.disconnect()
  }
}

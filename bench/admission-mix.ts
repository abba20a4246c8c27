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
//   node bench/admission-mix.ts [--seconds 60] [--seed 1] [--uncapped 0.5] [--v2-rate 2]
import { parseArgs } from 'node:util'
import { parseDuration } from '../src/limits/duration.ts'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
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
  },
})
const WINDOW_MS = 2000
/** Each key's output_tpm on the /v2 slice, per WINDOW_MS. */
const OUTPUT_LIMIT = 1500
const MAX_WAIT_MS = 15_000
const calls = trace(Number(values.seed), Number(values.seconds), Number(values.uncapped), Number(values['v2-rate']))

const arrivals: Arrivals = new Map()
const upstream = await startUpstream(arrivals)

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
}

const schemes: readonly Scheme[] = ['today', 'fair', 'new']
const gateways = new Map<Scheme, RunningTollgate>()
const keys = new Map<string, string>()
await Promise.all(
  schemes.map(async (s) => {
    const gw = await startTollgate({ config: (doc) => configure(doc, s) })
    gateways.set(s, gw)
    for (const t of TENANTS) {
      const { key } = await gw.createKey({
        name: t.name,
        tier: t.name,
        limits: { [SOLO_MODEL]: { output_tpm: OUTPUT_LIMIT } },
      })
      keys.set(`${s}:${t.name}`, key)
    }
  }),
)

const msOf = (header: string | null): number => (header === null ? NaN : (parseDuration(header) ?? NaN))

async function send(scheme: Scheme, c: Call): Promise<Outcome> {
  const gw = gateways.get(scheme)!
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

try {
  const start = Date.now()
  const running: Promise<Outcome>[] = []
  const outcomes = new Map<Scheme, Promise<Outcome>[]>(schemes.map((s) => [s, []]))
  for (const c of calls) {
    const wait = start + c.at - Date.now()
    if (wait > 0) await new Promise((done) => setTimeout(done, wait))
    for (const s of schemes) {
      const p = send(s, c)
      running.push(p)
      outcomes.get(s)!.push(p)
    }
  }
  await Promise.all(running)
  const results = new Map<Scheme, Outcome[]>()
  for (const s of schemes) results.set(s, await Promise.all(outcomes.get(s)!))
  console.log(
    report({
      calls,
      results,
      predicted: await predictions(gateways.get('new')!),
      windowMs: WINDOW_MS,
      outputLimit: OUTPUT_LIMIT,
      seconds: Number(values.seconds),
      seed: Number(values.seed),
      uncapped: Number(values.uncapped),
      v2Rate: Number(values['v2-rate']),
      maxWaitMs: MAX_WAIT_MS,
    }),
  )
} finally {
  await Promise.all([...gateways.values()].map((gw) => gw.stop()))
  upstream.server.close()
}

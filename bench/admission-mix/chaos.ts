// The Redis mode of bench/admission-mix.ts (issue 39, "the limits hold while an instance is
// killed and while a Redis master fails over in the middle of that bench"): each scheme on two
// gateways over the Sentinel topology (test/helpers/redis-topologies.sh), and in the middle of
// the run, as test/scale-out/admission-failover.test.ts does it: stored /queue requests
// (Prefer: respond-async, streamed) running on both instances of each scheme, then the master
// SIGKILLed, then, once an instance is off Redis, every scheme's second gateway SIGKILLed (not
// restarted: the first takes its calls, as a balancer would send them). Recorded: when each
// gateway left Redis (insurance) and came back, every /v2 key window's output tokens against
// the bound docs/limits.md documents for an outage ("The bound through an outage"), and how
// each stored request ended (completed with its whole stream, or not).
import type { RunningTollgate } from '../../test/helpers/gateway.ts'
import { killNode, masterPort } from '../../test/helpers/topologies.ts'
import { CHUNK_TOKENS, type Call } from './trace.ts'
import { windowOf, type Outcome, type Scheme } from './report.ts'

/** Instances per scheme, and so `limits.insuranceInstances`. */
export const INSTANCES = 2
/** Stored requests per scheme, and each one's output (MS_PER_TOKEN each: about 3 s upstream). */
const STORED = 6
export const STORED_OUTPUT = 300

export interface StoredRequest {
  readonly scheme: Scheme
  readonly id: string
  status: string
  whole: boolean
  /** For one that did not complete: its reply's status and error, as the request's record keeps them. */
  detail?: string
}

export interface ChaosLog {
  master?: number
  newMaster?: number
  masterKilledAt?: number
  gatewaysKilledAt?: number
  /** Every surviving gateway back on Redis. */
  recoveredAt?: number
  /** Per gateway (scheme/instance): the spans it answered readyz with a limiter other than redis. */
  readonly offRedis: Map<string, Array<[number, number]>>
  readonly stored: StoredRequest[]
}

async function readiness(gw: RunningTollgate): Promise<{ store?: string; limiter?: string }> {
  try {
    return (await (await fetch(`${gw.url}/readyz`, { signal: AbortSignal.timeout(1000) })).json()) as {
      store?: string
      limiter?: string
    }
  } catch {
    return {}
  }
}

const onRedis = (s: { store?: string; limiter?: string }): boolean => s.store === 'up' && s.limiter === 'redis'

/** Polls every live gateway's readiness (100 ms) into `log.offRedis` until stopped. */
export function watchReadiness(live: () => ReadonlyMap<string, RunningTollgate>, log: ChaosLog): () => void {
  let stopped = false
  void (async () => {
    while (!stopped) {
      const now = Date.now()
      await Promise.all(
        [...live()].map(async ([name, gw]) => {
          const spans = log.offRedis.get(name) ?? log.offRedis.set(name, []).get(name)!
          const last = spans[spans.length - 1]
          const off = !onRedis(await readiness(gw))
          if (off && last !== undefined && last[1] >= now - 300) last[1] = Date.now()
          else if (off) spans.push([now, Date.now()])
        }),
      )
      await new Promise((done) => setTimeout(done, 100))
    }
  })()
  return () => {
    stopped = true
  }
}

/** Stored streamed requests on `model`, alternately on each instance of the scheme: their ids. */
export async function storeRequests(
  scheme: Scheme,
  instances: readonly RunningTollgate[],
  key: string,
  model: string,
): Promise<StoredRequest[]> {
  return await Promise.all(
    Array.from({ length: STORED }, async (_, i) => {
      const gw = instances[i % instances.length]!
      // A 503 (the gateway off its store for a moment, on a loaded machine) accepted nothing: sent again, as a client would.
      for (let tries = 1; ; tries++) {
        const res = await fetch(`${gw.url}/queue/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'respond-async' },
          body: JSON.stringify({
            model,
            stream: true,
            messages: [{ role: 'user', content: `s=${scheme}Stored i=${i} n=${STORED_OUTPUT}` }],
          }),
        })
        const body = (await res.json()) as { id?: string }
        if (res.status === 202 && body.id !== undefined) return { scheme, id: body.id, status: 'queued', whole: false }
        if (res.status !== 503 || tries === 20) throw new Error(`stored request: ${res.status}`)
        await new Promise((done) => setTimeout(done, 250))
      }
    }),
  )
}

/** Until `check` holds or `ms` passed (polled every 50 ms): whether it held. */
export async function reached(check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (await check()) return true
    await new Promise((done) => setTimeout(done, 50))
  }
  return false
}

/**
 * The master SIGKILLed; once a gateway is off Redis (or 10 s later), `killSeconds()` (every
 * scheme's second instance); then until every survivor is back on Redis (60 s at most).
 */
export async function failOver(
  survivors: readonly RunningTollgate[],
  everyone: readonly RunningTollgate[],
  killSeconds: () => Promise<void>,
  log: ChaosLog,
): Promise<void> {
  const master = await masterPort('sentinel')
  if (master === undefined) throw new Error('Sentinel names no master')
  log.master = master
  log.masterKilledAt = Date.now()
  // On a loaded machine the node may not answer INFO (its pid) within killNode's timeout at once.
  for (let tries = 1; ; tries++) {
    try {
      await killNode(master)
      break
    } catch (error) {
      if (tries === 5) throw error
    }
  }
  await reached(async () => (await Promise.all(everyone.map(readiness))).some((s) => !onRedis(s)), 10_000)
  log.gatewaysKilledAt = Date.now()
  await killSeconds()
  await reached(async () => (await Promise.all(survivors.map(readiness))).every(onRedis), 60_000)
  log.recoveredAt = Date.now()
  log.newMaster = await masterPort('sentinel')
}

/** Polls each stored request (on a surviving instance) until it ends, 90 s at most; records how. */
export async function storedEnded(
  stored: StoredRequest[],
  gatewayOf: (scheme: Scheme) => RunningTollgate,
  keyOf: (scheme: Scheme) => string,
): Promise<void> {
  const ends = ['completed', 'failed', 'cancelled', 'expired']
  await Promise.all(
    stored.map(async (s) => {
      await reached(async () => {
        try {
          const res = await fetch(`${gatewayOf(s.scheme).url}/queue/requests/${s.id}`, {
            headers: { authorization: `Bearer ${keyOf(s.scheme)}` },
          })
          const view = (await res.json()) as { status?: string; response?: { status_code?: number; body?: unknown } }
          s.status = view.status ?? `http ${res.status}`
          if (s.status !== 'completed')
            s.detail = `${view.response?.status_code ?? '?'} ${JSON.stringify(view.response?.body ?? null).slice(0, 160)}`
          const body = String(view.response?.body ?? '')
          const chunks = body.split(`"content":"${'t'.repeat(CHUNK_TOKENS)}"`).length - 1
          s.whole = body.includes('data: [DONE]') && chunks === STORED_OUTPUT / CHUNK_TOKENS
        } catch (error) {
          s.status = `fetch: ${(error as Error).message}`
        }
        return ends.includes(s.status)
      }, 90_000)
    }),
  )
}

const overlaps = (from: number, to: number, spans: ReadonlyArray<readonly [number, number]>): boolean =>
  spans.some(([a, b]) => a < to && from < b)

/** The Markdown lines of the Redis mode: the outage, /v2 windows against the documented bound, stored requests. */
export function chaosLines(
  log: ChaosLog,
  results: ReadonlyMap<Scheme, readonly Outcome[]>,
  calls: readonly Call[],
  windowMs: number,
  outputLimit: number,
  start: number,
): string[] {
  const at = (t: number | undefined): string => (t === undefined ? '–' : `${((t - start) / 1000).toFixed(1)} s`)
  const allOff = [...log.offRedis.values()].flat()
  const killed: Array<[number, number]> = [
    [log.masterKilledAt ?? Infinity, Math.max(log.recoveredAt ?? 0, ...allOff.map(([, b]) => b))],
  ]
  // In insurance: from the kill until every survivor is back, and whenever one of the scheme's
  // gateways answered readyz off Redis (a loaded machine's Redis replies past redisTimeoutMs).
  const outageOf = (scheme: Scheme): Array<readonly [number, number]> => [
    ...killed,
    ...[...log.offRedis].filter(([name]) => name.startsWith(`${scheme}/`)).flatMap(([, spans]) => spans),
  ]
  // docs/limits.md: the limit, each instance's share in insurance, and the calls whose counts
  // the dead master had not replicated (two, each at most the longest reply of the trace).
  const longest = Math.max(...calls.filter((c) => c.route === 'v2').map((c) => c.maxTokens ?? c.output))
  const share = Math.floor(outputLimit / INSTANCES)
  const bound = outputLimit + INSTANCES * share + 2 * longest
  const lines = [
    `Master ${log.master ?? '?'} SIGKILLed at ${at(log.masterKilledAt)}; every scheme's second gateway SIGKILLed at ` +
      `${at(log.gatewaysKilledAt)} (not restarted); every survivor back on Redis at ${at(log.recoveredAt)} ` +
      `(new master ${log.newMaster ?? '?'}). Off Redis (readyz, insurance): ` +
      [...log.offRedis]
        .filter(([, spans]) => spans.length > 0)
        .map(([name, spans]) => `${name} ${spans.map(([a, b]) => `${at(a)}–${at(b)}`).join(', ')}`)
        .join('; ') +
      '.',
    '',
    `/v2 key windows that overlap the outage or a span its gateway was off Redis, against docs/limits.md's bound: the limit ${outputLimit} + ` +
      `${INSTANCES} instances × ${share} in insurance + 2 unreplicated calls × ${longest} = ${bound} output tokens ` +
      `(${(bound / outputLimit).toFixed(2)}× the limit); the other windows against the limit + 10 %.`,
    '',
    "| Scheme | Windows off Redis | Worst ÷ limit | Worst ÷ bound | Over the bound | Windows on Redis | Over limit + 10 % | Worst ÷ limit | No answer (the killed gateway's calls) | 503 store_unavailable |",
    '|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const [scheme, outcomes] of results) {
    const windows = new Map<string, { end: number; load: number }>()
    for (const o of outcomes)
      if (o.call.route === 'v2' && o.status === 200) {
        const end = windowOf(o, windowMs)
        const w = windows.get(`${o.call.tenant}:${end}`) ?? { end, load: 0 }
        w.load += o.call.output
        windows.set(`${o.call.tenant}:${end}`, w)
      }
    const outage = outageOf(scheme)
    const inOutage = [...windows.values()].filter((w) => overlaps(w.end - windowMs, w.end, outage))
    const outside = [...windows.values()].filter((w) => !inOutage.includes(w))
    const worst = Math.max(0, ...inOutage.map((w) => w.load))
    const worstOutside = Math.max(0, ...outside.map((w) => w.load))
    const count = (status: number): number => outcomes.filter((o) => o.status === status).length
    lines.push(
      `| ${scheme} | ${inOutage.length} | ${(worst / outputLimit).toFixed(2)} | ${(worst / bound).toFixed(2)} | ` +
        `${inOutage.filter((w) => w.load > bound).length} | ${outside.length} | ` +
        `${outside.filter((w) => w.load > outputLimit * 1.1).length} | ${(worstOutside / outputLimit).toFixed(2)} | ` +
        `${count(0)} | ${count(503)} |`,
    )
  }
  const byScheme = new Map<Scheme, StoredRequest[]>()
  for (const s of log.stored) byScheme.set(s.scheme, [...(byScheme.get(s.scheme) ?? []), s])
  lines.push(
    '',
    `Stored /queue requests (Prefer: respond-async, streamed, ${STORED_OUTPUT} tokens each, sent to both instances just before the kills): ` +
      [...byScheme]
        .map(([scheme, list]) => {
          const whole = list.filter((s) => s.status === 'completed' && s.whole).length
          const other = list
            .filter((s) => !(s.status === 'completed' && s.whole))
            .map((s) => `${s.status}${s.detail === undefined ? '' : `: ${s.detail}`}`)
          return `${scheme} ${whole} of ${list.length} completed whole${other.length > 0 ? ` (others: ${other.join(', ')})` : ''}`
        })
        .join('; ') +
      '.',
  )
  return lines
}

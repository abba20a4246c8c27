// The Markdown section bench/admission-mix.ts prints: one table per measure, a row per scheme.
import { CAPACITY, MAX_CONCURRENT, MS_PER_TOKEN, TENANTS, type Call, type Cls } from './trace.ts'

export type Scheme = 'today' | 'fair' | 'new'

export interface Outcome {
  readonly call: Call
  readonly status: number
  readonly code?: string
  /** Prompt + completion tokens of a served call (its reply's usage). */
  readonly tokens: number
  readonly waitMs: number
  readonly tookMs: number
  /** x-ratelimit-reset-output-tokens: when the key's output window ends, from admission (or refusal). */
  readonly resetMs: number
  readonly hintMs: number
  readonly answeredAt: number
  /** When the upstream received it: its admission, give or take a hop. */
  readonly admittedAt: number
}

export interface Run {
  readonly calls: readonly Call[]
  readonly results: ReadonlyMap<Scheme, readonly Outcome[]>
  readonly predicted: ReadonlyMap<string, { sum: number; count: number; within2: number; p90: number }>
  readonly windowMs: number
  readonly outputLimit: number
  readonly seconds: number
  readonly seed: number
  readonly uncapped: number
  readonly v2Rate: number
  readonly maxWaitMs: number
  /** Where the counters are, and how many gateways per scheme. */
  readonly store: string
}

const CLASSES: readonly Cls[] = ['priority', 'default', 'flex']
const pct = (x: number): string => `${(x * 100).toFixed(1)} %`
const quantile = (values: readonly number[], q: number): number => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/** The key's output window a /v2 outcome fell in (its end, to 100 ms), per tenant. */
export function windowOf(o: Outcome, windowMs: number): number {
  const at = o.status === 200 ? o.admittedAt : o.answeredAt - o.tookMs
  const end = Number.isFinite(o.resetMs) ? at + o.resetMs : (Math.floor(at / windowMs) + 1) * windowMs
  return Math.round(end / 100) * 100
}

function v2Rows(run: Run): string[] {
  const rows = [
    `| Scheme | /v2 calls | Admitted | 429s | False 429s | Windows | Over the limit | Over +10 % | Worst window |`,
    '|---|---|---|---|---|---|---|---|---|',
  ]
  for (const [scheme, outcomes] of run.results) {
    const v2 = outcomes.filter((o) => o.call.route === 'v2')
    const windows = new Map<string, number>()
    for (const o of v2)
      if (o.status === 200) {
        const w = `${o.call.tenant}:${windowOf(o, run.windowMs)}`
        windows.set(w, (windows.get(w) ?? 0) + o.call.output)
      }
    const refused = v2.filter((o) => o.status === 429)
    const falses = refused.filter(
      (o) => (windows.get(`${o.call.tenant}:${windowOf(o, run.windowMs)}`) ?? 0) + o.call.output <= run.outputLimit,
    )
    const loads = [...windows.values()].map((l) => l / run.outputLimit)
    rows.push(
      `| ${scheme} | ${v2.length} | ${v2.filter((o) => o.status === 200).length} | ${refused.length} | ` +
        `${falses.length} (${pct(falses.length / Math.max(1, refused.length))} of 429s) | ${loads.length} | ` +
        `${loads.filter((l) => l > 1).length} | ${loads.filter((l) => l > 1.1).length} | ${pct(Math.max(0, ...loads))} |`,
    )
  }
  return rows
}

/**
 * Whether every tenant had a /queue call waiting (sent, neither admitted nor answered) at
 * `at`: the stretch where fair shares promise each its weight. Before it (the flood's first
 * calls run while the others' lines are still empty) and after the arrivals stop (the flood's
 * backlog outlives the others'), whoever waits takes the room, as it should.
 */
function contendedAt(queue: readonly Outcome[]): (at: number) => boolean {
  const spans = new Map<string, Array<readonly [number, number]>>()
  for (const o of queue) {
    const sent = o.answeredAt - o.tookMs
    const left = o.status === 200 && Number.isFinite(o.admittedAt) ? o.admittedAt : o.answeredAt
    const list = spans.get(o.call.tenant) ?? spans.set(o.call.tenant, []).get(o.call.tenant)!
    list.push([sent, left])
  }
  return (at) => TENANTS.every((t) => (spans.get(t.name) ?? []).some(([from, to]) => from < at && at < to))
}

/**
 * Calls running on the deployment on average, from the first admission to the last reply: below
 * MAX_CONCURRENT, the gateways did not keep it full (a machine too loaded for the run).
 */
function busy(queue: readonly Outcome[]): number {
  const served = queue.filter((o) => o.status === 200 && Number.isFinite(o.admittedAt))
  if (served.length === 0) return 0
  const ms = (o: Outcome): number => (o.tokens - 20) * MS_PER_TOKEN
  const from = Math.min(...served.map((o) => o.admittedAt))
  const to = Math.max(...served.map((o) => o.admittedAt + ms(o)))
  return served.reduce((sum, o) => sum + ms(o), 0) / Math.max(1, to - from)
}

function shareRows(run: Run): string[] {
  const total = TENANTS.reduce((s, t) => s + t.weight, 0)
  const head = TENANTS.map((t) => `${t.name} (w ${t.weight}, due ${pct(t.weight / total)}, offers ${t.load}×)`)
  const rows = [
    `| Scheme | Served | ${head.join(' | ')} | Calls served / 504 / 429; deployment use |`,
    `|---|---|${TENANTS.map(() => '---|').join('')}---|`,
  ]
  for (const [scheme, outcomes] of run.results) {
    const q = outcomes.filter((o) => o.call.route === 'queue')
    const contended = contendedAt(q)
    const count = (f: (o: Outcome) => boolean): number => q.filter(f).length
    for (const [label, within] of [
      ['whole run', () => true],
      ['every tenant waiting', (o: Outcome) => contended(o.admittedAt - 1)],
    ] as const) {
      const served = new Map<string, number>()
      for (const o of q)
        if (o.status === 200 && within(o)) served.set(o.call.tenant, (served.get(o.call.tenant) ?? 0) + o.tokens)
      const sum = [...served.values()].reduce((a, b) => a + b, 0)
      const cells = TENANTS.map((t) => {
        const got = (served.get(t.name) ?? 0) / Math.max(1, sum)
        return `${pct(got)} (×${(got / (t.weight / total)).toFixed(2)} of due)`
      })
      rows.push(
        `| ${scheme} | ${label}: ${sum} tokens | ${cells.join(' | ')} | ` +
          (label === 'whole run'
            ? `${count((o) => o.status === 200)} / ${count((o) => o.status === 504)} / ${count((o) => o.status === 429)}; ` +
              `${busy(q).toFixed(1)} of ${MAX_CONCURRENT} busy on average |`
            : `${count((o) => o.status === 200 && within(o))} / – / – |`),
      )
    }
  }
  return rows
}

function waitRows(run: Run): string[] {
  const rows = ['| Scheme | Class | Served | p50 wait | p99 wait |', '|---|---|---|---|---|']
  for (const [scheme, outcomes] of run.results)
    for (const cls of CLASSES) {
      const waits = outcomes
        .filter((o) => o.call.route === 'queue' && o.call.cls === cls && o.status === 200)
        .map((o) => o.waitMs)
      rows.push(`| ${scheme} | ${cls} | ${waits.length} | ${quantile(waits, 0.5)} ms | ${quantile(waits, 0.99)} ms |`)
    }
  return rows
}

function deadlineLines(run: Run): string[] {
  const today = new Map((run.results.get('today') ?? []).map((o) => [o.call.id, o]))
  const mine = (run.results.get('new') ?? []).filter((o) => o.call.route === 'queue' && o.call.deadlineMs !== undefined)
  const refused = mine.filter((o) => o.code === 'queue_deadline')
  const fitted = refused.filter((o) => {
    const t = today.get(o.call.id)
    return t !== undefined && t.status === 200 && t.waitMs <= o.call.deadlineMs!
  })
  const served = mine.filter((o) => o.status === 200)
  const late = served.filter((o) => o.waitMs > o.call.deadlineMs!)
  // Let wait: every call with a deadline not refused at once; made it: served within its deadline.
  const letWait = mine.filter((o) => o.code !== 'queue_deadline')
  const madeIt = letWait.filter((o) => o.status === 200 && o.waitMs <= o.call.deadlineMs!)
  // A refused call would likely have made it when most /queue calls of its tenant and class let
  // wait in "new" and joining within 2 s of it were served within its deadline (a proxy: the
  // call itself was never let wait).
  const queued = (run.results.get('new') ?? []).filter((o) => o.call.route === 'queue' && o.code !== 'queue_deadline')
  const likelyFitted = refused.filter((o) => {
    const near = queued.filter(
      (n) => n.call.tenant === o.call.tenant && n.call.cls === o.call.cls && Math.abs(n.call.at - o.call.at) <= 2000,
    )
    const made = near.filter((n) => n.status === 200 && n.waitMs <= o.call.deadlineMs!)
    return near.length > 0 && made.length * 2 > near.length
  })
  const lines = [
    `Calls with a deadline (new): ${mine.length}; served ${served.length} (${late.length} of them waited past it); ` +
      `refused 429 queue_deadline ${refused.length} (median ${quantile(
        refused.map((o) => o.tookMs),
        0.5,
      )} ms to the answer, retry-after-ms median ${quantile(
        refused.map((o) => o.hintMs),
        0.5,
      )}); of those, ${fitted.length} were served within the deadline by "today" (would have fitted there); ` +
      `504 ${mine.filter((o) => o.status === 504).length} (median ${quantile(
        mine.filter((o) => o.status === 504).map((o) => o.tookMs),
        0.5,
      )} ms to the answer).`,
    '',
    `Let wait: ${letWait.length}, of which ${madeIt.length} (${pct(madeIt.length / Math.max(1, letWait.length))}) ` +
      `were served within their deadline; refused: ${refused.length}, of which ${likelyFitted.length} would likely have ` +
      'made it (most calls of the same tenant and class let wait within 2 s of it were served within its deadline).',
    '',
    '| Class | Predictions | Mean actual ÷ predicted | p90 (bucket bound) | Within 0.5–2× |',
    '|---|---|---|---|---|',
  ]
  for (const cls of CLASSES) {
    const p = run.predicted.get(cls)
    if (p === undefined || p.count === 0) lines.push(`| ${cls} | 0 | – | – | – |`)
    else
      lines.push(`| ${cls} | ${p.count} | ${(p.sum / p.count).toFixed(2)} | ≤ ${p.p90} | ${pct(p.within2 / p.count)} |`)
  }
  return lines
}

export function report(run: Run): string {
  return [
    `## Admission mix (issue 39): today's admission against the new one, same run`,
    '',
    `Seed ${run.seed}, ${run.seconds} s of arrivals, ${run.calls.length} calls replayed to every scheme at once (${run.store}). ` +
      `/queue: one deployment of ${MAX_CONCURRENT} calls at a time (≈ ${CAPACITY.toFixed(2)} calls/s at the mean length), ` +
      `maxWaitMs ${run.maxWaitMs}. /v2: each key's output_tpm ${run.outputLimit} per ${run.windowMs} ms window, ` +
      `${run.v2Rate} calls/s per tenant. ${pct(run.uncapped)} of calls name no max_tokens.`,
    '',
    '**Output reservations on /v2 (false 429s, over-admission per key window):**',
    '',
    ...v2Rows(run),
    '',
    '**Shares of the tokens served on the contended deployment (/queue), over the whole run and over the calls admitted while every tenant had a call waiting:**',
    '',
    ...shareRows(run),
    '',
    '**Queue wait per class (x-queue-wait-ms, served calls):**',
    '',
    ...waitRows(run),
    '',
    '**Deadlines and the predictor (new):**',
    '',
    ...deadlineLines(run),
  ].join('\n')
}

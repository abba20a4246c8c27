// Priority classes and deadlines on /queue (issue 39, items 3 and 4), on one embedded gateway:
// a key held at `rpm` calls per `window`, and `calls` sent at once through /queue, a third in
// each class, in a random order of arrival. Run twice in the same process: every call in the
// default class (today: first come first served), then with their classes. Reported: each
// class's median and p99 wait in line (x-queue-wait-ms), and the deadline predictor's
// actual ÷ predicted wait over the calls it predicted a wait for (the gateway's own histogram,
// tollgate_queue_wait_prediction_ratio). Then a deadline run: every call says it can wait
// `deadline` ms; the calls refused at once (429 queue_deadline) against the calls that would
// have fitted (refused although their hinted wait was within the deadline: false refusals)
// and the admitted calls that then waited past it (504: missed refusals).
//
//   node bench/classes.ts [calls=60] [rpm=10] [windowMs=2000] [deadlineMs=4000]
import { startTollgate } from '../test/helpers/gateway.ts'

const [calls = 60, rpm = 10, windowMs = 2000, deadlineMs = 4000] = process.argv.slice(2).map(Number)
const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CLASSES = ['priority', 'default', 'flex'] as const

const gw = await startTollgate({
  config: (doc) => {
    doc.limits = { windowMs }
    doc.queue = { retryBackoffMs: 50 }
  },
})

interface Result {
  readonly cls: string
  readonly status: number
  readonly waitedMs: number
  readonly tookMs: number
  readonly hintMs: number
  readonly code?: string
}

async function round(classed: boolean, deadline?: number): Promise<Result[]> {
  const { key } = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm } } })
  const order = Array.from({ length: calls }, (_, i) => CLASSES[i % 3]!).sort(() => Math.random() - 0.5)
  return Promise.all(
    order.map(async (cls, i) => {
      const started = Date.now()
      const res = await fetch(`${gw.url}/queue/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          ...(deadline === undefined ? {} : { 'x-tollgate-max-wait-ms': String(deadline) }),
        },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: `call ${i}` }],
          max_tokens: 5,
          // flexShare would hold flex to 80 % of rpm: the classes differ only in their order here.
          ...(classed ? { service_tier: cls === 'flex' ? 'flex' : cls } : {}),
        }),
      })
      const body = (await res.json()) as { error?: { code?: string } }
      return {
        cls,
        status: res.status,
        waitedMs: Number(res.headers.get('x-queue-wait-ms') ?? NaN),
        tookMs: Date.now() - started,
        hintMs: Number(res.headers.get('retry-after-ms') ?? NaN),
        ...(body.error?.code === undefined ? {} : { code: body.error.code }),
      }
    }),
  )
}

const quantile = (values: number[], q: number): number => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

function perClass(label: string, results: Result[]): void {
  for (const cls of CLASSES) {
    const waits = results.filter((r) => r.cls === cls && r.status === 200).map((r) => r.waitedMs)
    console.log(
      `${label.padEnd(22)} ${cls.padEnd(9)} served ${String(waits.length).padStart(3)}  p50 ${String(quantile(waits, 0.5)).padStart(6)} ms  p99 ${String(quantile(waits, 0.99)).padStart(6)} ms`,
    )
  }
}

/** The gateway's prediction histogram, summed per class: [sum, count]. */
async function readRatios(): Promise<Map<string, [number, number]>> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  const out = new Map<string, [number, number]>()
  for (const m of text.matchAll(/tollgate_queue_wait_prediction_ratio_(sum|count)\{class="(\w+)"\} ([\d.e+-]+)/g)) {
    const entry = out.get(m[2]!) ?? [0, 0]
    entry[m[1] === 'sum' ? 0 : 1] = Number(m[3])
    out.set(m[2]!, entry)
  }
  return out
}

/** Actual ÷ predicted wait per class over what happened since `before`. */
async function ratioSince(before: Map<string, [number, number]>): Promise<string> {
  const now = await readRatios()
  const parts: string[] = []
  for (const cls of CLASSES) {
    const [sum, count] = now.get(cls) ?? [0, 0]
    const [sum0, count0] = before.get(cls) ?? [0, 0]
    if (count > count0) parts.push(`${cls} ${((sum - sum0) / (count - count0)).toFixed(2)} (${count - count0})`)
  }
  return parts.length === 0 ? 'none predicted' : parts.join(', ')
}

try {
  console.log(`${calls} calls at once, rpm ${rpm} per ${windowMs} ms window, deadline ${deadlineMs} ms`)
  let before = await readRatios()
  const fifo = await round(false)
  perClass('fifo (all default)', fifo)
  console.log(`  actual/predicted wait (mean, by class): ${await ratioSince(before)}`)
  before = await readRatios()
  const classed = await round(true)
  perClass('classes', classed)
  console.log(`  actual/predicted wait (mean, by class): ${await ratioSince(before)}`)
  const d = await round(true, deadlineMs)
  const atOnce = d.filter((r) => r.code === 'queue_deadline' && r.tookMs < 250)
  const late = d.filter((r) => r.code === 'queue_deadline' && r.tookMs >= 250)
  const served = d.filter((r) => r.status === 200).length
  // Would have fitted: calls of the classed run (same mix, no deadline) that waited within it.
  const fitted = classed.filter((r) => r.status === 200 && r.waitedMs <= deadlineMs).length
  console.log(
    `deadline ${deadlineMs} ms: served ${served}; refused at once ${atOnce.length} (slowest ${Math.max(0, ...atOnce.map((r) => r.tookMs))} ms, ` +
      `hints ${quantile(
        atOnce.map((r) => r.hintMs),
        0.5,
      )}–${Math.max(0, ...atOnce.map((r) => r.hintMs))} ms); refused at the head after waiting ${late.length}; ` +
      `504 ${d.filter((r) => r.code === 'queue_timeout').length}; without deadlines ${fitted} of ${calls} waited within ${deadlineMs} ms`,
  )
  perClass(`deadline ${deadlineMs} ms`, d)
} finally {
  await gw.stop()
}

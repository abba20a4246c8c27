// Learned output reservations against today's fixed one, in the same run (issue 39 item 1).
//
// One seeded sequence of calls, none naming max_tokens, replayed through three limiters side by
// side (the gateway's own createLimiter on the embedded store, the second wrapped by
// withLearnedReservations as main.ts does; once with the bare quantile, once with the tail
// held, learned.ts's default): output lengths bimodal (1 − long of 20–80 tokens,
// `long` of 400–1,200, capped at the 1,024 the gateway sends upstream), each call running for a
// time proportional to its length and settling with what it produced. Windows are short
// (WINDOW_MS) so that the run covers many of them.
//
// Recorded per scheme: calls admitted and refused; false 429s (refused, though what the calls
// admitted in the window really produced plus what this one would have produced fits the
// limit: an oracle that knows every length); output-token over-admission per window (what the
// calls admitted in a window really produced, over output_tpm).
//
//   node bench/learned-reservations.ts [--long 0.3] [--windows 20] [--rate <calls/s>] [--seed 1] [--min-samples 20]
import { parseArgs } from 'node:util'
import { randomFrom } from '../src/backends/mock/hash.ts'
import type { PlansConfig } from '../src/config/schema.ts'
import { createLimiter } from '../src/limits/limiter.ts'
import type { AdmissionRequest, Limiter } from '../src/limits/port.ts'
import { parseDuration } from '../src/limits/duration.ts'
import { createLogger } from '../src/observability/logger.ts'
import { createLearnedReservations, withLearnedReservations } from '../src/reservations/index.ts'
import { memorySketchStore } from '../src/reservations/store.ts'

const { values } = parseArgs({
  options: {
    windows: { type: 'string', default: '20' },
    rate: { type: 'string' },
    long: { type: 'string', default: '0.3' },
    seed: { type: 'string', default: '1' },
    'min-samples': { type: 'string' },
  },
})
const WINDOW_MS = 1000
const WINDOWS = Number(values.windows)
const OUTPUT_TPM = 10_000
/** Share of long replies (400–1,200 tokens); the rest are 20–80. */
const LONG = Number(values.long)
/** Calls per second offered; default: what offers 80 % of output_tpm in output. */
const RATE =
  values.rate === undefined ? Math.round((0.8 * OUTPUT_TPM) / ((1 - LONG) * 50 + LONG * 776)) : Number(values.rate)
const SENT_CAP = 1024
/** A call runs this long per output token (a 1,024-token reply: about 0.5 s). */
const MS_PER_TOKEN = 0.5

const next = randomFrom(Number(values.seed))
const calls = Array.from({ length: Math.round((WINDOWS * WINDOW_MS * RATE) / 1000) }, (_, i) => ({
  // Poisson arrivals.
  at: 0,
  gap: -Math.log(1 - next()) * (1000 / RATE),
  output: Math.min(SENT_CAP, Math.round(next() >= LONG ? 20 + next() * 60 : 400 + next() * 800)),
  i,
}))
let clock = 0
for (const c of calls) c.at = clock += c.gap

const plans = {
  defaultTier: 'T',
  tiers: {
    T: {
      default: {},
      models: {},
      outputReservation: {
        mode: 'learned' as const,
        ...(values['min-samples'] === undefined ? {} : { minSamples: Number(values['min-samples']) }),
      },
    },
  },
} as unknown as PlansConfig
const log = createLogger('silent')

interface Scheme {
  readonly name: string
  readonly limiter: Limiter
  admitted: number
  refused: number
  falseRefusals: number
  /** Real output of the calls admitted, per window start (the limiter's own windows). */
  readonly windows: Map<number, number>
}

function scheme(name: string, learned: 'no' | 'bare' | 'held'): Scheme {
  const base = createLimiter({ log, windowMs: WINDOW_MS })
  const reservations = createLearnedReservations({ store: memorySketchStore(), log, holdTail: learned === 'held' })
  const limiter = learned === 'no' ? base : withLearnedReservations(base, reservations, () => plans)
  return { name, limiter, admitted: 0, refused: 0, falseRefusals: 0, windows: new Map() }
}

const schemes = [scheme('fixed', 'no'), scheme('learned p95 (bare)', 'bare'), scheme('learned, tail held', 'held')]
const request = (keyId: string): AdmissionRequest => ({
  keyId,
  tier: 'T',
  model: 'm',
  limits: { output_tpm: OUTPUT_TPM },
  estimate: { inputTokens: 0, outputTokens: SENT_CAP },
  uncapped: { replies: 1 },
})

async function run(s: Scheme, c: (typeof calls)[number], start: number): Promise<void> {
  const now = Date.now()
  // The window this call falls in, as the limiter counts it: it ends at now + reset.
  const windowOf = (reset: string | undefined): number =>
    Math.round((now + (parseDuration(reset ?? '') ?? 0) - start) / 100) * 100
  try {
    const admission = await s.limiter.admit(request(s.name))
    const w = windowOf(admission.headers['x-ratelimit-reset-output-tokens'])
    s.windows.set(w, (s.windows.get(w) ?? 0) + c.output)
    s.admitted++
    await new Promise((done) => setTimeout(done, c.output * MS_PER_TOKEN))
    await admission.settle({ inputTokens: 0, outputTokens: c.output })
  } catch (error) {
    s.refused++
    const headers = (error as { headers?: Record<string, string> }).headers ?? {}
    const w = windowOf(headers['x-ratelimit-reset-output-tokens'])
    if ((s.windows.get(w) ?? 0) + c.output <= OUTPUT_TPM) s.falseRefusals++
  }
}

const start = Date.now()
const running: Promise<void>[] = []
for (const c of calls) {
  const wait = start + c.at - Date.now()
  if (wait > 0) await new Promise((done) => setTimeout(done, wait))
  for (const s of schemes) running.push(run(s, c, start))
}
await Promise.all(running)

const offered = calls.reduce((sum, c) => sum + c.output, 0)
console.log(
  `long share ${LONG}: ${calls.length} calls in ${WINDOWS} windows of ${WINDOW_MS} ms, ${RATE}/s, output_tpm ${OUTPUT_TPM}; ` +
    `output offered ${Math.round((offered / WINDOWS / OUTPUT_TPM) * 100)} % of the limit per window`,
)
console.log(
  '| Scheme | Admitted | Refused | False 429s | Output served | Windows over | Worst window | Mean over, windows over |',
)
console.log('|---|---|---|---|---|---|---|---|')
for (const s of schemes) {
  const loads = [...s.windows.values()]
  const over = loads.filter((l) => l > OUTPUT_TPM)
  const served = loads.reduce((a, b) => a + b, 0)
  const worst = Math.max(...loads)
  const meanOver = over.length === 0 ? 0 : over.reduce((a, b) => a + b - OUTPUT_TPM, 0) / over.length / OUTPUT_TPM
  console.log(
    `| ${s.name} | ${s.admitted} | ${s.refused} | ${s.falseRefusals} | ${served} | ${over.length} of ${loads.length} | ` +
      `${Math.round((worst / OUTPUT_TPM) * 1000) / 10} % | +${Math.round(meanOver * 1000) / 10} % |`,
  )
}
for (const s of schemes) await s.limiter.close()

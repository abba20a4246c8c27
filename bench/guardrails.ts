// What guardrails cost (issue #43): the gateway's CPU per chat call with no policy, and with
// a policy that runs every built-in detector (each at `flag`, so every text is scanned by
// all sixteen and the body goes on as it came), for a typical chat body (a system prompt and
// a few turns, ~2 KB, nothing to find) and for a 1 MB body (200 turns of 5 KB of prose with
// digits, dates and versions in it: the near-misses the detectors must check and let pass).
// The two gateways run at once in front of one upstream process and the bursts alternate,
// so the machine's load drifts over both alike. CPU is the gateway process's user + system
// time over its calls (/proc/<pid>/stat); the first round is a warm-up, the median of the
// rest is shown, as a ratio to no policy in the same run.
//
//   node bench/guardrails.ts [rounds] [calls per round] [large calls per round]   e.g. node bench/guardrails.ts 8 300 40
// (the large body's calls default to a twentieth of the typical's: 10 ms CPU ticks over few calls are coarse)
import { startTollgate, startUpstream, type RunningTollgate } from '../test/helpers/gateway.ts'
import { DETECTORS } from '../src/guardrails/detectors.ts'
import { compilePolicies } from '../src/guardrails/policy.ts'
import { scanBody } from '../src/guardrails/scan.ts'
import { machine } from './machine.ts'
import { chatCpuPerCall } from './proxy-rig.ts'

const MODEL = 'gpt-oss-120b'
const CONCURRENCY = 8
const SIDES = ['off', 'on'] as const
type Side = (typeof SIDES)[number]

const TYPICAL = {
  model: MODEL,
  max_tokens: 5,
  messages: [
    {
      role: 'system',
      content:
        'You are the support assistant of an online shop. Answer in the language of the customer, be brief and friendly, and never promise refunds: hand those over to a human colleague. Orders ship within 2 working days; the return window is 30 days (version 4.2 of the terms, 01.03.2026).',
    },
    {
      role: 'user',
      content: 'Hallo, ich habe am 12.11. bestellt (Bestellung 100234) und noch nichts bekommen. Wann kommt das Paket?',
    },
    {
      role: 'assistant',
      content:
        'Hallo! Danke für Ihre Nachricht. Bestellungen werden innerhalb von 2 Werktagen verschickt; die Zustellung dauert meist 1 bis 3 Tage. Ich sehe mir Ihre Bestellung gern an.',
    },
    { role: 'user', content: 'Danke. Kann ich die Lieferadresse noch ändern? Ich bin ab 18:30 zu Hause.' },
  ],
}

const PROSE =
  'The quarterly report covers 14 regions and 2,345 stores; revenue rose 3.5% to 12.4 million, with release 2.13.1 of the app at 99.95% uptime over 90 days. '
function largeBody(bytes: number): Record<string, unknown> {
  const turn = PROSE.repeat(Math.ceil(5000 / PROSE.length))
  const messages = Array.from({ length: Math.ceil(bytes / turn.length) }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: turn,
  }))
  messages.push({ role: 'user', content: 'Summarise.' })
  return { model: MODEL, max_tokens: 5, messages }
}

/** Every built-in detector at `flag`: everything scanned, nothing changed or stopped. */
export const EVERY_DETECTOR_FLAGGED = Object.fromEntries([...DETECTORS.keys()].map((name) => [name, 'flag' as const]))

/** A gateway whose `model` is on the upstream at `baseUrl`, every call under `policy` (none: no guardrails). */
export function startPolicyGateway(
  baseUrl: string,
  model: string,
  policy: Record<string, unknown> | undefined,
  server: Record<string, unknown> = {},
): Promise<RunningTollgate> {
  return startTollgate({
    dropRequestLogs: true,
    config: (doc) => {
      doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {}, ...(policy ? { guardrails: 'p' } : {}) } } }
      doc.guardrails = { policies: policy === undefined ? {} : { p: policy } }
      doc.server = { ...(doc.server as object), ...server }
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl } }
      for (const m of doc.models as Array<{ name: string; deployments: unknown[] }>)
        if (m.name === model) m.deployments = [{ backend: 'up' }]
    },
  })
}

export async function benchGuardrails(
  rounds = 8,
  calls = 300,
  largeCalls = Math.max(8, Math.floor(calls / 20)),
): Promise<string> {
  const upstream = await startUpstream()
  const start = (policy: boolean): Promise<RunningTollgate> =>
    startPolicyGateway(`${upstream.url}/v1`, MODEL, policy ? { detectors: EVERY_DETECTOR_FLAGGED } : undefined, {
      jsonBodyLimitBytes: 4 * 1024 * 1024,
    })
  const gateways: Record<Side, RunningTollgate> = { off: await start(false), on: await start(true) }
  const large = largeBody(1024 * 1024)
  const largeBytes = Buffer.byteLength(JSON.stringify(large))
  try {
    const keys = Object.fromEntries(
      await Promise.all(SIDES.map(async (side) => [side, (await gateways[side].createKey()).key])),
    ) as Record<Side, string>
    const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
    const measure = async (body: Record<string, unknown>, n: number): Promise<Record<Side, number>> => {
      const samples: Record<Side, number[]> = { off: [], on: [] }
      for (let round = 0; round <= rounds; round++)
        for (const side of SIDES) {
          const ms = await chatCpuPerCall(gateways[side], keys[side], body, n, CONCURRENCY)
          if (round > 0) samples[side].push(ms)
        }
      return { off: median(samples.off), on: median(samples.on) }
    }
    const typical = await measure(TYPICAL, calls)
    const big = await measure(large, largeCalls)
    const scanUs = (body: Record<string, unknown>, n: number): number => {
      const policy = compilePolicies({
        policies: {
          all: { detectors: EVERY_DETECTOR_FLAGGED, patterns: [], restore: false, replies: {}, external: [] },
        },
        keys: {},
      }).policyFor('all', '')
      if (policy === undefined) return NaN
      const times: number[] = []
      for (let i = 0; i < n; i++) {
        const started = performance.now()
        scanBody(body, policy)
        times.push((performance.now() - started) * 1000)
      }
      return median(times.slice(Math.floor(n / 5)))
    }
    const scans = { typical: scanUs(TYPICAL, 2000), large: scanUs(large, 30) }
    const row = (name: string, r: Record<Side, number>): string =>
      `| ${name} | ${(r.off * 1000).toFixed(0)} | ${(r.on * 1000).toFixed(0)} | ${(r.on / r.off).toFixed(2)} |`
    return [
      `## Guardrails: CPU per call, no policy vs every detector (bench/guardrails.ts)`,
      '',
      `${rounds} rounds per body, the two gateways alternating; one upstream process behind them;`,
      `${CONCURRENCY} calls at a time. "on" runs all ${DETECTORS.size} built-in detectors over every text of the body`,
      "(each at `flag`; the bodies hold nothing to find, as most calls do). CPU is the gateway process's user +",
      'system time per call, the median round; the ratio is to no policy in the same run.',
      '',
      '| body | off: CPU µs per call | on: CPU µs per call | ratio |',
      '|---|---|---|---|',
      row(`typical chat (${Buffer.byteLength(JSON.stringify(TYPICAL))} B, ${calls} calls a round)`, typical),
      row(`large (${(largeBytes / 1024 / 1024).toFixed(2)} MB, ${largeCalls} calls a round)`, big),
      '',
      `The scan alone, in this process (median, after a warm-up): ${scans.typical.toFixed(0)} µs for the typical body,`,
      `${(scans.large / 1000).toFixed(1)} ms for the large one.`,
      '',
      machine(),
    ].join('\n')
  } finally {
    await Promise.all(SIDES.map((side) => gateways[side].stop()))
    await upstream.stop()
  }
}

if (import.meta.main) {
  const [rounds = '8', calls = '300', largeCalls] = process.argv.slice(2)
  const large = largeCalls === undefined ? undefined : Number(largeCalls)
  process.stdout.write(`${await benchGuardrails(Number(rounds), Number(calls), large)}\n`)
}

// The tokenizer stall (issue #15): one chat completion whose prompt is pathological for
// byte-pair encoding (a run of one letter, random bytes, emoji), in its message or in the
// description of a tool (issue #19: tools are estimated and counted too), with /healthz
// polled meanwhile. Reports the worst event-loop delay inside the gateway (bench/loop-probe.ts)
// and the slowest /healthz answer, for this checkout and, when TOLLGATE_BENCH_BEFORE
// names another checkout (with node_modules), for that one too: `before` in the table.
// The other checkout gets only the 200 KB prompts: a stalling one would take hours on 4 MB.
import { LOOP_PROBE, loopDelay } from './loop-delay.ts'
import { startTollgate } from '../test/helpers/gateway.ts'
import { pollHealth } from '../test/helpers/health-poller.ts'
import {
  chatBodyOf,
  PATHOLOGICAL_KINDS,
  pathologicalText,
  toolsBodyOf,
  type PathologicalKind,
} from '../test/helpers/pathological.ts'
import { fmt, pause } from './proxy-rig.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'
/** Where the text goes: the one message, or a tool's description beside "hi". */
const FIELDS = { message: chatBodyOf, tool: toolsBodyOf } as const
type Field = keyof typeof FIELDS

interface Reading {
  readonly checkout: 'before' | 'after'
  readonly field: Field
  readonly kind: PathologicalKind
  readonly bytes: number
  readonly status: number
  readonly requestMs: number
  readonly loopMaxMs: number
  readonly healthWorstMs: number
  readonly polls: number
}

async function measure(
  checkout: Reading['checkout'],
  root: string | undefined,
  sizes: readonly number[],
): Promise<Reading[]> {
  const gw = await startTollgate({ ...(root ? { root } : {}), execArgv: LOOP_PROBE })
  const readings: Reading[] = []
  try {
    const { key } = await gw.createKey({
      tier: 'Standard4000',
      limits: { '*': { rpm: 10_000, input_tpm: 100_000_000, output_tpm: 100_000_000 } },
    })
    await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: chatBodyOf(CHAT, 'warm up'),
    }).then((r) => r.text())
    for (const [field, bodyOf] of Object.entries(FIELDS) as Array<[Field, typeof chatBodyOf]>)
      for (const bytes of sizes) {
        for (const kind of PATHOLOGICAL_KINDS) {
          const body = bodyOf(CHAT, pathologicalText(kind, bytes))
          await loopDelay(gw)
          const poller = pollHealth(gw.url)
          const started = performance.now()
          const res = await fetch(`${gw.url}/v2/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body,
          })
          await res.text()
          const requestMs = performance.now() - started
          await pause(100)
          const health = await poller.stop()
          readings.push({
            checkout,
            field,
            kind,
            bytes,
            status: res.status,
            requestMs,
            loopMaxMs: await loopDelay(gw),
            healthWorstMs: health.worstMs,
            polls: health.polls,
          })
          process.stderr.write(
            `stall ${checkout} ${field} ${kind} ${bytes}: ${res.status} in ${requestMs.toFixed(0)} ms, loop max ${readings.at(-1)?.loopMaxMs.toFixed(1)} ms\n`,
          )
        }
      }
  } finally {
    await gw.stop()
  }
  return readings
}

export async function benchStall(): Promise<string> {
  const before = process.env.TOLLGATE_BENCH_BEFORE
  const readings = [
    ...(before ? await measure('before', before, [200_000]) : []),
    ...(await measure('after', undefined, [200_000, 4_000_000])),
  ]
  const rows = readings.map(
    (r) =>
      `| ${r.checkout} | ${r.field} | ${r.kind} | ${fmt(r.bytes / 1000)} KB | ${r.status} | ${fmt(r.requestMs)} | **${fmt(r.loopMaxMs, 1)}** | ${fmt(r.healthWorstMs, 1)} (${r.polls} polls) |`,
  )
  return [
    '## Tokenizer stall: event-loop delay under pathological prompts (bench/stall.ts)',
    '',
    'One chat completion at a time through the default configuration (mock backend, which',
    'reports usage by counting the prompt, tool definitions included), on a key whose limits',
    'admit it; the text is the one message, or the description of a tool beside "hi"; /healthz polled',
    'every 20 ms on another connection. "Loop max" is the worst event-loop delay inside the',
    'gateway during the call (`monitorEventLoopDelay`, resolution 5 ms).',
    before ? `"before" is the checkout at \`${before}\`, run on 200 KB prompts only.` : '',
    '',
    '| Checkout | Field | Prompt | Size | Status | Request ms | Loop max ms | Slowest /healthz ms |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchStall()}\n`)

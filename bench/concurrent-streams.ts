// Many slow streams at once through one gateway: its memory (RSS from /proc before, at
// the peak and after), per stream, and whether every stream got all its tokens. The
// upstream is paced slowly so that the streams overlap for seconds.
//
// Run twice: with the backend's maxSockets raised above the stream count, and with the
// default (256), where the streams beyond it wait for an upstream socket.
//
//   node bench/concurrent-streams.ts [--streams 500] [--production]   prints a Markdown section
//
// --production runs the gateway as `npm start` and the Dockerfile do (GATEWAY_NODE_FLAGS,
// GATEWAY_ENV of compare.ts, and --expose-gc); without it, with Node's defaults as before.
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS } from './compare.ts'
import {
  CHAT_MODEL,
  cpuMsOf,
  fmt,
  memoryOf,
  mib,
  pause,
  quantile,
  resetPeak,
  sampleRss,
  startRig,
} from './proxy-rig.ts'
import { sameEvents, streamChat, type StreamResult } from './sse-client.ts'

const TOKENS = 64
const TOKENS_PER_SECOND = 10
const WARMUP_STREAMS = 10
/** How long after the last stream ends the "after" reading is taken. */
const SETTLE_MS = 3000

interface Run {
  readonly label: string
  readonly results: readonly StreamResult[]
  readonly before: number
  readonly peakSampled: number
  readonly peakHwm: number | undefined
  readonly startupHwm: number
  readonly afterEnd: number
  readonly afterSettle: number
  readonly cpuMs: number
  readonly wallMs: number
  readonly eventsOk: number
}

/** The most intervals open at one instant. */
function maxOverlap(intervals: ReadonlyArray<readonly [number, number]>): number {
  const edges = intervals
    .flatMap(
      ([a, b]) =>
        [
          [a, 1],
          [b, -1],
        ] as const,
    )
    .sort((x, y) => x[0] - y[0] || x[1] - y[1])
  let open = 0
  let max = 0
  for (const [, step] of edges) max = Math.max(max, (open += step))
  return max
}

export interface ConcurrentStreamsOptions {
  /** Streams started at once (default 500). */
  readonly streams?: number
  /** Run the gateway with the production flags and environment. */
  readonly production?: boolean
}

async function run(label: string, maxSockets: number | undefined, streams: number, production: boolean): Promise<Run> {
  const rig = await startRig({
    tokensPerSecond: TOKENS_PER_SECOND,
    ...(production ? { execArgv: [...GATEWAY_NODE_FLAGS, '--expose-gc'], env: GATEWAY_ENV } : {}),
    config: (doc) => {
      const upstream = (doc.backends as Record<string, Record<string, unknown>>).upstream
      if (upstream && maxSockets === undefined) delete upstream.maxSockets
      else if (upstream) upstream.maxSockets = maxSockets
    },
  })
  try {
    const pid = rig.gateway.child.pid ?? 0
    const target = { url: `${rig.gateway.url}/v2/chat/completions`, key: rig.key, model: CHAT_MODEL, maxTokens: TOKENS }
    // The upstream's stream as the gateway gets it, less the usage chunk it hides.
    // Read alongside the warm-up streams: at this pace each takes seconds.
    const [reference] = await Promise.all([
      streamChat({
        url: `${rig.upstream.url}/v1/chat/completions`,
        model: CHAT_MODEL,
        maxTokens: TOKENS,
        includeUsage: true,
      }),
      ...Array.from({ length: WARMUP_STREAMS }, () => streamChat(target)),
    ])
    // The gateway asked for it, the client did not: so the client gets neither the usage
    // chunk nor the `"usage":null` the upstream puts in every other chunk.
    const expected = reference.events
      .filter((e) => !/"choices":\[\],"usage":\{/.test(e))
      .map((e) => e.replace(',"usage":null}', '}'))
    await pause(500)
    const startupHwm = memoryOf(pid).hwm
    const before = memoryOf(pid).rss
    const reset = resetPeak(pid)
    const sampler = sampleRss(pid)
    const cpu0 = cpuMsOf(pid)
    const t0 = performance.now()
    const results = await Promise.all(Array.from({ length: streams }, () => streamChat(target)))
    const wallMs = performance.now() - t0
    const cpuMs = cpuMsOf(pid) - cpu0
    const peakSampled = sampler.stop()
    const end = memoryOf(pid)
    await pause(SETTLE_MS)
    return {
      label,
      results,
      before,
      peakSampled,
      peakHwm: reset ? end.hwm : undefined,
      startupHwm,
      afterEnd: end.rss,
      afterSettle: memoryOf(pid).rss,
      cpuMs,
      wallMs,
      eventsOk: results.filter((r) => sameEvents(r.events, expected).same).length,
    }
  } finally {
    await rig.stop()
  }
}

export async function benchConcurrentStreams(options: ConcurrentStreamsOptions = {}): Promise<string> {
  const streams = options.streams ?? 500
  const production = options.production ?? false
  const runs = [
    await run(`maxSockets 1024`, 1024, streams, production),
    await run('maxSockets 256 (default)', undefined, streams, production),
  ]
  const memoryRows: string[] = []
  const streamRows: string[] = []
  for (const r of runs) {
    const peak = Math.max(r.peakSampled, r.peakHwm ?? 0)
    memoryRows.push(
      `| ${r.label} | ${mib(r.before)} | ${mib(r.peakSampled)} | ${r.peakHwm === undefined ? 'n/a' : mib(r.peakHwm)} | ${mib(r.afterEnd)} | ${mib(r.afterSettle)} | ${fmt((peak - r.before) / streams / 1024, 1)} | ${fmt(r.cpuMs / streams, 2)} |`,
    )
    const ok = r.results.filter((x) => x.status === 200 && x.done && x.tokens === TOKENS).length
    const ttft = r.results.map((x) => x.ttftMs).sort((a, b) => a - b)
    const total = r.results.map((x) => x.totalMs).sort((a, b) => a - b)
    const open = maxOverlap(r.results.map((x) => [x.startedAt, x.startedAt + x.totalMs] as const))
    const receiving = maxOverlap(r.results.map((x) => [x.startedAt + x.ttftMs, x.startedAt + x.totalMs] as const))
    streamRows.push(
      `| ${r.label} | ${streams} | ${ok} | ${r.eventsOk} | ${open} | ${receiving} | ${fmt(quantile(ttft, 0.5))} | ${fmt(quantile(ttft, 0.99))} | ${fmt(quantile(total, 0.5))} | ${fmt(quantile(total, 0.99))} | ${fmt(r.wallMs / 1000, 1)} |`,
    )
  }
  const hwmNote = runs.some((r) => r.peakHwm === undefined)
    ? 'VmHWM could not be reset here (clear_refs not\nwritable), so only the sampled peak counts.'
    : 'VmHWM is reset (`5` to /proc/<pid>/clear_refs)\njust before the streams start: the peak of this phase alone, start-up excluded.'
  return [
    '## Many concurrent streams, memory (bench/concurrent-streams.ts)',
    '',
    `${streams} streamed chat completions of ${TOKENS} tokens started at once through one gateway, from an`,
    `upstream process paced at ${TOKENS_PER_SECOND} tok/s (so each stream lasts about ${fmt(TOKENS / TOKENS_PER_SECOND, 1)} s and they all overlap).`,
    `Gateway memory is read from /proc/<pid>/status of the \`tollgate serve\` child: VmRSS after`,
    `${WARMUP_STREAMS} warm-up streams ("before"), sampled every 50 ms during the run, VmHWM, VmRSS when the`,
    `last stream ended and ${fmt(SETTLE_MS / 1000)} s later. ${hwmNote}`,
    production
      ? `The gateway runs as \`npm start\` and the Dockerfile run it (node ${[...GATEWAY_NODE_FLAGS, '--expose-gc'].join(' ')}, ${Object.entries(
          GATEWAY_ENV,
        )
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}).`
      : 'The gateway runs with Node’s defaults (no flags).',
    `Per stream = (peak − before) / ${streams}: sockets and buffers on both sides of the gateway,`,
    'and garbage not yet collected (V8 keeps the heap it grew, so RSS stays up afterwards).',
    `Run with the backend's maxSockets at 1024 and at the default 256 (the gateway's`,
    'connections to one backend; streams beyond it wait for a socket).',
    '',
    '| Gateway | RSS before MiB | RSS peak (sampled) MiB | VmHWM MiB | RSS at end MiB | RSS +3 s MiB | KiB per stream | Gateway CPU ms/stream |',
    '|---|---|---|---|---|---|---|---|',
    ...memoryRows,
    '',
    `For scale: the gateway's VmHWM after start-up and warm-up, before the reset, was ${runs.map((r) => `${mib(r.startupHwm)} MiB`).join(' and ')}.`,
    '',
    '| Gateway | Streams | 200 + all tokens + [DONE] | Events as the upstream sent | Most open at once | Most receiving tokens at once | TTFT p50 ms | TTFT p99 ms | Total p50 ms | Total p99 ms | Wall s |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...streamRows,
    '',
    '"Most receiving tokens at once" counts streams between their first content event and',
    "their end at one instant (from the client's timestamps): the overlap actually reached.",
  ].join('\n')
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { streams: { type: 'string', default: '500' }, production: { type: 'boolean', default: false } },
  })
  const streams = Number(values.streams)
  if (!Number.isInteger(streams) || streams < 1) throw new Error(`--streams: a positive integer, not ${values.streams}`)
  process.stdout.write(`${await benchConcurrentStreams({ streams, production: values.production })}\n`)
}

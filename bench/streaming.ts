// What Tollgate adds to a streamed chat completion: the same SSE stream of a fixed token
// count read straight from the upstream process and through a gateway in front of it,
// one at a time and 32 at once, the two paths alternating so that drift in the machine's
// load hits both alike. Every stream is checked: all tokens arrived, and the events the
// client got are exactly the upstream's (ids and timestamps masked).
//
//   node bench/streaming.ts            prints a Markdown section
import { CHAT_MODEL, cpuMsOf, fmt, quantile, startRig, type Rig } from './proxy-rig.ts'
import { sameEvents, streamChat, type StreamResult } from './sse-client.ts'

const TOKENS = 128
const PACES = [
  { label: '2,000 tok/s', tokensPerSecond: 2000 },
  // Far above what the event loop delivers: the upstream writes events as fast as it can.
  { label: 'unpaced', tokensPerSecond: 10_000_000 },
] as const
/** In flight at once → streams per worker per block. */
const LOADS = [
  { concurrency: 1, perWorker: 40 },
  { concurrency: 32, perWorker: 4 },
] as const
/** Direct and gateway blocks alternate this many times per load. */
const BLOCKS = 3
const WARMUP_STREAMS = 20

type Path = 'direct' | 'gateway'

interface Expected {
  /** What the upstream sends a client that did not ask for usage. */
  readonly direct: readonly string[]
  /** What the upstream sends the gateway (which asks for usage), less the usage-only chunk. */
  readonly gateway: readonly string[]
  /** What the upstream sends when usage is asked for. */
  readonly withUsage: readonly string[]
}

interface Tally {
  readonly ttft: number[]
  readonly total: number[]
  streams: number
  badStatus: number
  wrongTokens: number
  notDone: number
  eventMismatch: number
  usageChunks: number
  gatewayCpuMs: number
}

const newTally = (): Tally => ({
  ttft: [],
  total: [],
  streams: 0,
  badStatus: 0,
  wrongTokens: 0,
  notDone: 0,
  eventMismatch: 0,
  usageChunks: 0,
  gatewayCpuMs: 0,
})

function urlOf(rig: Rig, path: Path): { url: string; key?: string } {
  return path === 'direct'
    ? { url: `${rig.upstream.url}/v1/chat/completions` }
    : { url: `${rig.gateway.url}/v2/chat/completions`, key: rig.key }
}

function check(tally: Tally, result: StreamResult, expected: readonly string[]): void {
  tally.streams++
  tally.ttft.push(result.ttftMs)
  tally.total.push(result.totalMs)
  if (result.status !== 200) tally.badStatus++
  if (result.tokens !== TOKENS) tally.wrongTokens++
  if (!result.done) tally.notDone++
  if (!sameEvents(result.events, expected).same) tally.eventMismatch++
  tally.usageChunks += result.usageChunks
}

async function block(
  rig: Rig,
  path: Path,
  concurrency: number,
  perWorker: number,
  expected: Expected,
  tally: Tally | undefined,
): Promise<void> {
  const target = urlOf(rig, path)
  const pid = rig.gateway.child.pid ?? 0
  const cpu0 = cpuMsOf(pid)
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = 0; i < perWorker; i++) {
        const result = await streamChat({ ...target, model: CHAT_MODEL, maxTokens: TOKENS })
        if (tally) check(tally, result, path === 'direct' ? expected.direct : expected.gateway)
      }
    }),
  )
  if (tally && path === 'gateway') tally.gatewayCpuMs += cpuMsOf(pid) - cpu0
}

async function expectedEvents(rig: Rig): Promise<Expected> {
  const direct = await streamChat({ ...urlOf(rig, 'direct'), model: CHAT_MODEL, maxTokens: TOKENS })
  const withUsage = await streamChat({
    ...urlOf(rig, 'direct'),
    model: CHAT_MODEL,
    maxTokens: TOKENS,
    includeUsage: true,
  })
  if (direct.tokens !== TOKENS || withUsage.usageChunks !== 1)
    throw new Error('the upstream did not stream what the bench expects')
  const gateway = withUsage.events.filter((e) => !/"choices":\[\],"usage":\{/.test(e))
  return { direct: direct.events, gateway, withUsage: withUsage.events }
}

interface Row {
  readonly pace: string
  readonly concurrency: number
  readonly direct: Tally
  readonly gateway: Tally
}

export async function benchStreaming(): Promise<string> {
  const rows: Row[] = []
  const checks: string[] = []
  let contentEvents = 0
  for (const pace of PACES) {
    const rig = await startRig({ tokensPerSecond: pace.tokensPerSecond })
    try {
      const expected = await expectedEvents(rig)
      contentEvents = expected.direct.filter((e) => /"delta":\{"content":"[^"]/.test(e)).length
      // A client that asks for usage gets the upstream's usage chunk, unchanged.
      const asked = await streamChat({
        ...urlOf(rig, 'gateway'),
        model: CHAT_MODEL,
        maxTokens: TOKENS,
        includeUsage: true,
      })
      checks.push(
        `${pace.label}: a gateway client that set include_usage got the upstream's stream event for event: ${sameEvents(asked.events, expected.withUsage).same ? 'yes' : 'NO'} (${asked.usageChunks} usage chunk)`,
      )
      const unasked = await streamChat({ ...urlOf(rig, 'gateway'), model: CHAT_MODEL, maxTokens: TOKENS })
      const nullUsage = unasked.events.filter((e) => e.includes('"usage":null')).length
      checks.push(
        `${pace.label}: a gateway client that did not set it: ${unasked.usageChunks} usage chunks; ${nullUsage} of ${unasked.events.length - 1} chunks carry \`"usage":null\` (a direct client's carry none)`,
      )

      for (const path of ['direct', 'gateway'] as const)
        await block(rig, path, 4, WARMUP_STREAMS / 4, expected, undefined)
      for (const load of LOADS) {
        const tallies = { direct: newTally(), gateway: newTally() }
        for (let b = 0; b < BLOCKS; b++) {
          // Alternate which path goes first, too.
          const order: Path[] = b % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct']
          for (const path of order) await block(rig, path, load.concurrency, load.perWorker, expected, tallies[path])
        }
        rows.push({ pace: pace.label, concurrency: load.concurrency, ...tallies })
      }
    } finally {
      await rig.stop()
    }
  }

  const ms = (n: number): string => fmt(n, 1)
  const stats = (t: Tally): [number, number, number, number] => {
    const ttft = [...t.ttft].sort((a, b) => a - b)
    const total = [...t.total].sort((a, b) => a - b)
    return [quantile(ttft, 0.5), quantile(ttft, 0.99), quantile(total, 0.5), quantile(total, 0.99)]
  }
  const table: string[] = []
  const verify: string[] = []
  for (const row of rows) {
    const d = stats(row.direct)
    const g = stats(row.gateway)
    const lead = `| ${row.pace} | ${row.concurrency}`
    table.push(`${lead} | direct | ${row.direct.streams} | ${d.map(ms).join(' | ')} | |`)
    table.push(
      `${lead} | via Tollgate | ${row.gateway.streams} | ${g.map(ms).join(' | ')} | ${fmt(row.gateway.gatewayCpuMs / row.gateway.streams, 2)} |`,
    )
    table.push(
      `${lead} | **added** | | ${g.map((v, i) => `**${(v - (d[i] ?? 0) >= 0 ? '+' : '') + ms(v - (d[i] ?? 0))}**`).join(' | ')} | |`,
    )
    for (const [path, t] of [
      ['direct', row.direct],
      ['via Tollgate', row.gateway],
    ] as const) {
      verify.push(
        `| ${row.pace} | ${row.concurrency} | ${path} | ${t.streams} | ${t.streams - t.wrongTokens - t.notDone} | ${t.streams - t.eventMismatch} | ${t.usageChunks} | ${t.badStatus} |`,
      )
    }
  }
  return [
    '## Proxy overhead on streams (bench/streaming.ts)',
    '',
    `SSE chat completions of exactly ${TOKENS} tokens (${contentEvents} content events: a few`,
    "of the mock's words are several tokens) from the upstream process",
    '(test/helpers/upstream-process.ts, paced at the rate shown), read by this process either',
    'straight from the upstream ("direct") or through one `tollgate serve` whose `openai`',
    'backend points at it (key on a tier without limits). Closed loop: 1 or 32 streams in',
    `flight; direct and gateway blocks alternate ${BLOCKS} times after ${WARMUP_STREAMS} warm-up streams each.`,
    'TTFT is from sending the request to the first event with delta content; total is to',
    'the end of the body. "Added" is gateway minus direct for the same percentile. Gateway',
    "CPU is the gateway process's user+system time (from /proc) per stream. Upstream,",
    'gateway and client share the two cores.',
    '',
    '| Upstream pace | In flight | Path | Streams | TTFT p50 ms | TTFT p99 ms | Total p50 ms | Total p99 ms | Gateway CPU ms/stream |',
    '|---|---|---|---|---|---|---|---|---|',
    ...table,
    '',
    `Every stream checked: the ${TOKENS} tokens counted with the mock's own tokenizer, \`[DONE]\``,
    'received, and the events compared with what the upstream sends (ids and `created`',
    "masked). For the gateway path that is the upstream's stream with include_usage (the",
    'gateway asks for it) less the usage-only chunk, which a client that did not ask must',
    'not see.',
    '',
    '| Upstream pace | In flight | Path | Streams | All tokens + [DONE] | Events as the upstream sent | Usage chunks seen | non-200 |',
    '|---|---|---|---|---|---|---|---|',
    ...verify,
    '',
    ...checks.map((c) => `- ${c}`),
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchStreaming()}\n`)

// Tollgate side by side with what it sits between (`npm run bench -- compare`): in one run,
// non-streaming and streamed chat completions straight to a fast upstream process, through
// a bare http-proxy-3 hop, and through Tollgate on each store with plan limits on and off.
// Every figure is also given as a ratio to the bare hop of the same run: on a shared
// machine absolute numbers drift from run to run, the ratios much less.
//
// Load: autocannon (its CLI, in a process of its own) for throughput at 50 connections;
// bench/compare/probe-client.ts for latency at a fixed offered rate and for time to first
// token of one stream at a time (autocannon keeps whole milliseconds). The upstream
// (bench/compare/fast-upstream.ts) and the hop (bench/compare/bare-hop.ts) run in their
// own processes; the gateways are real `tollgate serve` processes.
//
//   node bench/compare.ts [--quick] [--soak 60] [--root <other checkout>]   prints a Markdown section
//   npm run bench -- compare [--quick]            also writes it into bench/results.md
import { spawn, execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { chatBody, closedLoop, cpuMsOf, fmt, LIMITS_OFF_AND_ON, memoryOf, pause, sampleRss } from './proxy-rig.ts'

const run = promisify(execFile)
const HERE = import.meta.dirname
const CONNECTIONS = 50
const FIXED_RATE = 2000
/** A rate the bare hop sustains even when the machine is shared (at 2,000 req/s it may not: then every path queues). */
const LOW_RATE = 500
const MODEL = 'bench-chat'
/** Routed to an upstream that paces its events, so that many streams overlap. */
const SLOW_MODEL = 'bench-chat-slow'
const MANY_STREAMS = 1000
/** 19 events (16 content chunks) 250 ms apart: each stream lasts about 5 s. */
const SLOW_PACE_MS = 250

export interface CompareOptions {
  /** Seconds per measurement (throughput, fixed rate). */
  readonly seconds: number
  /** Every target is measured this many times, the targets alternating; the median is shown. */
  readonly rounds: number
  /** Sequential streams for time to first token, per round. */
  readonly streams: number
  /** Seconds of saturation soak on the Redis gateway with limits on (0: none). */
  readonly soakSeconds: number
  /** Another checkout whose gateway to run (a before/after comparison); default this one. */
  readonly root?: string
}

export const FULL: CompareOptions = { seconds: 5, rounds: 2, streams: 100, soakSeconds: 60 }
export const QUICK: CompareOptions = { seconds: 2, rounds: 2, streams: 40, soakSeconds: 0 }

interface Target {
  readonly label: string
  readonly url: string
  readonly key?: string
  /** The gateway process, whose CPU and memory are read. */
  readonly gateway?: RunningTollgate
  /** The process whose CPU is read, when it is not a gateway (the bare hop). */
  readonly pid?: number
}

interface Sample {
  json: number[]
  sse: number[]
  cpuJson: number[]
  cpuSse: number[]
  p50: number[]
  p99: number[]
  lowP50: number[]
  lowP99: number[]
  ttft: number[]
  ttftP99: number[]
  errors: number
}

/** Starts bench/compare/<script> in a process of its own; resolves once it prints its port. */
export function startChild(
  script: string,
  args: string[],
): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [join(HERE, 'compare', script), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return new Promise((done, fail) => {
    let buffer = ''
    const timer = setTimeout(() => fail(new Error(`${script} did not start`)), 15_000)
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk
      const line = buffer.split('\n').find((l) => l.startsWith('{"port"'))
      if (!line) return
      clearTimeout(timer)
      done({
        url: `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`,
        pid: child.pid ?? 0,
        async stop() {
          if (child.exitCode !== null) return
          const exited = new Promise((end) => child.once('exit', end))
          child.kill('SIGTERM')
          await exited
        },
      })
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      fail(new Error(`${script} exited ${code}`))
    })
  })
}

/** Closed-loop throughput at CONNECTIONS connections: 2xx per second, and non-2xx seen. */
async function autocannon(
  target: Target,
  stream: boolean,
  seconds: number,
): Promise<{ rps: number; requests: number; errors: number }> {
  const result = await closedLoop({
    url: target.url,
    body: chatBody(MODEL, 16, stream),
    headers: target.key ? { authorization: `Bearer ${target.key}` } : {},
    connections: CONNECTIONS,
    seconds,
  })
  return {
    rps: result['2xx'] / result.duration,
    requests: result['2xx'],
    errors: result.non2xx + result.errors + result.timeouts,
  }
}

async function probe<T>(options: Record<string, unknown>): Promise<T> {
  const { stdout } = await run(process.execPath, [join(HERE, 'compare/probe-client.ts'), JSON.stringify(options)], {
    maxBuffer: 2 ** 20,
  })
  return JSON.parse(stdout) as T
}

async function measure(target: Target, options: CompareOptions, into: Sample): Promise<void> {
  const pid = target.gateway?.child.pid ?? target.pid
  // A gateway left quiet while the others were measured has compacted its heap (and V8 has
  // run its own idle collection): a second of load first, so the figures are the steady ones.
  if (target.gateway) await autocannon(target, false, 1)
  for (const stream of [false, true]) {
    const cpu0 = pid === undefined ? 0 : cpuMsOf(pid)
    const r = await autocannon(target, stream, options.seconds)
    const cpu = pid === undefined ? NaN : (cpuMsOf(pid) - cpu0) / Math.max(1, r.requests)
    ;(stream ? into.sse : into.json).push(r.rps)
    ;(stream ? into.cpuSse : into.cpuJson).push(cpu)
    into.errors += r.errors
  }
  // Latency at a fixed offered rate, the same for every target.
  const atRate = (rate: number): Promise<{ errors: number; p50: number; p99: number }> =>
    probe({ mode: 'rate', url: target.url, key: target.key, rate, seconds: options.seconds })
  const fixed = await atRate(FIXED_RATE)
  into.p50.push(fixed.p50)
  into.p99.push(fixed.p99)
  into.errors += fixed.errors
  const low = await atRate(LOW_RATE)
  into.lowP50.push(low.p50)
  into.lowP99.push(low.p99)
  into.errors += low.errors
  const first = await probe<{ errors: number; ttft: { p50: number; p99: number } }>({
    mode: 'ttft',
    url: target.url,
    key: target.key,
    streams: options.streams,
  })
  into.ttft.push(first.ttft.p50)
  into.ttftP99.push(first.ttft.p99)
  into.errors += first.errors
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0
    ? NaN
    : s.length % 2 === 1
      ? (s[(s.length - 1) / 2] ?? NaN)
      : ((s[s.length / 2 - 1] ?? 0) + (s[s.length / 2] ?? 0)) / 2
}
/** The medians a row of the table shows. */
function mediansOf(s: Sample): Record<'json' | 'sse' | 'p50' | 'p99' | 'ttft' | 'lowP50' | 'lowP99', number> {
  return {
    json: median(s.json),
    sse: median(s.sse),
    p50: median(s.p50),
    p99: median(s.p99),
    ttft: median(s.ttft),
    lowP50: median(s.lowP50),
    lowP99: median(s.lowP99),
  }
}
const range = (xs: readonly number[], digits = 0): string =>
  xs.length < 2 ? '' : ` (${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)})`
const ratio = (x: number, of: number): string => (Number.isFinite(x) && of > 0 ? `${fmt((100 * x) / of)} %` : '–')
const signed = (x: number, digits = 2): string => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${fmt(x, digits)}` : '–')
const mb = (bytes: number): string => fmt(bytes / 2 ** 20)

/**
 * How the gateway runs in production (Dockerfile, `npm start`): a young generation capped
 * at 8 MB semi-spaces (V8 otherwise grows it to 64 MB under a high allocation rate and
 * keeps it), the collections it runs by hand (before listening, and after a burst: see
 * src/compact-heap.ts) and two malloc arenas (glibc otherwise gives each thread its own).
 */
export const GATEWAY_NODE_FLAGS = ['--max-semi-space-size=8', '--expose-gc'] as const
export const GATEWAY_ENV = { MALLOC_ARENA_MAX: '2' } as const
/** When "after load" is read: past the default server.heapCompaction.quietMs (10 s). */
const AFTER_LOAD_MS = 12_000

/**
 * A `tollgate serve` as production runs it, on the embedded store or on Redis at
 * `redisUrl`, with the tiers of LIMITS_OFF_AND_ON; `config` adds the backends and models
 * (this bench's and bench/latency.ts's). `root`: another checkout's gateway.
 */
export function startBenchGateway(
  store: 'embedded' | 'redis',
  redisUrl: string,
  root: string | undefined,
  config: (doc: Record<string, unknown>) => void,
): Promise<RunningTollgate> {
  return startTollgate({
    ...(root === undefined ? {} : { root }),
    dropRequestLogs: true,
    execArgv: GATEWAY_NODE_FLAGS,
    env: {
      ...GATEWAY_ENV,
      ...(store === 'redis'
        ? { REDIS_URL: redisUrl, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' }
        : {}),
    },
    config: (doc) => {
      doc.plans = LIMITS_OFF_AND_ON
      config(doc)
    },
  })
}

function startGateway(
  store: 'embedded' | 'redis',
  upstream: string,
  slow: string,
  redisUrl: string,
  root: string | undefined,
): Promise<RunningTollgate> {
  return startBenchGateway(store, redisUrl, root, (doc) => {
    // Only the upstream: a gateway in front of a real model server has no mock backend
    // (whose replies need the tokenizer loaded on the main thread, ~75 MB).
    doc.backends = {
      upstream: { type: 'openai', baseUrl: `${upstream}/v1`, maxSockets: 1024 },
      slow: { type: 'openai', baseUrl: `${slow}/v1`, maxSockets: 1024 },
    }
    doc.resourceBackend = 'upstream'
    doc.models = [
      { name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] },
      { name: SLOW_MODEL, kind: 'chat', deployments: [{ backend: 'slow' }] },
    ]
    // The 1,000 streams come from one address, above the default cap of 1,000 connections.
    ;(doc.server as Record<string, unknown>).maxConnectionsPerAddress = 2 * MANY_STREAMS
    ;(doc.store as Record<string, unknown>).keyPrefix = 'bench:'
  })
}

export async function benchCompare(options: CompareOptions = FULL): Promise<string> {
  const redis = await startPrivateRedis()
  const upstream = await startChild('fast-upstream.ts', [])
  const hop = await startChild('bare-hop.ts', [upstream.url])
  const slow = await startChild('fast-upstream.ts', ['--pace-ms', String(SLOW_PACE_MS)])
  const gateways: RunningTollgate[] = []
  const memory = new Map<RunningTollgate, { idle: number; load: number; after: number }>()
  let soak = ''
  try {
    const targets: Target[] = [
      { label: 'direct to the upstream', url: `${upstream.url}/v1/chat/completions` },
      { label: 'bare http-proxy-3 hop', url: `${hop.url}/v1/chat/completions`, pid: hop.pid },
    ]
    for (const store of ['embedded', 'redis'] as const) {
      const gw = await startGateway(store, upstream.url, slow.url, redis.url, options.root)
      gateways.push(gw)
      await pause(1000)
      memory.set(gw, { idle: memoryOf(gw.child.pid ?? 0).rss, load: 0, after: 0 })
      for (const tier of ['On', 'Off'] as const) {
        const { key } = await gw.createKey({ tier })
        targets.push({
          label: `Tollgate, ${store}, limits ${tier === 'On' ? 'on' : 'off'}`,
          url: `${gw.url}/v2/chat/completions`,
          key,
          gateway: gw,
        })
      }
    }
    // Warm-up: a short run on each (JIT, keep-alive pools, prepared statements).
    for (const target of targets) await autocannon(target, false, 1)
    const samples = new Map<Target, Sample>(
      targets.map((t) => [
        t,
        {
          json: [],
          sse: [],
          cpuJson: [],
          cpuSse: [],
          p50: [],
          p99: [],
          lowP50: [],
          lowP99: [],
          ttft: [],
          ttftP99: [],
          errors: 0,
        },
      ]),
    )
    const watchers = gateways.map((gw) => ({ gw, watch: sampleRss(gw.child.pid ?? 0, 100) }))
    for (let round = 0; round < options.rounds; round++) {
      for (const target of targets) await measure(target, options, samples.get(target) as Sample)
    }
    for (const { gw, watch } of watchers) {
      const m = memory.get(gw)
      if (m) m.load = watch.stop()
    }
    await pause(AFTER_LOAD_MS)
    for (const gw of gateways) {
      const m = memory.get(gw)
      if (m) m.after = memoryOf(gw.child.pid ?? 0).rss
    }
    const redisOn = targets.find((t) => t.label === 'Tollgate, redis, limits on') as Target
    if (options.soakSeconds > 0) soak = await soakRun(redisOn, options.soakSeconds)
    const streams = await manyStreams(redisOn)

    const atHop = mediansOf(samples.get(targets[1] as Target) as Sample)
    const rows = targets.map((t) => {
      const s = samples.get(t) as Sample
      const { json, sse, p50, p99, ttft, lowP50, lowP99 } = mediansOf(s)
      const isHop = t === targets[1]
      const cpu = t.gateway || t.pid !== undefined ? `${fmt(median(s.cpuJson), 3)} / ${fmt(median(s.cpuSse), 3)}` : '–'
      return `| ${t.label} | ${fmt(json)}${range(s.json)} | ${ratio(json, atHop.json)} | ${fmt(sse)}${range(s.sse)} | ${ratio(sse, atHop.sse)} | ${fmt(p50, 2)} / ${fmt(p99, 2)} | ${isHop ? '–' : `${signed(p50 - atHop.p50)} / ${signed(p99 - atHop.p99)}`} | ${fmt(lowP50, 2)} / ${fmt(lowP99, 2)} | ${isHop ? '–' : `${signed(lowP50 - atHop.lowP50)} / ${signed(lowP99 - atHop.lowP99)}`} | ${fmt(ttft, 2)} / ${fmt(median(s.ttftP99), 2)} | ${isHop ? '–' : signed(ttft - atHop.ttft)} | ${cpu} | ${s.errors} |`
    })
    const memRows = gateways.map((gw, i) => {
      const m = memory.get(gw) ?? { idle: NaN, load: NaN, after: NaN }
      const compactions = gw
        .logs()
        .filter((line) => line.msg === 'heap compacted after a burst')
        .map(
          (line) =>
            `${mb(Number(line.rssBefore))} → ${mb(Number(line.rssAfter))} (heap ${mb(Number(line.heapBefore))} → ${mb(Number(line.heapAfter))}, ${String(line.pauseMs)} ms)`,
        )
      return `| ${i === 0 ? 'embedded' : 'redis'} | ${mb(m.idle)} | ${mb(m.load)} | ${mb(m.after)} | ${compactions.join(', ') || '–'} |`
    })
    return [
      '## Side by side: direct, bare hop, Tollgate (bench/compare.ts)',
      '',
      `Chat completions against bench/compare/fast-upstream.ts (its own process; replies built once; SSE: ${16} content chunks,`,
      `written in two pieces). Throughput: autocannon, ${CONNECTIONS} keep-alive connections, ${options.seconds} s per run, JSON then SSE`,
      `(the whole stream read). Latency: ${fmt(FIXED_RATE)} and ${fmt(LOW_RATE)} req/s offered in an open loop (bench/compare/probe-client.ts), each call timed`,
      'from when it was due (a path that cannot keep up queues, and its latency grows with the run). TTFT: one stream at a time, request sent to first content token. Every target is measured',
      `${options.rounds} times, the targets alternating, each gateway after a second of load (steady figures: one left quiet while the others ran`,
      'has collected its heap); the median is shown, with the range over the rounds where it matters.',
      '"vs hop" is the ratio (throughput) or difference (ms) to the bare hop of the same run. CPU is the gateway\'s',
      "(or the hop's) process's user + system time over its 2xx requests, from /proc. The load generator, the upstream, the hop, Redis",
      'and the gateway share the machine (and other work was running on it): read the ratios, not the absolute figures.',
      `The gateways run as the Dockerfile runs them (node ${GATEWAY_NODE_FLAGS.join(' ')}, ${Object.entries(GATEWAY_ENV)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}), with only the`,
      'upstream as backend (no mock).',
      '',
      `| Path | JSON req/s | vs hop | SSE streams/s | vs hop | ${fmt(FIXED_RATE)} req/s: p50 / p99 ms | vs hop | ${fmt(LOW_RATE)} req/s: p50 / p99 ms | vs hop | TTFT p50 / p99 ms | vs hop | CPU ms/req JSON / SSE | errors |`,
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `Gateway RSS, MB (idle: started, one key created, no call yet; load: peak over all its runs; after: ${AFTER_LOAD_MS / 1000} s after the last),`,
      'and the compactions after bursts the gateway logged (RSS and heap MB before → after, the pause), through the 1,000 streams:',
      '',
      '| Store | idle | under load | after load | compactions after bursts |',
      '|---|---|---|---|---|',
      ...memRows,
      ...(soak ? ['', soak] : []),
      '',
      streams,
    ].join('\n')
  } finally {
    for (const gw of gateways) await gw.stop()
    await hop.stop()
    await slow.stop()
    await upstream.stop()
    await redis.kill()
  }
}

/** MANY_STREAMS paced streams at once through one gateway: its RSS before, at the peak, after; how many came whole. */
async function manyStreams(target: Target): Promise<string> {
  const pid = target.gateway?.child.pid ?? 0
  const before = memoryOf(pid).rss
  const watch = sampleRss(pid, 100)
  const r = await probe<{ streams: number; whole: number; seconds: number }>({
    mode: 'many',
    url: target.url,
    key: target.key,
    model: SLOW_MODEL,
    streams: MANY_STREAMS,
    connections: MANY_STREAMS,
    tokens: 16,
  })
  const peak = watch.stop()
  await pause(3000)
  const after = memoryOf(pid).rss
  return [
    `${fmt(MANY_STREAMS)} concurrent streams (${target.label}; upstream events ${SLOW_PACE_MS} ms apart, about 5 s a stream): ${fmt(r.whole)} of ${fmt(r.streams)}`,
    `came whole (every content chunk and [DONE]) in ${fmt(r.seconds, 1)} s. Gateway RSS before ${mb(before)} MB, peak ${mb(peak)} MB, 3 s after ${mb(after)} MB.`,
  ].join('\n')
}

/** Saturation for `seconds` on one gateway after a warm-up; RSS after the warm-up and after the soak. */
async function soakRun(target: Target, seconds: number): Promise<string> {
  const pid = target.gateway?.child.pid ?? 0
  await autocannon(target, false, 10)
  await pause(2000)
  const warm = memoryOf(pid).rss
  const watch = sampleRss(pid, 200)
  const half = Math.floor(seconds / 2)
  const a = await autocannon(target, false, half)
  const b = await autocannon(target, true, seconds - half)
  const peak = watch.stop()
  await pause(3000)
  const after = memoryOf(pid).rss
  return [
    `Soak (${target.label}): ${seconds} s of saturation (${half} s JSON at ${fmt(a.rps)} req/s, ${seconds - half} s SSE at ${fmt(b.rps)} streams/s, ${a.errors + b.errors} errors)`,
    `after a 10 s warm-up. RSS after the warm-up ${mb(warm)} MB, peak during ${mb(peak)} MB, 3 s after ${mb(after)} MB:`,
    `${signed((100 * (after - warm)) / warm, 1)} % against the warm-up.`,
  ].join('\n')
}

if (import.meta.main) {
  const args = process.argv.slice(2)
  const soakAt = args.indexOf('--soak')
  const base = args.includes('--quick') ? QUICK : FULL
  const rootAt = args.indexOf('--root')
  const options = {
    ...base,
    ...(soakAt === -1 ? {} : { soakSeconds: Number(args[soakAt + 1]) }),
    ...(rootAt === -1 ? {} : { root: args[rootAt + 1] }),
  }
  process.stdout.write(`${await benchCompare(options)}\n`)
}

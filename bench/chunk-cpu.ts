// What a streamed chunk costs the gateway's CPU, over what it costs a bare http-proxy-3 hop.
// An upstream (bench/compare/chunk-upstream.ts) sends each event of a stream as a write of
// its own, one per stream every --tick-ms (5), so each event is one read and one write on the
// path in front of it (the reads and writes per chunk are shown: on a loaded machine a path
// that falls behind reads two events at once, and its figure per chunk is then lower). Each path gets bursts of short streams (SHORT content chunks) and of
// long ones (LONG): the CPU per chunk is the slope, (long − short) ÷ (LONG − SHORT), which
// leaves out what a call costs once (auth, admission, settlement, the log line).
//
// Paths: the bare hop (bench/compare/bare-hop.ts); Tollgate on Redis with all five limits
// (production flags, no request log lines, as bench/floor.ts runs it); with --before <checkout>
// a Tollgate from that checkout beside it (the option may be given more than once). Their order turns round every round, so the
// machine's load drifts over all alike. CPU is each process's user + system time from
// /proc/<pid>/task/*/schedstat (nanoseconds, not 10 ms ticks); the first round is a warm-up,
// the median of the rest is shown.
//
//   node bench/chunk-cpu.ts [--rounds 8] [--streams 64] [--concurrency 32] [--tick-ms 5] [--before <checkout>]
import { readdirSync, readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, startChild } from './compare.ts'
import { fmt, LIMITS_OFF_AND_ON, syscallsOf } from './proxy-rig.ts'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    streams: { type: 'string', default: '64' },
    concurrency: { type: 'string', default: '32' },
    before: { type: 'string', multiple: true },
    'tick-ms': { type: 'string', default: '5' },
  },
})
const ROUNDS = Number(values.rounds)
const STREAMS = Number(values.streams)
const CONCURRENCY = Number(values.concurrency)
const SHORT = 8
const LONG = 136
const MODEL = 'bench-chat'

/** CPU time the process has used (all its threads), in milliseconds, to the nanosecond. */
function cpuMsOf(pid: number): number {
  let ns = 0
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0])
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1e6
}

interface Target {
  readonly label: string
  readonly url: string
  readonly pid: number
  readonly key?: string
}

/** One stream read whole; throws unless every chunk and the [DONE] came. */
async function oneStream(target: Target, tokens: number): Promise<void> {
  const res = await fetch(target.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(target.key === undefined ? {} : { authorization: `Bearer ${target.key}` }),
    },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'Stream a fixed number of chunks.' }],
      max_tokens: tokens,
      stream: true,
    }),
  })
  const text = await res.text()
  if (res.status !== 200 || !text.includes(` word${tokens - 1}"`) || !text.endsWith('data: [DONE]\n\n'))
    throw new Error(`${target.label}: a stream of ${tokens} chunks came back ${res.status}, incomplete`)
}

interface Cost {
  readonly cpuMs: number
  readonly reads: number
  readonly writes: number
}

/** CPU ms and read and write system calls per stream of the target's process over one burst of streams of `tokens` chunks. */
async function burst(target: Target, tokens: number): Promise<Cost> {
  const before = cpuMsOf(target.pid)
  const calls = syscallsOf(target.pid)
  let left = STREAMS
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await oneStream(target, tokens)
    }),
  )
  const after = syscallsOf(target.pid)
  return {
    cpuMs: (cpuMsOf(target.pid) - before) / STREAMS,
    reads: (after.reads - calls.reads) / STREAMS,
    writes: (after.writes - calls.writes) / STREAMS,
  }
}

function gateway(root: string, redisUrl: string, prefix: string): Promise<RunningTollgate> {
  return startTollgate({
    root,
    dropRequestLogs: true,
    execArgv: GATEWAY_NODE_FLAGS,
    env: { ...GATEWAY_ENV, REDIS_URL: redisUrl, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' },
    config: (doc) => {
      doc.plans = LIMITS_OFF_AND_ON
      doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
      doc.resourceBackend = 'upstream'
      doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
      ;(doc.store as Record<string, unknown>).keyPrefix = prefix
    },
  })
}

const redis = await startPrivateRedis()
const upstream = await startChild('chunk-upstream.ts', ['--tick-ms', values['tick-ms']])
const hop = await startChild('bare-hop.ts', [upstream.url])
const gateways: RunningTollgate[] = []
try {
  const gw = await gateway(resolve(import.meta.dirname, '..'), redis.url, 'chunks:')
  gateways.push(gw)
  const targets: Target[] = [
    { label: 'bare http-proxy-3 hop', url: `${hop.url}/v1/chat/completions`, pid: hop.pid },
    {
      label: 'Tollgate, Redis, limits on',
      url: `${gw.url}/v2/chat/completions`,
      pid: gw.child.pid ?? 0,
      key: (await gw.createKey({ tier: 'On' })).key,
    },
  ]
  for (const [i, root] of (values.before ?? []).entries()) {
    const other = await gateway(resolve(root), redis.url, `chunks-before-${i}:`)
    gateways.push(other)
    targets.push({
      label: `Tollgate (before: ${root}), Redis, limits on`,
      url: `${other.url}/v2/chat/completions`,
      pid: other.child.pid ?? 0,
      key: (await other.createKey({ tier: 'On' })).key,
    })
  }
  const load = loadavg()
    .map((n) => n.toFixed(2))
    .join(', ')
  const samples = new Map<Target, Array<{ call: number; chunk: number; reads: number; writes: number }>>(
    targets.map((t) => [t, []]),
  )
  for (let round = 0; round <= ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      const short = await burst(target, SHORT)
      const long = await burst(target, LONG)
      const per = (of: (c: Cost) => number): number => (of(long) - of(short)) / (LONG - SHORT)
      const chunk = per((c) => c.cpuMs)
      if (round > 0)
        samples.get(target)?.push({
          call: short.cpuMs - SHORT * chunk,
          chunk,
          reads: per((c) => c.reads),
          writes: per((c) => c.writes),
        })
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
  const hopChunk = median((samples.get(targets[0] as Target) ?? []).map((s) => s.chunk))
  process.stdout.write(
    `${STREAMS} streams a burst from ${CONCURRENCY} clients, of ${SHORT} and of ${LONG} content chunks, ` +
      `${ROUNDS} rounds after a warm-up; medians. Load average at the start: ${load}.\n\n` +
      '| Path | CPU µs per chunk | ÷ hop | added over the hop, µs per chunk | CPU ms per stream, less its chunks | reads / writes per chunk |\n|---|---|---|---|---|---|\n',
  )
  for (const target of targets) {
    const rows = samples.get(target) ?? []
    const chunk = median(rows.map((s) => s.chunk))
    const call = median(rows.map((s) => s.call))
    const io = `${fmt(median(rows.map((s) => s.reads)), 2)} / ${fmt(median(rows.map((s) => s.writes)), 2)}`
    process.stdout.write(
      `| ${target.label} | ${fmt(chunk * 1000, 1)} | ${fmt(chunk / hopChunk, 2)} | ${target === targets[0] ? '–' : fmt((chunk - hopChunk) * 1000, 1)} | ${fmt(call, 3)} | ${io} |\n`,
    )
  }
} finally {
  for (const gw of gateways) await gw.stop()
  await Promise.all([hop.stop(), upstream.stop()])
  await redis.kill()
}

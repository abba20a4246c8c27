// The latency a caller feels, side by side in one run (`node bench/latency.ts`): the same chat
// completions straight to bench/compare/fast-upstream.ts ("direct"), through a bare
// http-proxy-3 hop (bench/compare/bare-hop.ts), through Portkey's open-source gateway from
// npm (no auth, no limits; installed on demand into a cache directory outside the repository,
// never a dependency of Tollgate), and through Tollgate on each store with plan limits on and off.
//
// One request at a time (the method of the independent llm-gateway-bench): ROUNDS rounds of
// CALLS sequential calls on one keep-alive connection per target, the targets interleaved
// within each round (their order rotated from round to round) so the machine's load drifts
// over all alike; JSON (request sent to the last byte) and SSE (request sent to the first
// content token, and to the stream's end). A path's figure is the median of its round medians,
// and the p99 of all its calls; "added" is that less direct's, and "× hop" its ratio to the
// bare hop's added latency in the same run. Then, unless --no-closed, a closed loop
// (autocannon, 50 connections) for throughput, JSON and SSE, as a ratio to the hop.
//
// With --before <checkout>, Tollgate from that checkout (a worktree of the last release, say)
// runs too, on each store with limits on, in the same rounds: a before/after in one run.
//
//   node bench/latency.ts [--rounds 7] [--calls 25] [--no-closed] [--no-portkey] [--seconds 3] [--root <checkout>] [--before <checkout>]
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs, promisify } from 'node:util'
import type { RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { startBenchGateway, startChild } from './compare.ts'
import { machine } from './machine.ts'
import { chatBody, closedLoop, fmt } from './proxy-rig.ts'

const run = promisify(execFile)
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    calls: { type: 'string', default: '25' },
    seconds: { type: 'string', default: '3' },
    'no-closed': { type: 'boolean', default: false },
    'no-portkey': { type: 'boolean', default: false },
    root: { type: 'string' },
    before: { type: 'string' },
  },
})
const ROUNDS = Number(args.rounds)
const CALLS = Number(args.calls)
const SECONDS = Number(args.seconds)
const CONNECTIONS = 50
const MODEL = 'bench-chat'
/** The Portkey release measured; the bench installs exactly this one. */
export const PORTKEY_VERSION = '1.15.2'
const PORTKEY_DIR = join(homedir(), '.cache', 'tollgate-bench', 'portkey')

interface Target {
  readonly label: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  /** Set when the target cannot stream here (the reason is printed). */
  sseBroken?: string
}

interface Samples {
  json: number[][]
  ttft: number[][]
  sseEnd: number[][]
}

const PAYLOAD = { json: chatBody(MODEL, 16), sse: chatBody(MODEL, 16, true) }

/** One call on the target's own keep-alive agent: ms to the first content token (SSE) and to the end. */
function call(
  target: Target,
  agent: http.Agent,
  stream: boolean,
): Promise<{ ok: boolean; first: number; end: number; why?: string }> {
  const url = new URL(target.url)
  const payload = stream ? PAYLOAD.sse : PAYLOAD.json
  const t0 = performance.now()
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...target.headers,
        },
      },
      (res) => {
        let first = NaN
        let text = ''
        res.on('data', (chunk: Buffer) => {
          if (stream && Number.isNaN(first) && chunk.includes('"content":" ')) first = performance.now() - t0
          if (res.statusCode !== 200 && text.length < 500) text += chunk.toString('utf8')
        })
        res.on('end', () => {
          const end = performance.now() - t0
          const ok = res.statusCode === 200 && (!stream || !Number.isNaN(first))
          resolve({ ok, first: stream ? first : end, end, ...(ok ? {} : { why: `${res.statusCode} ${text}` }) })
        })
        res.on('error', (e) => resolve({ ok: false, first: NaN, end: NaN, why: e.message }))
      },
    )
    req.on('error', (e) => resolve({ ok: false, first: NaN, end: NaN, why: e.message }))
    req.end(payload)
  })
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2
}
const quantile = (rounds: readonly number[][], q: number): number => {
  const all = rounds.flat().sort((a, b) => a - b)
  return all[Math.min(all.length - 1, Math.max(0, Math.ceil(q * all.length) - 1))] ?? NaN
}
const p99 = (rounds: readonly number[][]): number => quantile(rounds, 0.99)
const medianOfMedians = (rounds: readonly number[][]): number => median(rounds.map(median))

/** A free loopback port (Portkey takes its port on the command line). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** Portkey's gateway from npm, installed once into PORTKEY_DIR; null (and why) when it cannot be. */
async function startPortkey(
  upstream: string,
): Promise<{ target: Target; stop(): Promise<void> } | { skipped: string }> {
  const entry = join(PORTKEY_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js')
  if (!existsSync(entry)) {
    mkdirSync(PORTKEY_DIR, { recursive: true })
    try {
      await run(
        'npm',
        [
          'install',
          '--prefix',
          PORTKEY_DIR,
          '--no-audit',
          '--no-fund',
          '--ignore-scripts',
          `@portkey-ai/gateway@${PORTKEY_VERSION}`,
        ],
        { timeout: 180_000 },
      )
    } catch (error) {
      return { skipped: `npm could not install @portkey-ai/gateway@${PORTKEY_VERSION}: ${(error as Error).message}` }
    }
  }
  const port = await freePort()
  const child = spawn(process.execPath, [entry, `--port=${port}`, '--headless'], {
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => (log = (log + c).slice(-4000)))
  child.stderr.setEncoding('utf8').on('data', (c: string) => (log = (log + c).slice(-4000)))
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 20_000)
    const check = (): void => {
      if (log.includes('Ready for connections')) {
        clearTimeout(timer)
        resolve(true)
      }
    }
    child.stdout.on('data', check)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve(false)
    })
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((end) => child.once('exit', end))
    child.kill('SIGTERM')
    await exited
  }
  if (!ready) {
    await stop()
    return { skipped: `Portkey did not start: ${log.slice(-300)}` }
  }
  return {
    target: {
      label: `Portkey OSS ${PORTKEY_VERSION} (no auth, no limits)`,
      url: `http://127.0.0.1:${port}/v1/chat/completions`,
      headers: {
        authorization: 'Bearer sk-bench',
        'x-portkey-provider': 'openai',
        'x-portkey-custom-host': `${upstream}/v1`,
      },
    },
    stop,
  }
}

function startGateway(
  store: 'embedded' | 'redis',
  upstream: string,
  redisUrl: string,
  root: string | undefined,
  prefix: string,
): Promise<RunningTollgate> {
  return startBenchGateway(store, redisUrl, root, (doc) => {
    doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream}/v1`, maxSockets: 1024 } }
    doc.resourceBackend = 'upstream'
    doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
    ;(doc.store as Record<string, unknown>).keyPrefix = prefix
  })
}

/** Closed loop at CONNECTIONS connections for SECONDS: 2xx per second. */
async function closedLoopRate(target: Target, stream: boolean): Promise<number> {
  const result = await closedLoop({
    url: target.url,
    body: stream ? PAYLOAD.sse : PAYLOAD.json,
    headers: target.headers,
    connections: CONNECTIONS,
    seconds: SECONDS,
  })
  return result['2xx'] / result.duration
}

const redis = await startPrivateRedis()
const upstream = await startChild('fast-upstream.ts', [])
const hop = await startChild('bare-hop.ts', [upstream.url])
const portkey = args['no-portkey'] ? { skipped: '--no-portkey' } : await startPortkey(upstream.url)
const gateways: RunningTollgate[] = []
const notes: string[] = []
try {
  const targets: Target[] = [
    { label: 'direct to the upstream', url: `${upstream.url}/v1/chat/completions`, headers: {} },
    { label: 'bare http-proxy-3 hop', url: `${hop.url}/v1/chat/completions`, headers: {} },
  ]
  if ('target' in portkey) targets.push(portkey.target)
  else notes.push(`Portkey skipped: ${portkey.skipped}`)
  const sides = [
    { root: args.root, label: '', tiers: ['Off', 'On'] as const, prefix: 'latency:' },
    ...(args.before === undefined
      ? []
      : [{ root: args.before, label: ' (before)', tiers: ['On'] as const, prefix: 'latency-before:' }]),
  ]
  for (const side of sides) {
    for (const store of ['embedded', 'redis'] as const) {
      const gw = await startGateway(store, upstream.url, redis.url, side.root, side.prefix)
      gateways.push(gw)
      for (const tier of side.tiers) {
        const { key } = await gw.createKey({ tier })
        targets.push({
          label: `Tollgate${side.label}, ${store}, limits ${tier === 'On' ? 'on' : 'off'}`,
          url: `${gw.url}/v2/chat/completions`,
          headers: { authorization: `Bearer ${key}` },
        })
      }
    }
  }
  const agents = new Map(targets.map((t) => [t, new http.Agent({ keepAlive: true, maxSockets: 1 })]))
  // Warm-up (JIT, keep-alive pools), and whether each target streams here at all.
  for (const target of targets) {
    const agent = agents.get(target) as http.Agent
    for (let i = 0; i < 50; i++) await call(target, agent, false)
    const probe = await call(target, agent, true)
    if (!probe.ok) {
      target.sseBroken = probe.why?.replace(/\s+/g, ' ').slice(0, 160) ?? 'failed'
      notes.push(`${target.label}: a streamed call fails here (${target.sseBroken}); its SSE cells are empty.`)
    } else for (let i = 0; i < 20; i++) await call(target, agent, true)
  }
  const samples = new Map<Target, Samples>(targets.map((t) => [t, { json: [], ttft: [], sseEnd: [] }]))
  let failures = 0
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length] as Target)
    for (const target of order) {
      const agent = agents.get(target) as http.Agent
      const s = samples.get(target) as Samples
      const json: number[] = []
      const ttft: number[] = []
      const end: number[] = []
      for (let i = 0; i < CALLS; i++) {
        const r = await call(target, agent, false)
        if (r.ok) json.push(r.end)
        else failures++
      }
      if (target.sseBroken === undefined) {
        for (let i = 0; i < CALLS; i++) {
          const r = await call(target, agent, true)
          if (r.ok) {
            ttft.push(r.first)
            end.push(r.end)
          } else failures++
        }
      }
      s.json.push(json)
      s.ttft.push(ttft)
      s.sseEnd.push(end)
    }
  }
  for (const agent of agents.values()) agent.destroy()

  const throughput = new Map<Target, { json: number; sse: number }>()
  if (!args['no-closed']) {
    for (const target of targets.slice(1)) {
      const json = await closedLoopRate(target, false)
      const sse = target.sseBroken === undefined ? await closedLoopRate(target, true) : NaN
      throughput.set(target, { json, sse })
    }
  }

  const [direct, hopTarget] = targets as [Target, Target]
  const stat = (t: Target, field: keyof Samples): { med: number; p99: number } => {
    const s = (samples.get(t) as Samples)[field]
    return { med: medianOfMedians(s), p99: p99(s) }
  }
  const fields = ['json', 'ttft'] as const
  const base = Object.fromEntries(fields.map((f) => [f, stat(direct, f)])) as Record<
    (typeof fields)[number],
    { med: number; p99: number }
  >
  const hopAdded = Object.fromEntries(
    fields.map((f) => {
      const h = stat(hopTarget, f)
      return [f, { med: h.med - base[f].med, p99: h.p99 - base[f].p99 }]
    }),
  ) as typeof base
  const cell = (t: Target, f: (typeof fields)[number]): string => {
    if (f === 'ttft' && t.sseBroken !== undefined) return '– | – | – | –'
    const { med, p99: tail } = stat(t, f)
    if (t === direct) return `${fmt(med, 2)} / ${fmt(tail, 2)} | – | – | –`
    const added = med - base[f].med
    const addedTail = tail - base[f].p99
    const x = (a: number, h: number): string => (t === hopTarget ? '1.00' : fmt(a / h, 2))
    return `${fmt(med, 2)} / ${fmt(tail, 2)} | +${fmt(added, 2)} / +${fmt(addedTail, 2)} | **${x(added, hopAdded[f].med)}** / ${x(addedTail, hopAdded[f].p99)} | ${t === hopTarget ? '–' : `+${fmt(added - hopAdded[f].med, 2)}`}`
  }
  // The fastest tenth of the calls: on a loaded machine most calls wait for a core, and these
  // show the path's own cost better than the median does.
  const p10 = (t: Target): number => quantile((samples.get(t) as Samples).json, 0.1)
  const fastest = (t: Target): string => {
    if (t === direct) return `${fmt(p10(t), 2)} ms`
    const added = p10(t) - p10(direct)
    return `+${fmt(added, 2)} (${fmt(added / (p10(hopTarget) - p10(direct)), 2)})`
  }
  const hopTp = throughput.get(hopTarget)
  const tp = (t: Target): string => {
    const r = throughput.get(t)
    if (r === undefined || hopTp === undefined) return '– | –'
    const sse = Number.isNaN(r.sse) ? '–' : `${fmt(r.sse)} (${fmt(r.sse / hopTp.sse, 2)})`
    return `${fmt(r.json)} (${fmt(r.json / hopTp.json, 2)}) | ${sse}`
  }
  const portkeyTarget = targets.find((t) => t.label.startsWith('Portkey'))
  const versusPortkey =
    portkeyTarget === undefined
      ? []
      : [
          '',
          `Portkey's added JSON latency (median) ÷ each Tollgate path's, this run (the target is ≥ 2): ${targets
            .filter((t) => t.label.startsWith('Tollgate'))
            .map((t) => {
              const pk = stat(portkeyTarget, 'json').med - base.json.med
              return `${t.label.replace('Tollgate', '').replace(/^,? ?/, '')} ${fmt(pk / (stat(t, 'json').med - base.json.med), 2)}`
            })
            .join('; ')}.`,
        ]
  const out = [
    `One request at a time: ${ROUNDS} rounds × ${CALLS} sequential calls per target and per kind, the targets interleaved (order rotated each round); median of round medians / p99 of all calls, ms. "Added" is over direct; "× hop" is the added latency's ratio to the bare hop's; "− hop" is the added latency less the hop's.`,
    '',
    '| Path | JSON ms p50 / p99 | added | × hop | − hop | JSON added p10 (× hop) | SSE first token ms p50 / p99 | added | × hop | − hop | closed loop JSON req/s (× hop) | SSE streams/s (× hop) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...targets.map((t) => `| ${t.label} | ${cell(t, 'json')} | ${fastest(t)} | ${cell(t, 'ttft')} | ${tp(t)} |`),
    ...versusPortkey,
    '',
    `Closed loop: autocannon, ${CONNECTIONS} connections, ${SECONDS} s per target and kind, after the sequential rounds.${failures > 0 ? ` Failed calls in the rounds: ${failures}.` : ''}`,
    ...notes.map((n) => `- ${n}`),
    '',
    `Date: ${new Date().toISOString()}`,
    machine(),
  ]
  process.stdout.write(`${out.join('\n')}\n`)
} finally {
  for (const gw of gateways) await gw.stop()
  if ('stop' in portkey) await portkey.stop()
  await hop.stop()
  await upstream.stop()
  await redis.kill()
}

// What the proxy-path benchmarks (streaming.ts, concurrent-streams.ts, upload.ts) share:
// an upstream process (test/helpers/upstream-process.ts, OpenAI-compatible, paced by
// --tokens-per-second) and a real `tollgate serve` whose openai backend points at it;
// readings of a process's memory and CPU from /proc; percentiles and number formatting;
// the chat body and the autocannon closed loop of the load benches (compare.ts, latency.ts,
// workers.ts).
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../test/helpers/gateway.ts'

/** Limits far above any load: a tier with none of the five dimensions and one with all of them. */
const HIGH = 1_000_000_000
export const LIMITS_OFF_AND_ON = {
  defaultTier: 'Off',
  tiers: {
    Off: { default: {} },
    On: { default: { rpm: HIGH, tpm: HIGH, input_tpm: HIGH, output_tpm: HIGH, quota: HIGH * 1000 } },
  },
} as const

/** The public model name; the deployment leaves it as is, so the gateway rewrites no event. */
export const CHAT_MODEL = 'bench-chat'
export const AUDIO_MODEL = 'whisper-large-v3'

export interface Rig {
  readonly upstream: UpstreamProcess
  readonly gateway: RunningTollgate
  /** An API key on a tier without limits: the limiter returns at once. */
  readonly key: string
  stop(): Promise<void>
}

export interface RigOptions {
  readonly tokensPerSecond: number
  /** Changes to the gateway's configuration after the rig's own. */
  readonly config?: (doc: Record<string, unknown>) => void
  /** Node flags and environment for the gateway process (default: none, and this one's). */
  readonly execArgv?: readonly string[]
  readonly env?: Readonly<Record<string, string>>
}

/**
 * Starts the upstream, then a gateway in front of it. The upstream spools multipart
 * uploads to its os.tmpdir() and never deletes them, so it gets a TMPDIR of its own,
 * removed with everything else by stop().
 */
export async function startRig(options: RigOptions): Promise<Rig> {
  const upstreamTmp = mkdtempSync(join(tmpdir(), 'tollgate-bench-upstream-'))
  const savedTmp = process.env.TMPDIR
  process.env.TMPDIR = upstreamTmp
  let upstream: UpstreamProcess
  try {
    upstream = await startUpstream(['--tokens-per-second', String(options.tokensPerSecond)])
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = savedTmp
  }
  let gateway: RunningTollgate
  try {
    gateway = await startTollgate({
      ...(options.execArgv === undefined ? {} : { execArgv: options.execArgv }),
      ...(options.env === undefined ? {} : { env: options.env }),
      config: (doc) => {
        doc.plans = { defaultTier: 'Off', tiers: { Off: { default: {} } } }
        // Raised from the default 256 so that 500 streams do not queue for a socket.
        ;(doc.backends as Record<string, unknown>).upstream = {
          type: 'openai',
          baseUrl: `${upstream.url}/v1`,
          maxSockets: 1024,
        }
        doc.models = [
          { name: CHAT_MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] },
          { name: AUDIO_MODEL, kind: 'audio', deployments: [{ backend: 'upstream' }] },
        ]
        options.config?.(doc)
      },
    })
  } catch (err) {
    await upstream.stop()
    rmSync(upstreamTmp, { recursive: true, force: true })
    throw err
  }
  const { key } = await gateway.createKey({})
  return {
    upstream,
    gateway,
    key,
    async stop() {
      try {
        await gateway.stop()
      } finally {
        await upstream.stop()
        // startTollgate makes <tmp>/tollgate-e2e-*/data; the whole directory is the run's.
        rmSync(dirname(gateway.dataDir), { recursive: true, force: true })
        rmSync(upstreamTmp, { recursive: true, force: true })
      }
    },
  }
}

export interface ProcMemory {
  /** Resident set now, bytes. */
  readonly rss: number
  /** Peak resident set since start or since resetPeak(), bytes. */
  readonly hwm: number
}

export function memoryOf(pid: number): ProcMemory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') }
}

/** Resets VmHWM to the current RSS (Linux: "5" to clear_refs). False when not permitted. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

/** CPU time (user + system) the process has used, in milliseconds. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name (which may hold spaces) start at state, field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12])
  return ticks * 10 // USER_HZ is 100 on Linux
}

/**
 * `calls` chat calls to `url` (a JSON body, sent as is) from `concurrency` clients, each
 * waiting for its reply, read whole, before the next. Any status but 200 throws.
 */
export async function sendChatCalls(
  url: string,
  key: string | undefined,
  json: string,
  calls: number,
  concurrency: number,
): Promise<void> {
  const headers = {
    'content-type': 'application/json',
    ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
  }
  let left = calls
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) {
        const res = await fetch(url, { method: 'POST', headers, body: json })
        await res.arrayBuffer()
        if (res.status !== 200) throw new Error(`${url} answered ${res.status}`)
      }
    }),
  )
}

/** What a call cost the gateway process: CPU ms, and the read and write system calls it made (/proc/<pid>/io). */
export interface CallCost {
  readonly cpuMs: number
  readonly reads: number
  readonly writes: number
}

/** The read and write system calls (read, readv, write, writev, sendmsg...) the process has made. */
export function syscallsOf(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8')
  return { reads: Number(/^syscr: (\d+)/m.exec(io)?.[1]), writes: Number(/^syscw: (\d+)/m.exec(io)?.[1]) }
}

/**
 * The gateway's CPU and system calls per call over `calls` chat calls (sendChatCalls) to its
 * /v2 endpoint (from /proc: CPU in 10 ms ticks).
 */
export async function chatCallCost(
  gw: RunningTollgate,
  key: string,
  body: Record<string, unknown>,
  calls: number,
  concurrency: number,
): Promise<CallCost> {
  const pid = gw.child.pid
  if (pid === undefined) throw new Error('the gateway has no pid')
  const [cpu, io] = [cpuMsOf(pid), syscallsOf(pid)]
  await sendChatCalls(`${gw.url}/v2/chat/completions`, key, JSON.stringify(body), calls, concurrency)
  const after = syscallsOf(pid)
  return {
    cpuMs: (cpuMsOf(pid) - cpu) / calls,
    reads: (after.reads - io.reads) / calls,
    writes: (after.writes - io.writes) / calls,
  }
}

/** The gateway's CPU ms per call over `calls` chat calls (chatCallCost). */
export async function chatCpuPerCall(
  gw: RunningTollgate,
  key: string,
  body: Record<string, unknown>,
  calls: number,
  concurrency: number,
): Promise<number> {
  return (await chatCallCost(gw, key, body, calls, concurrency)).cpuMs
}

/** Samples the process's RSS every `everyMs` until stop(); returns the largest seen. */
export function sampleRss(pid: number, everyMs = 50): { stop(): number } {
  let peak = memoryOf(pid).rss
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, memoryOf(pid).rss)
    } catch {
      /* gone */
    }
  }, everyMs)
  return {
    stop() {
      clearInterval(timer)
      try {
        peak = Math.max(peak, memoryOf(pid).rss)
      } catch {
        /* gone */
      }
      return peak
    },
  }
}

export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
}

export const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export const mib = (bytes: number, digits = 1): string => fmt(bytes / 2 ** 20, digits)

export const pause = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms))

/** The chat call the load benches send: a short prompt, a reply of at most `maxTokens`. */
export const chatBody = (model: string, maxTokens: number, stream = false): string =>
  JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Benchmark: say hello in five words.' }],
    max_tokens: maxTokens,
    ...(stream ? { stream: true } : {}),
  })

const AUTOCANNON = join(createRequire(import.meta.url).resolve('autocannon/package.json'), '../autocannon.js')
const run = promisify(execFile)

export interface ClosedLoop {
  readonly url: string
  /** Sent as is with every POST. */
  readonly body: string
  /** Besides content-type: application/json (an authorization, a provider's). */
  readonly headers?: Readonly<Record<string, string>>
  readonly connections: number
  readonly seconds: number
}

/** What autocannon's `-j` prints, the fields the benches read. */
export interface ClosedLoopResult {
  readonly '2xx': number
  readonly non2xx: number
  readonly errors: number
  readonly timeouts: number
  /** Seconds. */
  readonly duration: number
  /** Milliseconds. */
  readonly latency: { readonly p50: number; readonly p99: number }
}

/**
 * A closed loop of POSTs: autocannon's CLI in a process of its own (so that the load does
 * not share this process's event loop), `connections` keep-alive connections for `seconds`.
 */
export async function closedLoop(load: ClosedLoop): Promise<ClosedLoopResult> {
  const headers = Object.entries({ 'content-type': 'application/json', ...load.headers }).flatMap(([k, v]) => [
    '-H',
    `${k}=${v}`,
  ])
  const { stdout } = await run(
    process.execPath,
    [
      AUTOCANNON,
      '-j',
      '-n',
      '-c',
      String(load.connections),
      '-d',
      String(load.seconds),
      '-m',
      'POST',
      ...headers,
      '-b',
      load.body,
      load.url,
    ],
    { maxBuffer: 64 * 2 ** 20 },
  )
  return JSON.parse(stdout) as ClosedLoopResult
}

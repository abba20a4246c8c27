// What each protocol translation costs the gateway on a stream, next to the plain OpenAI
// relay in the same run: the time to first token it adds (through the gateway, less straight
// from the same upstream) and the gateway's CPU per streamed event, each also as a ratio to
// the relay's. The upstreams are minimal fakes (bench/translation/fakes.ts) that stream
// EVENTS text events as fast as the socket takes them, so the gateway's own work decides.
// One `tollgate serve` (a child, as the other benches run it) holds every backend; rows
// alternate in rounds, one stream in flight, so drift in the machine's load hits all alike.
//
//   node bench/translation.ts              prints a Markdown section
//   node bench/translation.ts --profile    also a CPU profile of the gateway (node --cpu-prof):
//                                          each row's top self-time functions, and the gateway
//                                          files nearest the leaf of their stacks
//   node bench/translation.ts --keep-profile   the same, and leaves the .cpuprofile (its path on stderr)
//   npm run bench -- translation           writes it into bench/results.md
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import http, { type IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { fmt, quantile } from './proxy-rig.ts'
import { FIRST_TOKEN, startFake, STREAM_END, type FakeUpstream, type UpstreamKind } from './translation/fakes.ts'

/** Text events each upstream streams per call. */
const EVENTS = 200
/** Rounds over all rows, and streams per row per round. */
const ROUNDS = 20
const PER_ROUND = 16
const WARMUP = 30

type Caller = 'openai' | 'anthropic'

/** The gateway's backend for each upstream kind, given its fake's URL. */
const BACKENDS: Readonly<Record<UpstreamKind, (url: string) => Record<string, unknown>>> = {
  openai: (url) => ({ type: 'openai', baseUrl: url }),
  anthropic: (url) => ({ type: 'anthropic', baseUrl: url }),
  gemini: (url) => ({ type: 'gemini', baseUrl: url }),
  // Signed as for AWS (the fake checks nothing): SigV4's cost is part of the row.
  bedrock: (url) => ({ type: 'bedrock', region: 'us-east-1', endpoint: url }),
}
/** Credentials in the form AWS's are, for the bedrock backend to sign with. */
const AWS_ENV = {
  AWS_ACCESS_KEY_ID: 'AKIABENCHBEDROCK0001',
  AWS_SECRET_ACCESS_KEY: 'bench/secret/access/key/for/translation0',
}

interface Row {
  readonly caller: Caller
  readonly upstream: UpstreamKind
}

/** One line a translation; the first is the baseline every ratio is taken to. */
const ROWS: readonly Row[] = [
  { caller: 'openai', upstream: 'openai' },
  { caller: 'openai', upstream: 'anthropic' },
  { caller: 'openai', upstream: 'gemini' },
  { caller: 'openai', upstream: 'bedrock' },
  { caller: 'anthropic', upstream: 'openai' },
  { caller: 'anthropic', upstream: 'anthropic' },
]

const CALLER_LABEL: Readonly<Record<Caller, string>> = {
  openai: 'OpenAI chat',
  anthropic: 'Anthropic Messages',
}
const labelOf = (row: Row): string => `${CALLER_LABEL[row.caller]} → ${row.upstream}`
const modelOf = (upstream: UpstreamKind): string => `bench-${upstream}`

interface Target {
  readonly url: URL
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** The last bytes of a whole stream in the caller's protocol. */
  readonly end: string
}

/** A streamed call as each caller makes it (the body carries the row's model). */
function gatewayTarget(gw: RunningTollgate, key: string, row: Row): Target {
  const model = modelOf(row.upstream)
  const messages = [{ role: 'user', content: 'Benchmark: stream the fixed reply.' }]
  if (row.caller === 'openai')
    return {
      url: new URL('/v2/chat/completions', gw.url),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, messages, max_tokens: 1024, stream: true }),
      end: 'data: [DONE]',
    }
  return {
    url: new URL('/v1/messages', gw.url),
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model, messages, max_tokens: 1024, stream: true }),
    end: 'event: message_stop',
  }
}

/** The same upstream read straight, as the gateway's backend calls it. */
function directTarget(fake: FakeUpstream, upstream: UpstreamKind): Target {
  const path = {
    openai: '/chat/completions',
    anthropic: '/messages',
    gemini: `/models/${modelOf('gemini')}:streamGenerateContent?alt=sse`,
    bedrock: `/model/${modelOf('bedrock')}/converse-stream`,
  }[upstream]
  return {
    url: new URL(fake.url + path),
    headers: { 'content-type': 'application/json' },
    body: '{}',
    end: STREAM_END[upstream],
  }
}

interface StreamReading {
  readonly ttftMs: number
  readonly whole: boolean
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })

/** One streamed call: the time to the first token's bytes, and whether every event and the end arrived. */
function stream(target: Target): Promise<StreamReading> {
  return new Promise((done, fail) => {
    const started = performance.now()
    const req = http.request(target.url, { method: 'POST', agent, headers: target.headers }, (res: IncomingMessage) => {
      let ttft = NaN
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
        if (Number.isNaN(ttft) && text.includes(FIRST_TOKEN)) ttft = performance.now() - started
      })
      res.on('end', () => {
        const tokens = text.match(/Ztok\d+/g)?.length ?? 0
        done({ ttftMs: ttft, whole: res.statusCode === 200 && tokens === EVENTS && text.includes(target.end) })
      })
      res.on('error', fail)
    })
    req.on('error', fail)
    req.end(target.body)
  })
}

interface Tally {
  /** TTFT of every stream through the gateway, and straight from the upstream. */
  readonly ttft: number[]
  readonly direct: number[]
  /** Per round: the gateway's CPU µs per event. */
  readonly cpuByRound: number[]
  streams: number
  broken: number
}

const newTally = (): Tally => ({ ttft: [], direct: [], cpuByRound: [], streams: 0, broken: 0 })
const median = (values: readonly number[]): number =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  )

async function block(target: Target, count: number, into: number[], tally: Tally): Promise<void> {
  for (let i = 0; i < count; i++) {
    const reading = await stream(target)
    if (!reading.whole) tally.broken++
    into.push(reading.ttftMs)
  }
}

interface Window {
  readonly fromUs: number
  readonly toUs: number
}
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

/**
 * The CPU time all of the process's threads have run, in ms, to the nanosecond (what its
 * process.cpuUsage() would say, user and system together): /proc/<pid>/stat counts 10 ms
 * ticks, too coarse for a few µs per event.
 */
function cpuMsOf(pid: number): number {
  let ns = 0
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ', 1)[0])
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1e6
}

export async function benchTranslation(options: { profile?: boolean; keepProfile?: boolean } = {}): Promise<string> {
  const kinds = [...new Set(ROWS.map((row) => row.upstream))]
  const fakes = new Map<UpstreamKind, FakeUpstream>()
  for (const kind of kinds) fakes.set(kind, await startFake(kind, EVENTS))
  const profDir = options.profile === true ? mkdtempSync(join(tmpdir(), 'tollgate-bench-prof-')) : undefined
  const windows = new Map<Row, Window[]>(ROWS.map((row) => [row, []]))
  let gw: RunningTollgate | undefined
  const tallies = new Map<Row, Tally>(ROWS.map((row) => [row, newTally()]))
  try {
    gw = await startTollgate({
      dropRequestLogs: true,
      env: AWS_ENV,
      ...(profDir === undefined
        ? {}
        : { execArgv: ['--cpu-prof', '--cpu-prof-interval=200', `--cpu-prof-dir=${profDir}`] }),
      config: (doc) => {
        doc.plans = { defaultTier: 'Off', tiers: { Off: { default: {} } } }
        doc.backends = {
          ...(doc.backends as object),
          ...Object.fromEntries(kinds.map((kind) => [`bench-${kind}`, BACKENDS[kind](fakes.get(kind)?.url ?? '')])),
        }
        doc.models = kinds.map((kind) => ({
          name: modelOf(kind),
          kind: 'chat',
          deployments: [{ backend: `bench-${kind}` }],
        }))
      },
    })
    const { key } = await gw.createKey({})
    const pid = gw.child.pid ?? 0
    const targets = new Map(ROWS.map((row) => [row, gatewayTarget(gw as RunningTollgate, key, row)]))
    const direct = (row: Row): Target => directTarget(fakes.get(row.upstream) as FakeUpstream, row.upstream)
    const unused = newTally()
    for (const row of ROWS) {
      await block(targets.get(row) as Target, WARMUP, [], unused)
      await block(direct(row), 5, [], unused)
    }
    if (unused.broken > 0) throw new Error(`${unused.broken} warm-up streams came incomplete`)
    for (let round = 0; round < ROUNDS; round++) {
      // Each round starts with another row, so none is always first after a pause.
      const order = ROWS.map((_, i) => ROWS[(i + round) % ROWS.length] as Row)
      for (const row of order) {
        const tally = tallies.get(row) as Tally
        await block(direct(row), PER_ROUND, tally.direct, tally)
        const from = nowUs()
        const cpu0 = cpuMsOf(pid)
        await block(targets.get(row) as Target, PER_ROUND, tally.ttft, tally)
        tally.cpuByRound.push((1000 * (cpuMsOf(pid) - cpu0)) / (PER_ROUND * EVENTS))
        tally.streams += PER_ROUND
        windows.get(row)?.push({ fromUs: from, toUs: nowUs() })
      }
    }
  } finally {
    await gw?.stop()
    for (const fake of fakes.values()) await fake.close()
    agent.destroy()
  }

  const p99 = (values: readonly number[]): number =>
    quantile(
      [...values].sort((x, y) => x - y),
      0.99,
    )
  const base = tallies.get(ROWS[0] as Row) as Tally
  /**
   * Added TTFT at quantile q of all the row's streams, through the gateway less straight. The
   * 10th percentile is given beside the median: on a loaded machine most first tokens wait for
   * a turn on a core, and the fastest tenth shows the path's own cost better.
   */
  const at = (values: readonly number[], q: number): number =>
    quantile(
      [...values].sort((x, y) => x - y),
      q,
    )
  const added = (t: Tally, q = 0.5): number => at(t.ttft, q) - at(t.direct, q)
  /** CPU: the median over rounds of the row's figure divided by the baseline's in the same round. */
  const cpuRatio = (t: Tally): number => median(t.cpuByRound.map((v, round) => v / (base.cpuByRound[round] ?? NaN)))
  const table = ROWS.map((row) => {
    const t = tallies.get(row) as Tally
    const cells = [
      labelOf(row),
      String(t.streams),
      fmt(median(t.direct), 2),
      fmt(median(t.ttft), 2),
      fmt(p99(t.ttft), 2),
      fmt(added(t), 2),
      `**${fmt(added(t) / added(base), 2)}**`,
      fmt(added(t, 0.1), 2),
      `**${fmt(added(t, 0.1) / added(base, 0.1), 2)}**`,
      fmt(median(t.cpuByRound), 1),
      `**${fmt(cpuRatio(t), 2)}**`,
      String(t.broken),
    ]
    return `| ${cells.join(' | ')} |`
  })
  const section = [
    '## Translations on a stream, against the plain relay (bench/translation.ts)',
    '',
    `Each row: ${ROUNDS * PER_ROUND} streamed calls of ${EVENTS} text events from a minimal fake of the upstream`,
    '(bench/translation/fakes.ts: the frames built once, one write per event; the first token, 2 ms,',
    'then the rest as fast as the socket takes them), through one `tollgate serve` (tier without',
    `limits) holding every backend, one stream in flight; the rows alternate in ${ROUNDS} rounds of ${PER_ROUND}`,
    `after ${WARMUP} warm-up streams each, and before each gateway block the same number straight from`,
    'the same fake ("direct"). TTFT is',
    'from sending the request to the bytes of the first token; "added" is the median (and the 10th',
    'percentile: on a loaded machine most first tokens wait for a turn on a core, the fastest tenth',
    "shows the path's own cost better) through the gateway less the same straight from the fake, and",
    "its ratio is to the first row's, the plain OpenAI relay. CPU is the time the gateway process's",
    'threads ran (/proc/<pid>/task/*/schedstat, as its process.cpuUsage() would count it) over each',
    'block, per upstream event: the median over the rounds, and the median over the rounds of its',
    "ratio to the relay's in the same round (so a burst of load in one round moves it little).",
    'Fakes, client and gateway share the machine.',
    ...(profDir === undefined
      ? []
      : ['', "This run was profiled (`--cpu-prof`, 200 µs): its CPU figures include the profiler's cost."]),
    '',
    '| Caller → upstream | Streams | Direct TTFT p50 ms | Via gateway TTFT p50 ms | p99 ms | Added TTFT p50 ms | × relay | Added TTFT p10 ms | × relay | Gateway CPU µs/event | × relay | Incomplete |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...table,
  ]
  if (profDir !== undefined) {
    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
    if (file === undefined) throw new Error('the gateway wrote no profile')
    const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as Profile
    if (options.keepProfile === true) process.stderr.write(`profile kept: ${join(profDir, file)}\n`)
    else rmSync(profDir, { recursive: true, force: true })
    for (const row of ROWS)
      section.push('', `### Profile: ${labelOf(row)}`, '', profileOf(profile, windows.get(row) ?? []))
  }
  return section.join('\n')
}

interface Profile {
  readonly nodes: ReadonlyArray<{
    readonly id: number
    readonly children?: readonly number[]
    readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  }>
  readonly startTime: number
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

const ROOT = resolve(dirname(import.meta.dirname))
const TOP = 12

/** The samples in `windows`: the functions with the most self time, and the src/ file nearest each sample's leaf. */
function profileOf(profile: Profile, windows: readonly Window[]): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const fileOf = (id: number): string => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at)?.callFrame.url ?? ''
      if (url.includes('/src/')) return relative(ROOT, url.replace(/^file:\/\//, ''))
    }
    return '(no src/ frame: I/O callbacks, GC, timers)'
  }
  const self = new Map<string, number>()
  const files = new Map<string, number>()
  let counted = 0
  let at = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    if (!windows.some((w) => at >= w.fromUs && at <= w.toUs)) continue
    const id = profile.samples[i] ?? -1
    const frame = byId.get(id)?.callFrame
    if (frame === undefined || frame.functionName === '(idle)') continue
    const where =
      frame.url === '' ? '' : ` ${frame.url.replace(/^.*\/(src|node_modules)\//, '$1/')}:${frame.lineNumber + 1}`
    const name = `${frame.functionName || '(anonymous)'}${where}`
    self.set(name, (self.get(name) ?? 0) + 1)
    const file = fileOf(id)
    files.set(file, (files.get(file) ?? 0) + 1)
    counted++
  }
  const top = (counts: Map<string, number>): string[] =>
    [...counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([name, n]) => `| ${((100 * n) / counted).toFixed(1)} % | \`${name.replace(/\|/g, '\\|')}\` |`)
  return [
    `| Self time, of ${counted} non-idle samples | Function |`,
    '|---|---|',
    ...top(self),
    '',
    '| Share, with what it calls | Nearest gateway file in the stack |',
    '|---|---|',
    ...top(files),
  ].join('\n')
}

if (import.meta.main) {
  const keepProfile = process.argv.includes('--keep-profile')
  const profile = keepProfile || process.argv.includes('--profile')
  process.stdout.write(`${await benchTranslation({ profile, keepProfile })}\n`)
}

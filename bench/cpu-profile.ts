// Where the gateway's CPU goes on the hot path: a CPU profile (node --cpu-prof) of a gateway
// on Redis (a redis-server of its own; --embedded: on its embedded store) answering JSON chat completions from the built-in mock
// under 8 clients (--concurrency) with a tier that has all five limits set, summarised as the functions with
// the most self time. Only the samples taken while the measured requests ran are counted
// (the profile's clock and this process's are both the monotonic clock), not the boot and
// not the warm-up. Shares are of the non-idle samples in that window. With --upstream the
// gateway has no mock: its openai backend points at bench/compare/fast-upstream.ts, the
// path `npm run bench -- compare` measures (the relay, not the mock's reply building).
//
// --callers <function> adds where that function's samples come from: the stacks above it,
// nine frames deep (--depth), with their shares of its samples.
//
// After the self-time table, the samples by the gateway file nearest the leaf of their stack.
//
// --alloc profiles allocation instead of time (bench/alloc-sampler.ts, V8's sampling heap
// profiler with collected objects kept): bytes allocated per call, the functions that
// allocate most themselves, and the gateway's own functions (src/) charged with everything
// allocated below them in the stack that no other src/ function is nearer to.
//
// --interval <µs> is the sampling interval (Node's default, 1000). --keep <file> writes the profile and the measured window ({ from, to, profile }) for other analyses.
//
// --no-limits gives the tier no limits: the path without the limiter's admission and settle.
// --embedded runs the gateway on its embedded store (no Redis): counters in memory, SQLite.
// --stream sends streams of 136 content chunks instead (each event its own write upstream:
// bench/compare/chunk-upstream.ts, implies --upstream): where a streamed chunk's CPU goes.
//
//   node bench/cpu-profile.ts [--root <checkout>] [--requests 6000] [--top 10] [--upstream] [--no-limits] [--embedded] [--stream] [--concurrency 8] [--callers writev [--depth 9]] [--alloc] [--interval 1000] [--keep <file>]
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir, loadavg } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { execFile } from 'node:child_process'
import { startTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { startChild } from './compare.ts'

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: resolve(import.meta.dirname, '..') },
    requests: { type: 'string', default: '6000' },
    top: { type: 'string', default: '10' },
    upstream: { type: 'boolean', default: false },
    callers: { type: 'string' },
    depth: { type: 'string', default: '9' },
    alloc: { type: 'boolean', default: false },
    'no-limits': { type: 'boolean', default: false },
    embedded: { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '8' },
    keep: { type: 'string' },
    interval: { type: 'string', default: '1000' },
    stream: { type: 'boolean', default: false },
  },
})
if (values.stream) values.upstream = true
const ROOT = resolve(values.root)
const HIGH = 1_000_000_000
const MODEL = values.upstream ? 'bench-chat' : 'Mistral-Small-24B-Instruct-2501'
const CONCURRENCY = Number(values.concurrency)

interface ProfileNode {
  readonly id: number
  readonly children?: readonly number[]
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: readonly ProfileNode[]
  readonly startTime: number
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

async function load(url: string, key: string, requests: number): Promise<void> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello in five words.' }],
    max_tokens: values.stream ? 136 : 5,
    ...(values.stream ? { stream: true } : {}),
  })
  let left = requests
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) {
        const res = await fetch(`${url}/v2/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body,
        })
        await res.arrayBuffer()
        if (res.status !== 200) throw new Error(`the gateway answered ${res.status}`)
      }
    }),
  )
}

function frameName(frame: ProfileNode['callFrame']): string {
  const path = frame.url.startsWith('file://') ? relative(ROOT, frame.url.slice('file://'.length)) : frame.url
  const where = frame.url === '' ? '' : ` ${path}:${frame.lineNumber + 1}`
  return `${frame.functionName || '(anonymous)'}${where}`
}

/** A profile's nodes by id, and each node's parent. */
function indexed(profile: Profile): { parent: Map<number, number>; byId: Map<number, ProfileNode> } {
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  return { parent, byId: new Map(profile.nodes.map((n) => [n.id, n])) }
}

/** The stacks (callers, `depth` frames up) of the samples whose own frame is `name`. */
function callersOf(profile: Profile, fromUs: number, toUs: number, name: string, depth = 9): string {
  const { parent, byId } = indexed(profile)
  const stacks = new Map<string, number>()
  let total = 0
  let at = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    const id = profile.samples[i] ?? -1
    const node = byId.get(id)
    if (at < fromUs || at > toUs || node === undefined || node.callFrame.functionName !== name) continue
    const chain: string[] = []
    for (let up = parent.get(id); up !== undefined && chain.length < depth; up = parent.get(up)) {
      const frame = byId.get(up)?.callFrame
      if (frame !== undefined) chain.push(frameName(frame))
    }
    const key = chain.join(' ← ')
    stacks.set(key, (stacks.get(key) ?? 0) + 1)
    total++
  }
  const rows = [...stacks.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8)
  return [
    `Callers of \`${name}\` (${total} samples):`,
    ...rows.map(([stack, n]) => `- ${((100 * n) / total).toFixed(1)} %: ${stack}`),
  ].join('\n')
}

const run = promisify(execFile)
async function redisCli(url: string, ...args: string[]): Promise<string> {
  const { port } = new URL(url)
  return (await run('redis-cli', ['-p', port, ...args])).stdout
}

/** `INFO commandstats` as commands per call: "evalsha 3.00, get 0.01" (the total first). */
function commandsPerCall(info: string, calls: number): string {
  const counts = [...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)]
    .map(([, name, n]) => [name ?? '', Number(n) / calls] as const)
    .filter(([name]) => name !== 'info' && name !== 'config')
    .sort((a, b) => b[1] - a[1])
  const total = counts.reduce((sum, [, n]) => sum + n, 0)
  return [`${total.toFixed(2)} in all`, ...counts.map(([name, n]) => `${name} ${n.toFixed(2)}`)].join(', ')
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

function summarise(profile: Profile, fromUs: number, toUs: number, top: number): string {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]))
  const self = new Map<string, number>()
  let at = profile.startTime
  let counted = 0
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    if (at < fromUs || at > toUs) continue
    const frame = frames.get(profile.samples[i] ?? -1)
    if (frame === undefined || frame.functionName === '(idle)') continue
    const name = frameName(frame)
    self.set(name, (self.get(name) ?? 0) + 1)
    counted++
  }
  const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
  return [
    `| Self time, share of ${counted} non-idle samples | Function |`,
    '|---|---|',
    ...rows.map(([name, n]) => `| ${((100 * n) / counted).toFixed(1)} % | \`${name.replace(/\|/g, '\\|')}\` |`),
  ].join('\n')
}

/**
 * The samples by the gateway file nearest the leaf of their stack: what each part of the
 * gateway costs with the library and Node work it calls synchronously. Samples with no src/
 * frame (I/O callbacks into Node's and ioredis's parsers, GC, timers) are counted apart.
 */
function byFile(profile: Profile, fromUs: number, toUs: number, top: number): string {
  const { parent, byId } = indexed(profile)
  const nearest = new Map<number, string>()
  const fileOf = (id: number): string => {
    const known = nearest.get(id)
    if (known !== undefined) return known
    const frame = byId.get(id)?.callFrame
    const up = parent.get(id)
    const file =
      frame !== undefined && frame.url.includes('/src/')
        ? relative(ROOT, frame.url.replace(/^file:\/\//, ''))
        : up === undefined
          ? '(no src/ frame)'
          : fileOf(up)
    nearest.set(id, file)
    return file
  }
  const files = new Map<string, number>()
  /** The samples outside src/ by the callback they run in: the frames just below the root. */
  const outside = new Map<string, number>()
  const entryOf = (id: number): string => {
    const chain: string[] = []
    for (let up: number | undefined = id; up !== undefined; up = parent.get(up)) {
      const frame = byId.get(up)?.callFrame
      if (frame !== undefined && frame.functionName !== '(root)') chain.push(frameName(frame))
    }
    return chain.reverse().slice(0, 3).join(' → ')
  }
  let at = profile.startTime
  let counted = 0
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    const id = profile.samples[i] ?? -1
    if (at < fromUs || at > toUs || byId.get(id)?.callFrame.functionName === '(idle)') continue
    const file = fileOf(id)
    files.set(file, (files.get(file) ?? 0) + 1)
    if (file === '(no src/ frame)') outside.set(entryOf(id), (outside.get(entryOf(id)) ?? 0) + 1)
    counted++
  }
  const rows = [...files.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
  const entries = [...outside.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
  return [
    `| Share of ${counted} non-idle samples, with what it calls | Nearest gateway file in the stack |`,
    '|---|---|',
    ...rows.map(([file, n]) => `| ${((100 * n) / counted).toFixed(1)} % | \`${file}\` |`),
    '',
    '| Share of all non-idle samples | With no src/ frame: the callback they run in (the frames below the root) |',
    '|---|---|',
    ...entries.map(([chain, n]) => `| ${((100 * n) / counted).toFixed(1)} % | \`${chain.replace(/\|/g, '\\|')}\` |`),
  ].join('\n')
}

interface AllocNode {
  readonly callFrame: ProfileNode['callFrame']
  readonly selfSize: number
  readonly children: readonly AllocNode[]
}

/** A sampling heap profile as bytes per call: by own allocation, and by the nearest src/ function. */
function summariseAlloc(head: AllocNode, calls: number, top: number): string {
  const self = new Map<string, number>()
  const ours = new Map<string, number>()
  let total = 0
  const walk = (node: AllocNode, nearest: string): void => {
    const name = frameName(node.callFrame)
    const mine = node.callFrame.url.includes('/src/') ? name : nearest
    total += node.selfSize
    self.set(name, (self.get(name) ?? 0) + node.selfSize)
    ours.set(mine, (ours.get(mine) ?? 0) + node.selfSize)
    for (const child of node.children) walk(child, mine)
  }
  walk(head, '(outside src/)')
  const kb = (bytes: number): string => (bytes / calls / 1024).toFixed(2)
  const table = (title: string, rows: Map<string, number>): string[] => [
    `| ${title} | KB per call | share |`,
    '|---|---|---|',
    ...[...rows.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, n]) => `| \`${name.replace(/\|/g, '\\|')}\` | ${kb(n)} | ${((100 * n) / total).toFixed(1)} % |`),
  ]
  return [
    `Allocated: ${kb(total)} KB per call (sampled every 1 KB, collected objects included)\n`,
    ...table('Allocating function (self)', self),
    '',
    ...table('Nearest gateway function (src/) in the stack', ours),
  ].join('\n')
}

/** Sends SIGUSR2 to the gateway and waits (bounded) for the sampler's `alloc-sampler <word>` line. */
async function toggleSampler(
  gw: { child: { kill(s: NodeJS.Signals): boolean }; output(): string },
  word: string,
): Promise<void> {
  const seen = gw.output().split(`alloc-sampler ${word}`).length
  gw.child.kill('SIGUSR2')
  for (let i = 0; i < 600; i++) {
    if (gw.output().split(`alloc-sampler ${word}`).length > seen) return
    await new Promise((done) => setTimeout(done, 50))
  }
  throw new Error(`the gateway's allocation sampler did not say "${word}" within 30 s`)
}

const redis = values.embedded ? undefined : await startPrivateRedis()
const upstream = values.upstream
  ? await startChild(values.stream ? 'chunk-upstream.ts' : 'fast-upstream.ts', [])
  : undefined
const profDir = mkdtempSync(join(tmpdir(), 'tollgate-cpu-prof-'))
const allocFile = join(profDir, 'alloc.heapprofile')
const gw = await startTollgate({
  root: ROOT,
  execArgv: [
    '--max-semi-space-size=8',
    ...(values.alloc
      ? ['--import', join(import.meta.dirname, 'alloc-sampler.ts')]
      : ['--cpu-prof', '--cpu-prof-dir', profDir, '--cpu-prof-interval', values.interval]),
  ],
  env: {
    ...(redis === undefined ? {} : { REDIS_URL: redis.url }),
    TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret',
    ...(values.alloc ? { TOLLGATE_ALLOC_PROFILE: allocFile } : {}),
  },
  dropRequestLogs: true,
  config: (doc) => {
    doc.plans = {
      defaultTier: 'On',
      tiers: {
        On: {
          default: values['no-limits']
            ? {}
            : { rpm: HIGH, tpm: HIGH, input_tpm: HIGH, output_tpm: HIGH, quota: HIGH * 1000 },
        },
      },
    }
    if (upstream === undefined) {
      ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond: 1_000_000 }
    } else {
      doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
      doc.resourceBackend = 'upstream'
      doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
    }
    ;(doc.store as Record<string, unknown>).keyPrefix = 'cpu-profile:'
  },
})
let from: number
let to: number
let commands = 'none (embedded store)'
try {
  const { key } = await gw.createKey({ tier: 'On' })
  await load(gw.url, key, values.stream ? 50 : 500) // warm-up: the mock's tokenizer, the JIT
  if (redis !== undefined) await redisCli(redis.url, 'CONFIG', 'RESETSTAT')
  if (values.alloc) await toggleSampler(gw, 'on')
  from = nowUs()
  await load(gw.url, key, Number(values.requests))
  to = nowUs()
  if (values.alloc) await toggleSampler(gw, 'written')
  if (redis !== undefined)
    commands = commandsPerCall(await redisCli(redis.url, 'INFO', 'commandstats'), Number(values.requests))
} finally {
  await gw.stop()
  await redis?.kill()
  await upstream?.stop()
}
console.log(
  `checkout: ${ROOT}; ${values.requests} ${values.stream ? 'streamed (136 chunks)' : 'JSON'} chat calls, ${redis === undefined ? 'embedded store' : 'Redis'}, limits ${values['no-limits'] ? 'off' : 'on'}, ${upstream === undefined ? 'mock backend' : 'fast upstream'}; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
)
console.log(`Redis commands per call: ${commands}\n`)
if (values.alloc) {
  const { head } = JSON.parse(readFileSync(allocFile, 'utf8')) as { head: AllocNode }
  console.log(summariseAlloc(head, Number(values.requests), Number(values.top)))
} else {
  const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
  if (file === undefined) throw new Error('the gateway wrote no profile')
  const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as Profile
  if (values.keep !== undefined) writeFileSync(values.keep, JSON.stringify({ from, to, profile }))
  console.log(summarise(profile, from, to, Number(values.top)))
  console.log(`\n${byFile(profile, from, to, Number(values.top))}`)
  if (values.callers !== undefined)
    console.log(`\n${callersOf(profile, from, to, values.callers, Number(values.depth))}`)
}
rmSync(profDir, { recursive: true, force: true })

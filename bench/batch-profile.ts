// Where a batch line's CPU goes: a gateway under `node --cpu-prof` runs one batch of
// --lines lines (the shape of test/batches/ten-thousand.ts: four models, the mock
// backend at 1,000,000 tokens a second, generous limits) on its embedded store (--redis: on
// a redis-server of its own). Printed: the gateway's CPU per line (user + system, from
// /proc, between the batch's creation and its completion), the functions with the most
// self time in that window, and the samples by the gateway file nearest the leaf.
// --root <checkout> runs another checkout (a before/after in one run: run both, swap order).
// BATCH_PROFILE_DATA=1 prints the gateway's data directory (its queue.db keeps each request's
// started_at and finished_at: where a line's wall time goes).
//
//   node bench/batch-profile.ts [--lines 1000] [--top 20] [--redis] [--root <checkout>] [--no-prof] [--keep <file.cpuprofile>]
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { toFile } from 'openai'
import { untilBatch } from '../test/helpers/batches.ts'
import { startTollgate } from '../test/helpers/gateway.ts'
import { sdkClient } from '../test/helpers/sdk-gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: resolve(import.meta.dirname, '..') },
    lines: { type: 'string', default: '1000' },
    top: { type: 'string', default: '20' },
    redis: { type: 'boolean', default: false },
    'no-prof': { type: 'boolean', default: false },
    keep: { type: 'string' },
  },
})
const ROOT = resolve(values.root)
const N = Number(values.lines)
const MODELS = ['Mistral-Small-24B-Instruct-2501', 'gpt-oss-120b', 'Llama-3.3-70B-Instruct', 'Qwen3-30B-A3B-FP8']

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

/** The process's CPU so far, ms (utime + stime from /proc; clock ticks are 10 ms on Linux). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/**
 * The main thread's time on a CPU and waiting for one (ms, /proc/<pid>/task/<pid>/schedstat):
 * the rest of the wall time it was asleep, waiting for an event (a timer, I/O, a message).
 */
function schedMs(pid: number): { onCpu: number; runnable: number } {
  const [run = 0, wait = 0] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ').map(Number)
  return { onCpu: run / 1e6, runnable: wait / 1e6 }
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

function frameName(frame: ProfileNode['callFrame']): string {
  const url = frame.url.replace(/^file:\/\//, '')
  const path = url.startsWith('/') ? relative(ROOT, url) : url
  return `${frame.functionName || '(anonymous)'}${path === '' ? '' : ` ${path}:${frame.lineNumber + 1}`}`
}

/** Self time by function, and samples by the nearest src/ file, in [fromUs, toUs]. */
function summarise(profile: Profile, fromUs: number, toUs: number, top: number): string {
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const fileOf = (id: number | undefined): string => {
    for (let up = id; up !== undefined; up = parent.get(up)) {
      const url = byId.get(up)?.callFrame.url ?? ''
      if (url.includes('/src/')) return relative(ROOT, url.replace(/^file:\/\//, ''))
    }
    return '(no src/ frame)'
  }
  const self = new Map<string, number>()
  const files = new Map<string, number>()
  let at = profile.startTime
  let counted = 0
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    const id = profile.samples[i] ?? -1
    const frame = byId.get(id)?.callFrame
    if (at < fromUs || at > toUs || frame === undefined || frame.functionName === '(idle)') continue
    const name = frameName(frame)
    self.set(name, (self.get(name) ?? 0) + 1)
    const file = fileOf(id)
    files.set(file, (files.get(file) ?? 0) + 1)
    counted++
  }
  const table = (head: string, rows: Map<string, number>): string[] => [
    `| ${head} | share |`,
    '|---|---|',
    ...[...rows.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, n]) => `| \`${name.replace(/\|/g, '\\|')}\` | ${((100 * n) / counted).toFixed(1)} % |`),
  ]
  return [
    `${counted} non-idle samples`,
    '',
    ...table('Self time', self),
    '',
    ...table('Nearest gateway file in the stack (with what it calls)', files),
  ].join('\n')
}

const redis = values.redis ? await startPrivateRedis() : undefined
const profDir = mkdtempSync(join(tmpdir(), 'tollgate-batch-prof-'))
const gw = await startTollgate({
  root: ROOT,
  execArgv: values['no-prof'] ? [] : ['--cpu-prof', '--cpu-prof-dir', profDir],
  env: {
    ...(redis === undefined ? {} : { REDIS_URL: redis.url }),
    TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret',
  },
  dropRequestLogs: true,
  config: (doc) => {
    doc.plans = {
      defaultTier: 'Bulk',
      tiers: {
        Bulk: {
          default: { rpm: 1_000_000, tpm: 100_000_000 },
          batches: { priceMultiplier: 0.5 },
          storageCaps: { queuedRequests: 100_000 },
        },
      },
    }
    Object.assign((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}, { tokensPerSecond: 1_000_000 })
    ;(doc.store as Record<string, unknown>).keyPrefix = 'batch-profile:'
  },
})
const took = { cpu: 0, wall: 0, fromUs: 0, toUs: 0, onCpu: 0, runnable: 0 }
try {
  const { key } = await gw.createKey({ tier: 'Bulk' })
  const client = sdkClient(gw, key)
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `l-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: {
        model: MODELS[i % MODELS.length],
        messages: [{ role: 'user', content: `line ${i} ${'x '.repeat(i % 7)}` }],
        max_tokens: 3,
      },
    }),
  )
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  const pid = gw.child.pid ?? 0
  const cpu0 = cpuMs(pid)
  const sched0 = schedMs(pid)
  took.fromUs = nowUs()
  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const done = await untilBatch(client, created.id, (b) => b.status === 'completed' || b.status === 'failed', {
    ms: 1_200_000,
    stepMs: 500,
  })
  took.toUs = nowUs()
  took.cpu = cpuMs(pid) - cpu0
  const sched = schedMs(pid)
  took.onCpu = sched.onCpu - sched0.onCpu
  took.runnable = sched.runnable - sched0.runnable
  took.wall = (took.toUs - took.fromUs) / 1000
  if (done.status !== 'completed' || done.request_counts?.completed !== N)
    throw new Error(`the batch ended ${JSON.stringify(done)}`)
  if (process.env.BATCH_PROFILE_DATA === '1') console.log(`data: ${gw.dataDir}`)
} finally {
  await gw.stop()
  await redis?.kill()
}
console.log(
  `checkout: ${ROOT}; ${N} lines, ${redis === undefined ? 'embedded store' : 'Redis'}: ${(took.wall / 1000).toFixed(1)} s, gateway CPU ${(took.cpu / N).toFixed(2)} ms a line${values['no-prof'] ? '' : ' (profiled)'}; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
)
// Where the main thread's wall time went: a pace set by a wait shows as time asleep; one set
// by the machine (other processes on its cores) as time runnable, waiting for a CPU.
const share = (ms: number): string => `${((100 * ms) / took.wall).toFixed(0)} %`
console.log(
  `main thread: on a CPU ${share(took.onCpu)}, runnable and waiting for a CPU ${share(took.runnable)}, asleep ${share(took.wall - took.onCpu - took.runnable)} of ${(took.wall / 1000).toFixed(1)} s`,
)
if (!values['no-prof']) {
  // One profile a thread: the main thread's is the one with the most samples; the others
  // (the tokenizer's worker) are printed as their non-idle samples in the window.
  const profiles = readdirSync(profDir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => JSON.parse(readFileSync(join(profDir, f), 'utf8')) as Profile)
    .sort((a, b) => b.samples.length - a.samples.length)
  const [main, ...others] = profiles
  if (main === undefined) throw new Error('the gateway wrote no profile')
  for (const other of others)
    console.log(`another thread: ${summarise(other, took.fromUs, took.toUs, 8).replace(/\n/g, '\n  ')}`)
  console.log(`\nThe main thread: ${summarise(main, took.fromUs, took.toUs, Number(values.top))}`)
}
if (values.keep !== undefined) {
  const file = readdirSync(profDir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort((a, b) => statSync(join(profDir, b)).size - statSync(join(profDir, a)).size)[0]
  if (file !== undefined) renameSync(join(profDir, file), values.keep)
  console.log(`profile: ${values.keep} (window ${took.fromUs}..${took.toUs} µs)`)
}
rmSync(profDir, { recursive: true, force: true })

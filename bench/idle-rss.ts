// Memory at rest: `npm start` (bin/tollgate serve on config/default.yaml, with the start
// script's Node flags), its RSS 10 s after it says it listens, read from /proc/<pid>/status
// (VmRSS), next to a bare Node HTTP server measured the same way in the same run. Each is
// started --runs times (default 3), alternating, and the median shown; the machine's load
// is printed with the figures, since other work on it moves them.
//
//   node bench/idle-rss.ts [--runs N] [--settle-ms 10000] [--root <checkout>] [--node-flags='--flag ...']
//
// The Node flags are by default those of the checkout's `npm start` (package.json), for
// the gateway and the bare server alike: measured as an operator runs it.
// --root measures another checkout's gateway (its bin/tollgate, its config/default.yaml):
// the "before" of bench/results.md was made so. Each gateway gets a fresh data directory
// and free ports, so the default configuration runs unchanged otherwise.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    'settle-ms': { type: 'string', default: '10000' },
    root: { type: 'string', default: resolve(import.meta.dirname, '..') },
    'node-flags': { type: 'string' },
  },
})
const RUNS = Number(values.runs)
const SETTLE_MS = Number(values['settle-ms'])
const ROOT = resolve(values.root)

/** The flags `npm start` gives node: `node <flags> bin/tollgate serve`. */
function startFlags(root: string): string {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: { start?: string } })
    .scripts?.start
  const flags = start === undefined ? undefined : /^node((?:\s+--\S+)*)\s+bin\/tollgate serve$/.exec(start)?.[1]
  if (flags === undefined)
    throw new Error(`${root}/package.json: no start script of the form "node [--flags] bin/tollgate serve"`)
  return flags
}
const START_FLAGS = (values['node-flags'] ?? startFlags(ROOT)).split(' ').filter((f) => f !== '')

const BARE_SERVER = `require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', () => console.log('listening'))`

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer()
    probe.once('error', fail)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => done(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1])
  return kb / 1024
}

/** Resolves once the child's stdout carries `marker`; rejects if it exits first. */
function readyOn(child: ChildProcess, marker: string): Promise<void> {
  return new Promise((done, fail) => {
    let seen = ''
    let errors = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes(marker)) done()
      if (seen.length > 65_536) seen = seen.slice(-1024)
    })
    child.stderr?.on('data', (chunk: Buffer) => (errors += chunk.toString()))
    child.once('exit', (code) => fail(new Error(`exited (${code}) before it was ready: ${errors || seen}`)))
  })
}

async function measure(child: ChildProcess, marker: string): Promise<number> {
  try {
    await readyOn(child, marker)
    await new Promise((done) => setTimeout(done, SETTLE_MS))
    return rssMb(child.pid ?? 0)
  } finally {
    const exited = new Promise((done) => child.once('exit', done))
    child.kill('SIGTERM')
    await exited
  }
}

async function gateway(): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-idle-rss-'))
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(await freePort()),
    METRICS_PORT: String(await freePort()),
    TOLLGATE_DATA_DIR: dataDir,
  }
  // The default configuration as it is: no other file, no Redis from the environment.
  for (const name of ['TOLLGATE_CONFIG', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS']) delete env[name]
  const child = spawn(process.execPath, [...START_FLAGS, join(ROOT, 'bin/tollgate'), 'serve'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  try {
    return await measure(child, 'tollgate listening')
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

async function bare(): Promise<number> {
  const child = spawn(process.execPath, [...START_FLAGS, '-e', BARE_SERVER], { stdio: ['ignore', 'pipe', 'pipe'] })
  return measure(child, 'listening')
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN

// A first start compiles what changed since the last (Node's compile cache, which bin/tollgate
// turns on, loads the TypeScript stripper then): not what an operator's restarts hold.
await gateway()
const gateways: number[] = []
const bares: number[] = []
for (let i = 0; i < RUNS; i++) {
  gateways.push(await gateway())
  bares.push(await bare())
}
const g = median(gateways)
const b = median(bares)
console.log(`checkout: ${ROOT}; node flags: ${START_FLAGS.join(' ') || '(none)'}`)
console.log(`idle RSS ${SETTLE_MS / 1000} s after ready, MB (median of ${RUNS}; each run):`)
console.log(`  tollgate serve, default config: ${g.toFixed(1)} (${gateways.map((x) => x.toFixed(1)).join(', ')})`)
console.log(`  bare node http server:          ${b.toFixed(1)} (${bares.map((x) => x.toFixed(1)).join(', ')})`)
console.log(`  gateway minus bare:             ${(g - b).toFixed(1)}; ratio ${(g / b).toFixed(2)}`)
console.log(
  `load average: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
)

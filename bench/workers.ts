// `tollgate serve --workers 2` against one process (issue 40 item 2): closed-loop throughput
// of non-streaming chat completions, limits on (five dimensions, never refusing), both
// gateways on one private loopback Redis, the built-in mock backend answering at once.
// One process and two workers alternate ROUNDS times in the same run (the median run of
// each is reported, with the range), so drift in the machine's load hits both alike. The
// load is autocannon's CLI in a process of its own, CONNECTIONS keep-alive connections:
// on a 2-core machine it, Redis and the gateway share the two cores, which is the point
// of the note the section ends with.
//
//   node bench/workers.ts          prints the Markdown section (npm run bench -- workers records it)
import { readFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { chatBody, closedLoop, fmt, LIMITS_OFF_AND_ON } from './proxy-rig.ts'

const CONNECTIONS = 50
const WARMUP_S = 2
const MEASURE_S = 8
const ROUNDS = 3
const MODEL = 'Mistral-Small-24B-Instruct-2501'

interface Result {
  readonly rps: number
  /** The gateway's processes' CPU time (the primary's and its workers', user + system) per call answered, µs. */
  readonly cpuUs: number
  /** Of which the primary's (serve --workers: it hands connections over and serves /metrics). */
  readonly primaryUs: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
}

/** CPU seconds (user + system) a process has used, from /proc (Linux; clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** The gateway's processes: the one it started as, and its workers when it has them. */
function pidsOf(gw: RunningTollgate): number[] {
  const line = gw.logs().find((l) => l.msg === 'tollgate listening')
  return [gw.child.pid as number, ...((line?.workerPids as number[] | undefined) ?? [])]
}

async function load(gw: RunningTollgate, key: string, seconds: number, connections = CONNECTIONS): Promise<Result> {
  const pids = pidsOf(gw)
  const cpuBefore = pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
  const primaryBefore = cpuSeconds(pids[0] as number)
  const r = await closedLoop({
    url: `${gw.url}/v2/chat/completions`,
    body: chatBody(MODEL, 5),
    headers: { authorization: `Bearer ${key}` },
    connections,
    seconds,
  })
  return {
    rps: r['2xx'] / r.duration,
    cpuUs: ((pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0) - cpuBefore) * 1e6) / Math.max(1, r['2xx'] + r.non2xx),
    primaryUs:
      pids.length > 1 ? ((cpuSeconds(pids[0] as number) - primaryBefore) * 1e6) / Math.max(1, r['2xx'] + r.non2xx) : 0,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.non2xx + r.errors + r.timeouts,
  }
}

const median = (results: readonly Result[]): Result => {
  const sorted = [...results].sort((a, b) => a.rps - b.rps)
  return sorted[Math.floor(sorted.length / 2)] as Result
}

export async function benchWorkers(): Promise<string> {
  const loadAtStart = loadavg()[0] ?? 0
  const redis = await startPrivateRedis()
  const gateways: Record<'one' | 'two', RunningTollgate | undefined> = { one: undefined, two: undefined }
  try {
    for (const [name, args] of [
      ['one', []],
      ['two', ['--workers', '2']],
    ] as const) {
      gateways[name] = await startTollgate({
        args,
        env: { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' },
        dropRequestLogs: true,
        config: (doc) => {
          doc.plans = LIMITS_OFF_AND_ON
          ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond: 1_000_000 }
          ;(doc.store as Record<string, unknown>).keyPrefix = `bench-${name}:`
          ;(doc.limits as Record<string, unknown>).insuranceInstances = name === 'two' ? 2 : 1
        },
      })
    }
    const one = gateways.one as RunningTollgate
    const two = gateways.two as RunningTollgate
    const keys = {
      one: (await one.createKey({ tier: 'On' })).key,
      two: (await two.createKey({ tier: 'On' })).key,
    }
    const runs: Record<'one' | 'two' | 'half', Result[]> = { one: [], two: [], half: [] }
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of ['one', 'two'] as const) {
        const gw = name === 'one' ? one : two
        await load(gw, keys[name], WARMUP_S)
        runs[name].push(await load(gw, keys[name], MEASURE_S))
      }
      // The control: one process at half the connections, what each of two workers gets.
      await load(one, keys.one, WARMUP_S, CONNECTIONS / 2)
      runs.half.push(await load(one, keys.one, MEASURE_S, CONNECTIONS / 2))
    }
    const a = median(runs.one)
    const b = median(runs.two)
    const c = median(runs.half)
    const range = (rs: readonly Result[]): string =>
      `${fmt(Math.min(...rs.map((r) => r.rps)))}–${fmt(Math.max(...rs.map((r) => r.rps)))}`
    const ratios = runs.two.map((r, i) => r.rps / (runs.one[i]?.rps ?? r.rps)).sort((x, y) => x - y)
    return [
      '## Every core: `serve --workers 2` against one process (bench/workers.ts)',
      '',
      `Closed loop, ${CONNECTIONS} keep-alive connections (autocannon in a process of its own), non-streaming chat`,
      `completions (max_tokens 5), limits on (5 dimensions, never refusing), both gateways on one private loopback`,
      `Redis, the mock backend answering at once. One process and two workers alternate ${ROUNDS} times`,
      `(${MEASURE_S} s measured after ${WARMUP_S} s warm-up each); the median run is shown with the range. Cores: ${availableParallelism()}.`,
      '',
      '| Gateway | req/s (median) | req/s (range) | CPU µs per call (median run) | p50 ms | p99 ms | non-2xx |',
      '|---|---|---|---|---|---|---|',
      `| one process (\`npm start\`) | ${fmt(a.rps)} | ${range(runs.one)} | ${fmt(a.cpuUs)} | ${fmt(a.p50)} | ${fmt(a.p99)} | ${runs.one.reduce((n, r) => n + r.errors, 0)} |`,
      `| \`serve --workers 2\` | ${fmt(b.rps)} | ${range(runs.two)} | ${fmt(b.cpuUs)} (primary ${fmt(b.primaryUs)}) | ${fmt(b.p50)} | ${fmt(b.p99)} | ${runs.two.reduce((n, r) => n + r.errors, 0)} |`,
      `| one process, ${CONNECTIONS / 2} connections (a worker's share) | ${fmt(c.rps)} | ${range(runs.half)} | ${fmt(c.cpuUs)} | ${fmt(c.p50)} | ${fmt(c.p99)} | ${runs.half.reduce((n, r) => n + r.errors, 0)} |`,
      '',
      `**Ratio, two workers to one process: ${fmt(b.rps / a.rps, 2)}** (median runs; per round ${ratios.map((r) => fmt(r, 2)).join(', ')}).`,
      `Load average (1 min) at the start ${fmt(loadAtStart, 1)}, at the end ${fmt(loadavg()[0] ?? 0, 1)}: above the core count, other`,
      'work takes the cores the second worker would use, and the ratio says little about the gateway.',
      "CPU per call (the gateway's processes, the primary's included) moves less with the machine's load than",
      'throughput does: two workers can double one process only where it is the same for both.',
    ].join('\n')
  } finally {
    await Promise.all(Object.values(gateways).map((gw) => gw?.stop()))
    await redis.kill()
  }
}

if (import.meta.main) process.stdout.write(`${await benchWorkers()}\n`)

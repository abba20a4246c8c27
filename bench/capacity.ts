// The cost of the deployment-capacity check per upstream call: acquire + release on
// Redis, against no capacity configured (a deployment that declared and learned nothing
// costs no store call at all), on a redis-server of the bench's own.
//
//   node bench/capacity.ts            prints a Markdown section
//
// And capacity use (issue #36): two deployments with fixed request windows (`window: fixed`; 10 and 20 calls
// per 4 s window, 300 ms a call, OpenAI's x-ratelimit-* headers; test/e2e/fixed-windows.ts)
// behind an embedded gateway that learned both figures; bursts of 40 /v2 calls into fresh
// windows (the share of the room of 30 served: target ≥ 90 %), backlogs of 40 drop-in
// /queue calls (windows taken: target ⌈40 / 30⌉ + 1 = 3), and the upstreams' 429s after
// learning (target 0), over runs of a given length:
//
//   node bench/capacity.ts use [seconds=60] [runs=3]
import { createDeploymentCapacity } from '../src/capacity/capacity.ts'
import { memoryCapacityStore } from '../src/capacity/memory.ts'
import type { DeploymentCapacity } from '../src/capacity/port.ts'
import { redisCapacityStore } from '../src/capacity/redis.ts'
import { observeResponse } from '../src/capacity/upstream-headers.ts'
import { createRedisClient, pingRedis } from '../src/store/redis-client.ts'
import { fixedWindows } from '../test/e2e/fixed-windows.ts'
import { countCommands, startPrivateRedis } from '../test/limits/helpers.ts'
import { sequential, throughput, type Latency } from './admission.ts'
import { fmt } from './proxy-rig.ts'

const SEQUENTIAL = 20_000
const CONCURRENT = 50_000
const CONCURRENCY = 64
const DECLARED = {
  east: { rpm: 1_000_000_000, tpm: 1_000_000_000, maxConcurrent: 1_000_000 },
  west: { rpm: 1_000_000_000, tpm: 1_000_000_000, weight: 2 },
}
const HEADERS = {
  'x-ratelimit-remaining-requests': '1000000000',
  'x-ratelimit-reset-requests': '1s',
  'x-ratelimit-remaining-tokens': '900000000000',
  'x-ratelimit-reset-tokens': '6m0s',
}

/** One upstream call's worth: acquire, learn from the response headers, release with the real usage. */
async function call(capacity: DeploymentCapacity, ids: readonly string[], teach: boolean): Promise<void> {
  const got = await capacity.acquire(ids, { tokens: 376 })
  if (!got.ok) throw new Error(`refused: ${JSON.stringify(got)}`)
  if (teach) got.lease.observe(observeResponse(200, HEADERS, { now: Date.now() }))
  await got.lease.release({ tokens: 215 })
}

export async function benchCapacity(): Promise<string> {
  const server = await startPrivateRedis()
  const redis = createRedisClient(server.url, { commandTimeoutMs: 2000, name: 'bench' })
  try {
    await pingRedis(redis)
    const store = redisCapacityStore(redis, 'bench:')
    await store.warm()
    const onRedis = createDeploymentCapacity(store, { deployments: DECLARED })
    const undeclared = createDeploymentCapacity(store, {
      deployments: { 'ollama-a': { weight: 1 }, 'ollama-b': { weight: 1 } },
    })
    const inMemory = createDeploymentCapacity(memoryCapacityStore(), { deployments: DECLARED })
    const both = ['east', 'west']
    const free = ['ollama-a', 'ollama-b']

    const sent = countCommands(redis)
    const rounds = 1000
    const perCall = async (
      capacity: DeploymentCapacity,
      ids: readonly string[],
      teach: boolean,
    ): Promise<{ acquire: number; release: number }> => {
      let acquire = 0
      let release = 0
      for (let i = 0; i < rounds; i++) {
        sent.reset()
        const got = await capacity.acquire(ids, { tokens: 376 })
        acquire += sent.count()
        if (!got.ok) throw new Error('refused')
        if (teach) got.lease.observe(observeResponse(200, HEADERS, { now: Date.now() }))
        sent.reset()
        await got.lease.release({ tokens: 215 })
        release += sent.count()
      }
      return { acquire: acquire / rounds, release: release / rounds }
    }
    const tripsDeclared = await perCall(onRedis, both, true)
    const tripsFree = await perCall(undeclared, free, false)
    sent.restore()

    const ping = await sequential(SEQUENTIAL, () => redis.ping())
    const none = await sequential(SEQUENTIAL, () => call(undeclared, free, false))
    const acquireOnly = await sequential(SEQUENTIAL, async () => {
      const got = await onRedis.acquire(both, { tokens: 376 })
      if (got.ok) void got.lease.release({ tokens: 215 })
    })
    const declared = await sequential(SEQUENTIAL, () => call(onRedis, both, true))
    const memory = await sequential(SEQUENTIAL, () => call(inMemory, both, true))
    const rateRedis = await throughput(CONCURRENT, CONCURRENCY, () => call(onRedis, both, true))
    const rateNone = await throughput(CONCURRENT, CONCURRENCY, () => call(undeclared, free, false))
    const pingRate = await throughput(CONCURRENT, CONCURRENCY, () => redis.ping())

    const row = (name: string, l: Latency): string =>
      `| ${name} | ${fmt(l.p50, 1)} | ${fmt(l.p99, 1)} | ${fmt(l.mean, 1)} | ${fmt(l.mean / ping.mean, 2)} |`
    return [
      '## Deployment capacity cost (bench/capacity.ts)',
      '',
      'Per upstream call: acquire among two declared deployments (rpm, tpm, maxConcurrent on one),',
      "observe the response's x-ratelimit-* headers, release with the real usage. One connection.",
      '',
      '| Per call | commands sent on acquire | on release |',
      '|---|---|---|',
      `| declared limits (Redis) | ${fmt(tripsDeclared.acquire, 2)} | ${fmt(tripsDeclared.release, 2)} |`,
      `| nothing declared or learned | ${fmt(tripsFree.acquire, 2)} | ${fmt(tripsFree.release, 2)} |`,
      '',
      `Latency, sequential, ${fmt(SEQUENTIAL)} calls each (microseconds; the last column is the mean in Redis PINGs):`,
      '',
      '| Operation | p50 µs | p99 µs | mean µs | × PING |',
      '|---|---|---|---|---|',
      row('Redis PING (one round trip)', ping),
      row('no capacity configured: acquire + release', none),
      row('declared, Redis: acquire (the call waits on this)', acquireOnly),
      row('declared, Redis: acquire + release', declared),
      row('declared, memory: acquire + release', memory),
      '',
      `Throughput, ${fmt(CONCURRENT)} calls, ${CONCURRENCY} in flight, one process, one connection:`,
      '',
      '| Operation | calls/s |',
      '|---|---|',
      `| Redis PING | ${fmt(pingRate)} |`,
      `| no capacity configured | ${fmt(rateNone)} |`,
      `| declared, Redis: acquire + release | ${fmt(rateRedis)} |`,
    ].join('\n')
  } finally {
    redis.disconnect()
    await server.kill()
  }
}

const USE_WINDOW_MS = 4000
const USE_PER_WINDOW = [10, 20]
const USE_CALLS = 40

interface UseRun {
  readonly shares: number[]
  readonly windows: number[]
  readonly refused: number
  readonly seconds: number
}

/** One run: bursts and backlogs in turn, each into a fresh window, for `seconds`. */
async function useRun(seconds: number): Promise<UseRun> {
  const rig = await fixedWindows({
    windowMs: USE_WINDOW_MS,
    perWindow: USE_PER_WINDOW,
    latencyMs: 300,
    store: 'memory',
  })
  try {
    await rig.learn()
    const learned = rig.refused()
    const started = Date.now()
    const shares: number[] = []
    const windows: number[] = []
    while (Date.now() - started < seconds * 1000) {
      let window = await rig.freshWindow()
      const statuses = await Promise.all(Array.from({ length: USE_CALLS }, (_, i) => rig.call(i)))
      shares.push(statuses.filter((s) => s === 200).length / rig.room)
      window = await rig.freshWindow()
      const ends = await Promise.all(Array.from({ length: USE_CALLS }, (_, i) => rig.queued(i)))
      if (ends.some((e) => e.status !== 200)) throw new Error(`a queued call answered ${JSON.stringify(ends)}`)
      windows.push(Math.floor(Math.max(...ends.map((e) => e.endedAt)) / USE_WINDOW_MS) - window + 1)
    }
    return { shares, windows, refused: rig.refused() - learned, seconds: (Date.now() - started) / 1000 }
  } finally {
    await rig.stop()
  }
}

export async function benchCapacityUse(seconds = 60, runs = 3): Promise<string> {
  const rows: string[] = []
  for (let run = 1; run <= runs; run++) {
    const r = await useRun(seconds)
    rows.push(
      `| ${run} | ${fmt(r.seconds, 0)} | ${r.shares.length} | ${fmt(100 * Math.min(...r.shares), 0)} % | ${fmt(
        (100 * r.shares.reduce((a, b) => a + b, 0)) / r.shares.length,
        1,
      )} % | ${r.windows.join(', ')} (bound ${Math.ceil(USE_CALLS / 30) + 1}) | ${r.refused} |`,
    )
  }
  return [
    '## Deployment capacity use (bench/capacity.ts use)',
    '',
    `Two deployments with fixed request windows (10 and 20 calls per ${USE_WINDOW_MS / 1000} s window, 300 ms a call), an`,
    `embedded gateway that learned both; bursts of ${USE_CALLS} /v2 calls into fresh windows (the share of the room of 30`,
    `served) and backlogs of ${USE_CALLS} drop-in /queue calls (the windows they took), in turn; upstream 429s after learning.`,
    '',
    '| Run | s | bursts | burst share, worst | burst share, mean | backlog windows | upstream 429s after learning |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n')
}

if (import.meta.main) {
  const [mode, seconds, runs] = process.argv.slice(2)
  process.stdout.write(
    `${mode === 'use' ? await benchCapacityUse(Number(seconds ?? 60), Number(runs ?? 3)) : await benchCapacity()}\n`,
  )
}

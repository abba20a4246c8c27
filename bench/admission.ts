// The cost of one admission: Redis round trips and microseconds, on a redis-server of
// the bench's own (loopback, no persistence), and in memory (the embedded store).
//
//   node bench/admission.ts            prints a Markdown section
import { performance } from 'node:perf_hooks'
import type { Redis } from 'ioredis'
import { createLimiter, type ManagedLimiter } from '../src/limits/limiter.ts'
import type { AdmissionRequest } from '../src/limits/port.ts'
import { createLogger } from '../src/observability/logger.ts'
import { createRedisClient, pingRedis } from '../src/store/redis-client.ts'
import { countCommands, startPrivateRedis } from '../test/limits/helpers.ts'

const SEQUENTIAL = 20_000
const CONCURRENT = 50_000
const CONCURRENCY = 64
const log = createLogger('silent')

/** All five dimensions set, large enough never to refuse: the script does its full work. */
const request = (keyId: string): AdmissionRequest => ({
  keyId,
  tier: 'Bench',
  model: 'Mistral-Small-24B-Instruct-2501',
  limits: {
    rpm: 1_000_000_000,
    tpm: 1_000_000_000,
    input_tpm: 1_000_000_000,
    output_tpm: 1_000_000_000,
    quota: 1_000_000_000_000,
  },
  estimate: { inputTokens: 120, outputTokens: 256 },
})

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

export interface Latency {
  readonly p50: number
  readonly p99: number
  readonly mean: number
}

export async function sequential(n: number, op: (i: number) => Promise<unknown>): Promise<Latency> {
  const samples: number[] = []
  for (let i = 0; i < n; i++) {
    const start = performance.now()
    await op(i)
    samples.push((performance.now() - start) * 1000)
  }
  samples.sort((a, b) => a - b)
  return {
    p50: quantile(samples, 0.5),
    p99: quantile(samples, 0.99),
    mean: samples.reduce((s, v) => s + v, 0) / samples.length,
  }
}

export async function throughput(n: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0
  const start = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await op(next++)
    }),
  )
  return n / ((performance.now() - start) / 1000)
}

/** Commands Redis executed, by name (calls made inside scripts included), INFO itself excluded. */
async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const stats = await redis.info('commandstats')
  const out = new Map<string, number>()
  for (const m of stats.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm))
    if (m[1] !== 'info') out.set(m[1] ?? '', Number(m[2]))
  return out
}

function delta(
  before: Map<string, number>,
  after: Map<string, number>,
  rounds: number,
): { evalsha: number; total: number } {
  let total = 0
  for (const [name, calls] of after) total += calls - (before.get(name) ?? 0)
  return { evalsha: ((after.get('evalsha') ?? 0) - (before.get('evalsha') ?? 0)) / rounds, total: total / rounds }
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export async function benchAdmission(): Promise<string> {
  const server = await startPrivateRedis()
  const redis = createRedisClient(server.url, { commandTimeoutMs: 2000, name: 'bench' })
  const admin = createRedisClient(server.url, { commandTimeoutMs: 2000, name: 'bench-admin' })
  const limiters: ManagedLimiter[] = []
  try {
    await pingRedis(redis)
    await pingRedis(admin)
    const onRedis = createLimiter({ redis, prefix: 'bench:', log, redisTimeoutMs: 1000 })
    const inMemory = createLimiter({ log })
    limiters.push(onRedis, inMemory)
    const keys = Array.from({ length: 1000 }, (_, i) => `key${i}`)
    const pick = (i: number): AdmissionRequest => request(keys[i % keys.length] ?? 'key0')
    await onRedis.admit(pick(0)) // loads the script

    // Round trips, counted twice: what the client sent, and what Redis executed.
    const sent = countCommands(redis)
    const before = await commandCalls(admin)
    const rounds = 1000
    for (let i = 0; i < rounds; i++) await onRedis.admit(pick(i))
    const admitCommands = sent.count() / rounds
    const admitExecuted = delta(before, await commandCalls(admin), rounds)
    sent.reset()
    const admissions = await Promise.all(Array.from({ length: rounds }, (_, i) => onRedis.admit(pick(i))))
    sent.reset()
    for (const a of admissions) await a.settle({ inputTokens: 118, outputTokens: 97 })
    const settleCommands = sent.count() / rounds
    sent.reset()
    for (let i = 0; i < rounds; i++) await onRedis.peek(pick(i))
    const peekCommands = sent.count() / rounds
    sent.restore()

    const ping = await sequential(SEQUENTIAL, () => redis.ping())
    const admitRedis = await sequential(SEQUENTIAL, (i) => onRedis.admit(pick(i)))
    const cycleRedis = await sequential(SEQUENTIAL, async (i) =>
      (await onRedis.admit(pick(i))).settle({ inputTokens: 118, outputTokens: 97 }),
    )
    const admitMemory = await sequential(SEQUENTIAL, (i) => inMemory.admit(pick(i)))
    const cycleMemory = await sequential(SEQUENTIAL, async (i) =>
      (await inMemory.admit(pick(i))).settle({ inputTokens: 118, outputTokens: 97 }),
    )
    const rateRedis = await throughput(CONCURRENT, CONCURRENCY, (i) => onRedis.admit(pick(i)))
    const rateMemory = await throughput(CONCURRENT, CONCURRENCY, (i) => inMemory.admit(pick(i)))
    const pingRate = await throughput(CONCURRENT, CONCURRENCY, () => redis.ping())

    const row = (name: string, l: Latency): string =>
      `| ${name} | ${fmt(l.p50, 1)} | ${fmt(l.p99, 1)} | ${fmt(l.mean, 1)} |`
    return [
      '## Admission cost (bench/admission.ts)',
      '',
      'One admission of a (key, model) with all five dimensions set (rpm, tpm, input_tpm,',
      'output_tpm, quota), 1000 keys in rotation, one client connection.',
      '',
      '| Per call | commands sent (= round trips) |',
      '|---|---|',
      `| admit | ${fmt(admitCommands, 2)} |`,
      `| settle (reconcile) | ${fmt(settleCommands, 2)} |`,
      `| peek (headers without consuming) | ${fmt(peekCommands, 2)} |`,
      '',
      `Redis's own count (INFO commandstats) per admission: ${fmt(admitExecuted.evalsha, 2)} EVALSHA, inside which`,
      `${fmt(admitExecuted.total - admitExecuted.evalsha, 2)} commands run (TIME, and GET + PTTL + SET/INCRBY per dimension).`,
      '',
      `Latency, sequential, ${fmt(SEQUENTIAL)} calls each (microseconds):`,
      '',
      '| Operation | p50 µs | p99 µs | mean µs |',
      '|---|---|---|---|',
      row('Redis PING (the floor: one round trip)', ping),
      row('admit on Redis', admitRedis),
      row('admit + settle on Redis', cycleRedis),
      row('admit in memory (embedded)', admitMemory),
      row('admit + settle in memory', cycleMemory),
      '',
      `Throughput, ${fmt(CONCURRENT)} calls, ${CONCURRENCY} in flight, one process, one connection:`,
      '',
      '| Operation | calls/s |',
      '|---|---|',
      `| Redis PING | ${fmt(pingRate)} |`,
      `| admit on Redis | ${fmt(rateRedis)} |`,
      `| admit in memory | ${fmt(rateMemory)} |`,
    ].join('\n')
  } finally {
    await Promise.all(limiters.map((l) => l.close()))
    redis.disconnect()
    admin.disconnect()
    await server.kill()
  }
}

if (import.meta.main) process.stdout.write(`${await benchAdmission()}\n`)

// Issue #25: the limiter's counters on their owner's slot spread a fleet's admissions over a
// cluster's masters. Admissions (admit + settle, the two scripts of a call) of 300 keys
// against the Redis Cluster of test/helpers/redis-topologies.sh (3 masters on loopback),
// in two layouts of the same keys: each key its own owner (spread), and all of them under
// one owner (one slot: what every key was under `{tg}` before). Alternating rounds, so the
// machine's other work falls on both alike. Per layout: admissions per second, and each
// master's CPU (INFO cpu used_cpu_sys + used_cpu_user, deltas over the round).
//
//   node bench/sharding.ts [--quick]      prints a Markdown section
import { randomBytes } from 'node:crypto'
import { loadavg } from 'node:os'
import type { Cluster } from 'ioredis'
import { createLimiter } from '../src/limits/limiter.ts'
import type { AdmissionRequest } from '../src/limits/port.ts'
import { createLogger } from '../src/observability/logger.ts'
import { createRedisClient, whenReady } from '../src/store/redis-client.ts'
import { deleteUnderPrefix, ensureTopology, TARGETS } from '../test/helpers/topologies.ts'
import { throughput } from './admission.ts'
import { machine } from './machine.ts'

const quick = process.argv.includes('--quick')
const KEYS = 300
const CALLS = quick ? 6_000 : 30_000
const ROUNDS = quick ? 2 : 3
const CONCURRENCY = 64
const log = createLogger('silent')

type Layout = 'spread' | 'one slot'

const request = (keyId: string, owner: string): AdmissionRequest => ({
  keyId,
  owner,
  tier: 'Bench',
  model: 'Mistral-Small-24B-Instruct-2501',
  limits: { rpm: 1_000_000_000, tpm: 1_000_000_000, quota: 1_000_000_000_000 },
  estimate: { inputTokens: 120, outputTokens: 256 },
})

/** Seconds of CPU each master has used, by port. */
async function cpuPerMaster(redis: Cluster): Promise<Map<number, number>> {
  const out = new Map<number, number>()
  for (const node of redis.nodes('master')) {
    const info = await node.info('cpu')
    const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
    out.set(Number(node.options.port), field('used_cpu_sys') + field('used_cpu_user'))
  }
  return out
}

async function main(): Promise<void> {
  await ensureTopology('cluster')
  const prefix = `tgbench:shard:${randomBytes(4).toString('hex')}:`
  const redis = createRedisClient(TARGETS.cluster, { commandTimeoutMs: 5000, name: 'tgbench-sharding' }) as Cluster
  await whenReady(redis)
  const limiter = createLimiter({ redis, prefix, log, redisTimeoutMs: 5000 })
  const tag = randomBytes(3).toString('hex')
  const keys = Array.from({ length: KEYS }, (_, i) => `key_${tag}_${i}`)
  const requests: Record<Layout, AdmissionRequest[]> = {
    spread: keys.map((k, i) => request(k, `owner_${tag}_${i}`)),
    'one slot': keys.map((k) => request(`${k}_one`, `owner_${tag}_all`)),
  }
  const call = async (r: AdmissionRequest): Promise<void> => {
    const admission = await limiter.admit(r)
    await admission.settle({ inputTokens: 100, outputTokens: 200 })
  }
  // The scripts cached, the connections to every master open.
  for (const layout of ['spread', 'one slot'] as const) await Promise.all(requests[layout].map(call))

  const totals: Record<Layout, { rate: number[]; cpu: Map<number, number> }> = {
    spread: { rate: [], cpu: new Map() },
    'one slot': { rate: [], cpu: new Map() },
  }
  const loads: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const layout of ['spread', 'one slot'] as const) {
      const rs = requests[layout]
      const before = await cpuPerMaster(redis)
      totals[layout].rate.push(await throughput(CALLS, CONCURRENCY, (i) => call(rs[i % rs.length] as AdmissionRequest)))
      const after = await cpuPerMaster(redis)
      for (const [port, s] of after)
        totals[layout].cpu.set(port, (totals[layout].cpu.get(port) ?? 0) + s - (before.get(port) ?? 0))
      loads.push(loadavg()[0] ?? 0)
    }
  }
  await limiter.close()
  await deleteUnderPrefix(redis, prefix)
  redis.disconnect()

  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
  const admissions = CALLS * ROUNDS
  const row = (layout: Layout): string => {
    const cpu = totals[layout].cpu
    const all = [...cpu.values()].reduce((a, b) => a + b, 0)
    const busiest = Math.max(...cpu.values())
    const shares = [...cpu]
      .sort(([a], [b]) => a - b)
      .map(([port, s]) => `${port}: ${((100 * s) / all).toFixed(0)} %`)
      .join(', ')
    return `| ${layout} | ${median(totals[layout].rate).toFixed(0)} | ${((1e6 * busiest) / admissions).toFixed(1)} | ${((1e6 * all) / admissions).toFixed(1)} | ${shares} |`
  }
  const ratio = (f: (l: Layout) => number): string => (f('spread') / f('one slot')).toFixed(2)
  const busiestPer = (l: Layout): number => Math.max(...totals[l].cpu.values())
  console.log(
    [
      `## Admissions over a cluster's masters (bench/sharding.ts${quick ? ' --quick' : ''}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
      '',
      `${KEYS} keys, admit + settle of each call (rpm, tpm, quota), ${CONCURRENCY} at a time from one process, ${CALLS} calls a round, ${ROUNDS} rounds alternating the layouts; the Redis Cluster of test/helpers/redis-topologies.sh (3 masters, 3 replicas, all on this machine).`,
      '',
      '| layout | admissions/s (median round) | busiest master CPU µs/admission | all masters CPU µs/admission | CPU share per master |',
      '|---|---|---|---|---|',
      row('spread'),
      row('one slot'),
      '',
      `Ratios spread / one slot: admissions/s ${ratio((l) => median(totals[l].rate))}, busiest master's CPU ${ratio(busiestPer)}.`,
      `Load average (1 min) after each round: ${loads.map((l) => l.toFixed(2)).join(', ')}.`,
      '',
      machine(),
    ].join('\n'),
  )
}

await main()

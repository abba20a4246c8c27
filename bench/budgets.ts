// What budgets cost an admission: Redis commands per call and CPU per call, with three
// budgets (key, owner, tenant) against none, in the same run, alternating rounds so that a
// busy machine weighs on both alike. On a redis-server of the bench's own and in memory.
//
//   node bench/budgets.ts            prints a Markdown section
import type { BudgetSpec } from '../src/budgets/port.ts'
import { createLimiter, type LimiterOptions, type ManagedLimiter } from '../src/limits/limiter.ts'
import type { AdmissionRequest } from '../src/limits/port.ts'
import { createLogger } from '../src/observability/logger.ts'
import { createRedisClient, pingRedis } from '../src/store/redis-client.ts'
import { countCommands, startPrivateRedis } from '../test/limits/helpers.ts'

const CALLS = 4000
const ROUNDS = 5
const log = createLogger('silent')

const limits = { rpm: 1e9, input_tpm: 1e9, output_tpm: 1e9, input_price: 3.53, output_price: 3.53 }
const request = (keyId: string): AdmissionRequest => ({
  keyId,
  owner: 'team-a',
  tier: 'Bench',
  model: 'm',
  limits,
  estimate: { inputTokens: 120, outputTokens: 256 },
})
const spec = (scope: BudgetSpec['scope'], id: string): BudgetSpec => ({
  scope,
  id,
  amountNanos: 1e15,
  period: 'month',
  timeZone: 'Europe/Berlin',
  thresholds: [50, 80, 100],
  revision: 'r1',
  origin: 'set',
})
const THREE = [spec('key', 'k'), spec('owner', 'team-a'), spec('tenant', 'acme')]

/** CPU µs per admit + settle, and calls. */
async function run(limiter: ManagedLimiter, keyId: string): Promise<number> {
  const before = process.cpuUsage()
  for (let i = 0; i < CALLS; i++) {
    const a = await limiter.admit(request(keyId))
    await a.settle({ inputTokens: 120, outputTokens: 200 })
  }
  const used = process.cpuUsage(before)
  return (used.user + used.system) / CALLS
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

async function compare(label: string, base: Partial<LimiterOptions>, count?: () => number): Promise<string[]> {
  const none = createLimiter({ log, ...base })
  const three = createLimiter({ log, ...base, budgets: { applicable: () => THREE } })
  const cpu = { none: [] as number[], three: [] as number[] }
  const commands = { none: 0, three: 0 }
  await run(none, 'warm-none')
  await run(three, 'warm-three')
  for (let r = 0; r < ROUNDS; r++) {
    let c0 = count?.() ?? 0
    cpu.none.push(await run(none, `none${r}`))
    commands.none = ((count?.() ?? 0) - c0) / CALLS
    c0 = count?.() ?? 0
    cpu.three.push(await run(three, `three${r}`))
    commands.three = ((count?.() ?? 0) - c0) / CALLS
  }
  await none.close()
  await three.close()
  const n = median(cpu.none)
  const t = median(cpu.three)
  return [
    `| ${label} | no budget | ${count ? commands.none.toFixed(2) : '-'} | ${n.toFixed(1)} | 1.00 |`,
    `| ${label} | 3 budgets | ${count ? commands.three.toFixed(2) : '-'} | ${t.toFixed(1)} | ${(t / n).toFixed(2)} |`,
  ]
}

const rows: string[] = []
rows.push(...(await compare('memory', {})))
const server = await startPrivateRedis()
const redis = createRedisClient(server.url, { commandTimeoutMs: 5000, name: 'bench' })
await pingRedis(redis)
const counted = countCommands(redis)
rows.push(...(await compare('redis', { redis, prefix: 'bench:', redisTimeoutMs: 5000 }, () => counted.count())))
redis.disconnect()
await server.kill()

console.log(`### Budgets in the admission (bench/budgets.ts, ${new Date().toISOString().slice(0, 10)})

${CALLS} calls × ${ROUNDS} alternating rounds, each an admit and a settle (rpm, input_tpm, output_tpm set), with no
budget and with three (key, owner, tenant; monthly, Europe/Berlin). CPU is this process's user + system time per
call, the median round; the ratio is to the no-budget run of the same mode in the same run.

| store | budgets | Redis commands per call (admit + settle) | CPU µs per call | ratio |
|---|---|---|---|---|
${rows.join('\n')}
`)

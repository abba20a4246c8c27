// The gateway's throughput with plan limits on versus off: real `tollgate serve`
// processes (the built-in mock backend, answering at once), a closed-loop load of
// non-streaming chat completions from this process.
//
// "Off" is a tier without limits: the limiter sees no dimension and returns at once,
// never touching Redis. "On" sets all five dimensions, high enough never to refuse, so
// every call pays a full admission and a reconciliation.
//
//   node bench/throughput.ts           prints a Markdown section
//   node bench/throughput.ts --declared   the model's deployment declares rpm, tpm and
//                                         maxConcurrent (never reached): every call pays
//                                         the deployment-capacity check too (issue #22)
import { performance } from 'node:perf_hooks'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { LIMITS_OFF_AND_ON } from './proxy-rig.ts'

const CONCURRENCY = 32
const WARMUP_MS = 1000
const MEASURE_MS = 5000
/** Off and on alternate this many times per store; the median run is reported, so drift in the machine's load hits both alike. */
const ROUNDS = 3
const MODEL = 'Mistral-Small-24B-Instruct-2501'
const HIGH = 1_000_000_000
/** The deployment declares capacity limits it never reaches (--declared). */
const DECLARED = process.argv.includes('--declared')

interface Result {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
  readonly limitHeaders: boolean
}

async function load(gw: RunningTollgate, key: string): Promise<Result> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'Benchmark: say hello in five words.' }],
    max_tokens: 5,
  })
  const call = async (): Promise<{ ok: boolean; headers: boolean }> => {
    const res = await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body,
    })
    await res.arrayBuffer()
    return { ok: res.status === 200, headers: res.headers.has('x-ratelimit-remaining-requests') }
  }
  const run = async (
    ms: number,
    record: boolean,
  ): Promise<{ samples: number[]; errors: number; headers: boolean; elapsed: number }> => {
    const samples: number[] = []
    let errors = 0
    let headers = false
    const start = performance.now()
    const end = start + ms
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now()
          const r = await call()
          if (record) samples.push(performance.now() - t0)
          if (!r.ok) errors++
          headers ||= r.headers
        }
      }),
    )
    return { samples, errors, headers, elapsed: performance.now() - start }
  }
  await run(WARMUP_MS, false)
  const { samples, errors, headers, elapsed } = await run(MEASURE_MS, true)
  samples.sort((a, b) => a - b)
  const q = (p: number): number => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? 0
  return { rps: samples.length / (elapsed / 1000), p50: q(0.5), p99: q(0.99), errors, limitHeaders: headers }
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

export async function benchThroughput(): Promise<string> {
  const redis = await startPrivateRedis()
  const rows: string[] = []
  try {
    for (const store of ['embedded', 'redis'] as const) {
      const gw = await startTollgate({
        env:
          store === 'redis'
            ? { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' }
            : {},
        config: (doc) => {
          doc.plans = LIMITS_OFF_AND_ON
          ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond: 1_000_000 }
          ;(doc.store as Record<string, unknown>).keyPrefix = 'bench:'
          if (DECLARED) {
            const model = (doc.models as Array<{ name: string; deployments: unknown[] }>).find((m) => m.name === MODEL)
            if (model) model.deployments = [{ backend: 'mock', rpm: HIGH, tpm: HIGH, maxConcurrent: 1_000_000 }]
          }
        },
      })
      try {
        const keys = { Off: (await gw.createKey({ tier: 'Off' })).key, On: (await gw.createKey({ tier: 'On' })).key }
        const runs: Record<'Off' | 'On', Result[]> = { Off: [], On: [] }
        for (let round = 0; round < ROUNDS; round++) {
          for (const tier of ['Off', 'On'] as const) runs[tier].push(await load(gw, keys[tier]))
        }
        for (const tier of ['Off', 'On'] as const) {
          const sorted = [...runs[tier]].sort((x, y) => x.rps - y.rps)
          const r = sorted[Math.floor(sorted.length / 2)]
          if (!r) continue
          const spread = `${fmt(sorted[0]?.rps ?? 0)}–${fmt(sorted.at(-1)?.rps ?? 0)}`
          rows.push(
            `| ${store} | ${tier === 'On' ? 'on (5 dimensions)' : 'off'} | ${fmt(r.rps)} | ${spread} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${runs[tier].reduce((n, x) => n + x.errors, 0)} | ${r.limitHeaders ? 'yes' : 'no'} |`,
          )
        }
      } finally {
        await gw.stop()
      }
    }
  } finally {
    await redis.kill()
  }
  return [
    `## Gateway throughput, limits on vs off (bench/throughput.ts${DECLARED ? ' --declared' : ''})`,
    '',
    `One gateway process, mock backend answering at once, non-streaming chat completions`,
    `(max_tokens 5), ${CONCURRENCY} concurrent keep-alive clients in the bench process on the`,
    `same machine. Off and on alternate ${ROUNDS} times (${fmt(MEASURE_MS / 1000)} s measured after ${fmt(WARMUP_MS / 1000)} s warm-up each); the`,
    'median run is shown, with the range of all runs. With Redis, the keys and the counters',
    'are on one loopback redis-server. Latency is per request, as the client saw it.',
    '',
    '| Store | Limits | req/s (median) | req/s (range) | p50 ms | p99 ms | non-200 | x-ratelimit headers |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchThroughput()}\n`)

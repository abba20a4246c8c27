// The asynchronous queue across instances: three `tollgate serve` processes on one
// redis-server of the bench's own (loopback, no persistence), the built-in mock backend
// answering at once.
//
// 1. Admission rate: 10,000 asynchronous requests from 10 keys, each key limited to
//    RATE requests per WINDOW_MS window (the window is shortened so the run takes
//    seconds, not minutes), sent to the three instances in turn. Measured: requests
//    admitted in each window of each key, and the sustained rate against the limit.
// 2. Latency when capacity exists: requests at a steady pace from keys without limits.
//    Measured: from acceptance to admission (createdAt → startedAt, both written by the
//    gateways, ms, on the machine's one clock).
// 3. Redis commands per queued request, counted with MONITOR on the private Redis over
//    a third batch at the same pace (every command on it is the queue's, the limiter's,
//    the key store's or BullMQ's), client commands (round trips) apart from those that
//    Lua scripts run.
//
//   node bench/queue.ts           prints a Markdown section
import { loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import type { Redis } from 'ioredis'
import { createRedisClient } from '../src/store/redis-client.ts'
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { queuedRequestKey } from '../src/queue/redis-store.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const INSTANCES = 3
const KEYS = 10
const PER_KEY = 1000
const RATE = 100
const WINDOW_MS = 10_000
const SUBMITTERS = 8
const PACE_PER_S = 100
const PACED = 500
const ROUNDS = 5
const COUNTED = 300
const PREFIX = 'benchq:'

const plans = { defaultTier: 'Bench', tiers: { Bench: { default: {} } } }

interface Stored {
  readonly id: string
  readonly keyId: string
  readonly createdAt: number
  readonly startedAt: number
  readonly status: string
}

async function submit(gws: readonly RunningTollgate[], key: string, i: number): Promise<string> {
  const gw = gws[i % gws.length] as RunningTollgate
  const res = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'respond-async' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `bench ${i}` }], max_tokens: 5 }),
  })
  const body = (await res.json()) as { id?: string }
  if (res.status !== 202 || body.id === undefined) {
    process.stderr.write(
      gw
        .logs()
        .filter((l) => (l.level as number) >= 40)
        .slice(-5)
        .map((l) => JSON.stringify(l))
        .join('\n') + '\n',
    )
    throw new Error(`not accepted: ${res.status} ${JSON.stringify(body)}`)
  }
  return body.id
}

/** Reads the stored requests straight from Redis: ms timestamps and status. */
async function read(redis: Redis, ids: readonly string[]): Promise<Stored[]> {
  const out: Stored[] = []
  for (let i = 0; i < ids.length; i += 1000) {
    const pipeline = redis.pipeline()
    for (const id of ids.slice(i, i + 1000)) pipeline.hgetall(queuedRequestKey(PREFIX, id))
    for (const [error, fields] of (await pipeline.exec()) ?? []) {
      if (error) throw error
      const f = fields as Record<string, string>
      const meta = JSON.parse(f.meta ?? '{}') as { id: string; keyId: string; createdAt: number }
      out.push({
        id: meta.id,
        keyId: meta.keyId,
        createdAt: meta.createdAt,
        startedAt: Number(f.startedAt ?? 0),
        status: f.status ?? '',
      })
    }
  }
  return out
}

/** Waits until the last request of every key is done (each key's line is FIFO), then reads them all. */
async function waitDone(redis: Redis, lastOfEach: readonly string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const stored = await read(redis, lastOfEach)
    if (stored.every((s) => s.status === 'completed' || s.status === 'failed')) return
    await new Promise((done) => setTimeout(done, 200))
  }
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

/**
 * Splits one key's admission times into its windows. A window opens with the first call
 * after the last one ended and lasts WINDOW_MS (the limiter's fixed window), so every
 * admission before start + WINDOW_MS belongs to the window that starts at `start`.
 */
function windows(starts: readonly number[]): number[][] {
  const out: number[][] = []
  for (const s of [...starts].sort((a, b) => a - b)) {
    const current = out.at(-1)
    if (current === undefined || s >= (current[0] ?? 0) + WINDOW_MS) out.push([s])
    else current.push(s)
  }
  return out
}

const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

function commandTable(topLevel: Map<string, number>, inScripts: Map<string, number>, requests: number): string[] {
  const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0)
  const rows = (m: Map<string, number>): string =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name.toUpperCase()} ${fmt(n / requests, 2)}`)
      .join(', ')
  return [
    '| Commands per request | Count | By command |',
    '|---|---|---|',
    `| sent by clients (gateways, BullMQ) | ${fmt(sum(topLevel) / requests, 2)} | ${rows(topLevel)} |`,
    `| run inside Lua scripts | ${fmt(sum(inScripts) / requests, 2)} | ${rows(inScripts)} |`,
  ]
}

export async function benchQueue(): Promise<string> {
  const server = await startPrivateRedis()
  const redis = createRedisClient(server.url, { commandTimeoutMs: 5000, name: 'bench-queue' })
  const gws: RunningTollgate[] = []
  try {
    for (let i = 0; i < INSTANCES; i++) {
      gws.push(
        await startTollgate({
          adminToken: 'adm_bench_queue_bench_queue_bench_queue',
          env: {
            REDIS_URL: server.url,
            TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret',
            LOG_LEVEL: 'info',
          },
          config: (doc) => {
            doc.plans = plans
            // Deadlines well above a loaded machine's stalls: a Redis reply that is late here
            // would switch the limiter to its per-instance stand-in and skew the rate.
            doc.limits = { windowMs: WINDOW_MS, redisTimeoutMs: 2000 }
            doc.queue = { concurrency: 64 }
            ;(doc.backends as Record<string, Record<string, unknown>>).mock = {
              type: 'mock',
              tokensPerSecond: 1_000_000,
            }
            Object.assign(doc.store as Record<string, unknown>, { keyPrefix: PREFIX, commandTimeoutMs: 5000 })
          },
        }),
      )
    }
    const first = gws[0] as RunningTollgate

    // Phase 1: 10,000 requests, 10 keys at RATE per window. They are submitted while the
    // keys are held at 1 request per window, so every line has a backlog when the limit
    // is raised to RATE; from then on the limit alone sets the pace.
    const keys = await Promise.all(Array.from({ length: KEYS }, () => first.createKey({ limits: { '*': { rpm: 1 } } })))
    const ids: string[] = []
    const lastOf = new Map<string, string>()
    let next = 0
    const submitStart = performance.now()
    await Promise.all(
      Array.from({ length: SUBMITTERS }, async () => {
        while (next < KEYS * PER_KEY) {
          const i = next++
          const key = keys[i % KEYS] as { id: string; key: string }
          const id = await submit(gws, key.key, i)
          ids.push(id)
          lastOf.set(key.id, id)
        }
      }),
    )
    const submitMs = performance.now() - submitStart
    const raisedAt = Date.now()
    for (const k of keys) {
      const res = await fetch(`${first.url}/admin/keys/${k.id}`, {
        method: 'PATCH',
        headers: { authorization: 'Bearer adm_bench_queue_bench_queue', 'content-type': 'application/json' },
        body: JSON.stringify({ limits: { '*': { rpm: RATE } } }),
      })
      if (res.status !== 200) throw new Error(`PATCH ${res.status}`)
    }
    await waitDone(redis, [...lastOf.values()], (PER_KEY / RATE + 5) * WINDOW_MS * 2)
    const stored = await read(redis, ids)
    const completed = stored.filter((s) => s.status === 'completed').length
    const perWindow: number[] = []
    const rates: number[] = []
    for (const k of keys) {
      // Windows after the raise (and after the key caches took it in); the first and the
      // last are partial.
      const w = windows(
        stored.filter((s) => s.keyId === k.id && s.startedAt > raisedAt + 1500).map((s) => s.startedAt),
      ).slice(1)
      const full = w.slice(0, -1)
      for (const group of full) perWindow.push(group.length)
      const span = (w.at(-1)?.[0] ?? 0) - (w[0]?.[0] ?? 0)
      if (span > 0) rates.push(full.reduce((n, g) => n + g.length, 0) / (span / WINDOW_MS))
    }
    const meanRate = rates.reduce((a, b) => a + b, 0) / rates.length
    const worstRate = rates.reduce((w, r) => (Math.abs(r - RATE) > Math.abs(w - RATE) ? r : w), RATE)

    // Phase 2: steady pace, no limits: the time from acceptance to admission.
    const free = await Promise.all(Array.from({ length: 20 }, () => first.createKey({})))
    const paced = async (count: number): Promise<string[]> => {
      const pending: Array<Promise<string>> = []
      const paceStart = performance.now()
      for (let i = 0; i < count; i++) {
        const wait = paceStart + (i * 1000) / PACE_PER_S - performance.now()
        if (wait > 0) await new Promise((done) => setTimeout(done, wait))
        pending.push(submit(gws, (free[i % free.length] as { key: string }).key, i))
      }
      return Promise.all(pending)
    }
    // In rounds, with the machine's load read before each: the other work on a shared
    // machine comes and goes, and the rounds show how much of the tail is the machine's.
    const rounds: Array<{ latency: number[]; load: number }> = []
    for (let round = 0; round < ROUNDS; round++) {
      const load = loadavg()[0] ?? 0
      const pacedIds = await paced(PACED)
      await waitDone(redis, pacedIds.slice(-40), 60_000)
      const pacedStored = await read(redis, pacedIds)
      rounds.push({
        load,
        latency: pacedStored
          .filter((s) => s.startedAt > 0)
          .map((s) => s.startedAt - s.createdAt)
          .sort((a, b) => a - b),
      })
      await new Promise((done) => setTimeout(done, 2000))
    }

    // Phase 3: the same pace, every command Redis receives counted with MONITOR (which
    // tells a client's commands from those a Lua script runs). The bench sends none meanwhile.
    const monitor = await redis.monitor()
    const topLevel = new Map<string, number>()
    const inScripts = new Map<string, number>()
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const into = source === 'lua' ? inScripts : topLevel
      const name = (args[0] ?? '').toLowerCase()
      into.set(name, (into.get(name) ?? 0) + 1)
    })
    const countedIds = await paced(COUNTED)
    await new Promise((done) => setTimeout(done, 1500))
    monitor.disconnect()
    const countedDone = (await read(redis, countedIds)).filter((s) => s.status === 'completed').length

    return [
      '## Asynchronous queue across instances (bench/queue.ts)',
      '',
      `${INSTANCES} \`tollgate serve\` processes on one loopback redis-server, the mock backend answering at`,
      `once, \`queue.concurrency\` 64 per instance, Redis deadlines raised (\`store.commandTimeoutMs\` 5 s, \`limits.redisTimeoutMs\``,
      `2 s) so a loaded machine's stalls do not count as outages; the bench process submits and reads back (from Redis:`,
      "createdAt and startedAt are the gateways' own ms timestamps). All on the same two cores.",
      '',
      `**Admission rate.** ${fmt(KEYS * PER_KEY)} asynchronous requests from ${KEYS} keys, submitted by ${SUBMITTERS} concurrent clients`,
      `round-robin over the instances (accepted in ${fmt(submitMs / 1000, 1)} s, ${fmt((KEYS * PER_KEY) / (submitMs / 1000))} requests/s) while each key was held at`,
      `1 request per window; then each key's limit was raised to ${RATE} requests per ${WINDOW_MS / 1000} s window (\`limits.windowMs\``,
      `shortened), and its backlog drained at that limit. Completed: ${fmt(completed)} of ${fmt(stored.length)}. Counted: the`,
      "full windows after the raise (a window is a burst of admissions; the next starts when the limiter's",
      'retry-after wakes the head of the line).',
      '',
      '| Measure | Value |',
      '|---|---|',
      `| full windows counted (all keys) | ${perWindow.length}, with ${fmt(perWindow.reduce((a, b) => a + b, 0))} admissions |`,
      `| sustained rate, mean over keys (admitted per window length, last window excluded) | ${fmt(meanRate, 2)} per window (limit ${RATE}: ${fmt(((meanRate - RATE) / RATE) * 100, 2)} %) |`,
      `| the key furthest from the limit | ${fmt(worstRate, 2)} per window (${fmt(((worstRate - RATE) / RATE) * 100, 2)} %) |`,
      '',
      `**Latency when capacity exists.** ${ROUNDS} rounds of ${fmt(PACED)} requests at ${PACE_PER_S}/s from 20 keys without limits, round-robin`,
      'over the instances: from acceptance (createdAt, before the request is stored) to admission (startedAt, after the limiter',
      'admitted it). The 1-minute load average of the machine is read before each round.',
      '',
      '| Round | load before | p50 ms | p90 ms | p99 ms | max ms |',
      '|---|---|---|---|---|---|',
      ...rounds.map(
        ({ latency, load }, i) =>
          `| ${i + 1} | ${fmt(load, 2)} | ${quantile(latency, 0.5)} | ${quantile(latency, 0.9)} | ${quantile(latency, 0.99)} | ${latency.at(-1) ?? 0} |`,
      ),
      '',
      `**Redis commands per queued request**, counted with MONITOR over ${fmt(COUNTED)} more requests at the same pace, from`,
      `acceptance to the stored result (${fmt(countedDone)} completed within the count; everything on the Redis in that time, BullMQ's`,
      "blocking waits and the gateways' heartbeats included). A client command is one round trip (pipelined ones",
      'aside); the commands a script runs are counted apart.',
      '',
      ...commandTable(topLevel, inScripts, COUNTED),
    ].join('\n')
  } finally {
    await Promise.all(gws.map((g) => g.stop()))
    redis.disconnect()
    await server.kill()
  }
}

if (import.meta.main) process.stdout.write(`${await benchQueue()}\n`)

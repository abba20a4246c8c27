// How far Tollgate's CPU per call is from the floor of its shape. Three processes answer the
// same JSON chat calls from bench/compare/fast-upstream.ts, in alternating bursts so the
// machine's load drifts over all alike:
//   - the bare http-proxy-3 hop (bench/compare/bare-hop.ts), the reference of compare;
//   - the lean gateway (bench/compare/lean-gateway.ts): the body parsed, two Redis scripts
//     (admit, settle), the reply read whole for its usage, the x-ratelimit-* headers, two
//     metric updates: the least a gateway of this shape does with the chosen packages;
//   - Tollgate on Redis, with all five limits and with none (production flags, no request log
//     lines, as compare runs it).
// CPU is each process's user + system time over its calls (/proc), and Redis's too; the first
// round is a warm-up, the median of the rest is shown, and every figure as a ratio to the hop.
//
//   node bench/floor.ts [rounds]
import { startTollgate } from '../test/helpers/gateway.ts'
import { redisClient, startPrivateRedis } from '../test/limits/helpers.ts'
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, startChild } from './compare.ts'
import { cpuMsOf, fmt, LIMITS_OFF_AND_ON, sendChatCalls } from './proxy-rig.ts'

const ROUNDS = Number(process.argv[2] ?? '8')
const PER_BURST = 800
const CONCURRENCY = 8
const MODEL = 'bench-chat'
const BODY = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'Say hello in five words.' }],
  max_tokens: 5,
})

interface Target {
  readonly label: string
  readonly url: string
  readonly pid: number
  readonly key?: string
}

/** CPU ms per call of the target's process, and of Redis, over one burst. */
async function burst(target: Target, redisPid: number): Promise<{ own: number; redis: number }> {
  const before = cpuMsOf(target.pid)
  const redisBefore = cpuMsOf(redisPid)
  await sendChatCalls(target.url, target.key, BODY, PER_BURST, CONCURRENCY)
  return { own: (cpuMsOf(target.pid) - before) / PER_BURST, redis: (cpuMsOf(redisPid) - redisBefore) / PER_BURST }
}

const redis = await startPrivateRedis()
const probe = redisClient(redis.url)
await new Promise((ready) => (probe.status === 'ready' ? ready(undefined) : probe.once('ready', ready)))
const redisPid = Number(/process_id:(\d+)/.exec(await probe.info('server'))?.[1] ?? Number.NaN)
probe.disconnect()
const upstream = await startChild('fast-upstream.ts', [])
const hop = await startChild('bare-hop.ts', [upstream.url])
const lean = await startChild('lean-gateway.ts', [upstream.url, redis.url])
const leanFree = await startChild('lean-gateway.ts', [upstream.url])
const gw = await startTollgate({
  dropRequestLogs: true,
  execArgv: GATEWAY_NODE_FLAGS,
  env: { ...GATEWAY_ENV, REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' },
  config: (doc) => {
    doc.plans = LIMITS_OFF_AND_ON
    doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
    doc.resourceBackend = 'upstream'
    doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
    ;(doc.store as Record<string, unknown>).keyPrefix = 'floor:'
  },
})
try {
  const targets: Target[] = [
    { label: 'bare http-proxy-3 hop', url: `${hop.url}/v1/chat/completions`, pid: hop.pid },
    { label: 'lean gateway (the floor)', url: `${lean.url}/v1/chat/completions`, pid: lean.pid, key: 'sk-lean' },
    { label: 'lean gateway, no limits', url: `${leanFree.url}/v1/chat/completions`, pid: leanFree.pid, key: 'sk-lean' },
    {
      label: 'Tollgate, Redis, limits on',
      url: `${gw.url}/v2/chat/completions`,
      pid: gw.child.pid ?? 0,
      key: (await gw.createKey({ tier: 'On' })).key,
    },
    {
      label: 'Tollgate, Redis, limits off',
      url: `${gw.url}/v2/chat/completions`,
      pid: gw.child.pid ?? 0,
      key: (await gw.createKey({ tier: 'Off' })).key,
    },
  ]
  const samples = new Map<Target, Array<{ own: number; redis: number }>>(targets.map((t) => [t, []]))
  for (let round = 0; round <= ROUNDS; round++) {
    for (const target of targets) {
      const sample = await burst(target, redisPid)
      if (round > 0) samples.get(target)?.push(sample)
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
  const hopMs = median((samples.get(targets[0] as Target) ?? []).map((s) => s.own))
  process.stdout.write(
    `${PER_BURST} JSON chat calls a burst from ${CONCURRENCY} clients, ${ROUNDS} rounds after a warm-up; medians.\n\n` +
      '| Path | CPU ms per call | ÷ hop | Redis CPU ms per call |\n|---|---|---|---|\n',
  )
  for (const target of targets) {
    const rows = samples.get(target) ?? []
    const own = median(rows.map((s) => s.own))
    const redisMs = median(rows.map((s) => s.redis))
    process.stdout.write(`| ${target.label} | ${fmt(own, 3)} | ${fmt(own / hopMs, 2)} | ${fmt(redisMs, 3)} |\n`)
  }
} finally {
  await gw.stop()
  await Promise.all([hop.stop(), lean.stop(), leanFree.stop(), upstream.stop()])
  await redis.kill()
}

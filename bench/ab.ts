// Two checkouts side by side: the gateway's CPU time per request, before and after a change.
// Both gateways run at once (the built-in mock answering at once, or with --upstream an
// openai backend on bench/compare/fast-upstream.ts: the relay without the mock's reply
// building; a tier without limits and one with all five dimensions), and the bursts alternate between them, so the machine's
// load drifts over both alike. CPU is the gateway process's user + system time over its
// requests (/proc), the figure least moved by other work on a shared machine; the first
// round is a warm-up and the median of the rest is shown, with the read and write system
// calls a call made (/proc/<pid>/io syscr, syscw).
//
// --stream sends streamed calls (SSE, read whole) instead of JSON ones.
//
//   node bench/ab.ts <other checkout> [embedded|redis] [rounds] [--upstream] [--stream]   e.g. a worktree of the last release
import { startTollgate, type RunningTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { startChild } from './compare.ts'
import { chatCallCost, LIMITS_OFF_AND_ON, type CallCost } from './proxy-rig.ts'

const viaUpstream = process.argv.includes('--upstream')
const streamed = process.argv.includes('--stream')
const MODEL = viaUpstream ? 'bench-chat' : 'Mistral-Small-24B-Instruct-2501'
const PER_BURST = 800
const CONCURRENCY = 8
const TIERS = ['Off', 'On'] as const
type Tier = (typeof TIERS)[number]

const [other, store = 'embedded', roundsArg = '14'] = process.argv
  .slice(2)
  .filter((a) => a !== '--upstream' && a !== '--stream')
if (other === undefined) {
  process.stderr.write('usage: node bench/ab.ts <other checkout> [embedded|redis] [rounds]\n')
  process.exit(64)
}
const redis = store === 'redis' ? await startPrivateRedis() : null
const upstream = viaUpstream ? await startChild('fast-upstream.ts', []) : null

async function start(root: string, prefix: string): Promise<RunningTollgate> {
  return startTollgate({
    root,
    env: redis ? { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' } : {},
    config: (doc) => {
      doc.plans = LIMITS_OFF_AND_ON
      if (upstream === null) {
        ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond: 1_000_000 }
      } else {
        doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
        doc.resourceBackend = 'upstream'
        doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
      }
      ;(doc.store as Record<string, unknown>).keyPrefix = prefix
    },
  })
}

function burst(gw: RunningTollgate, key: string): Promise<CallCost> {
  const body = {
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello in five words.' }],
    max_tokens: 5,
    ...(streamed ? { stream: true } : {}),
  }
  return chatCallCost(gw, key, body, PER_BURST, CONCURRENCY)
}

const sides = { other: await start(other, 'ab-other:'), this: await start(import.meta.dirname + '/..', 'ab-this:') }
try {
  const keys = Object.fromEntries(
    await Promise.all(
      Object.entries(sides).map(async ([side, gw]) => [
        side,
        { Off: (await gw.createKey({ tier: 'Off' })).key, On: (await gw.createKey({ tier: 'On' })).key },
      ]),
    ),
  ) as Record<keyof typeof sides, Record<Tier, string>>
  const samples = new Map<string, CallCost[]>()
  for (let round = 0; round < Number(roundsArg); round++) {
    for (const side of ['other', 'this'] as const) {
      for (const tier of TIERS) {
        const cost = await burst(sides[side], keys[side][tier])
        if (round > 0) samples.set(`${side} ${tier}`, [...(samples.get(`${side} ${tier}`) ?? []), cost])
      }
    }
  }
  const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
  const of = (side: string, tier: Tier, field: keyof CallCost): number =>
    median((samples.get(`${side} ${tier}`) ?? []).map((c) => c[field]))
  const per = streamed ? 'stream' : 'req'
  process.stdout.write(
    `| Store | Tier | CPU ms/${per}, ${other} | CPU ms/${per}, this checkout | this ÷ other | write / read syscalls a call, other → this |\n|---|---|---|---|---|---|\n`,
  )
  for (const tier of TIERS) {
    const a = of('other', tier, 'cpuMs')
    const b = of('this', tier, 'cpuMs')
    const calls = (side: string): string =>
      `${of(side, tier, 'writes').toFixed(2)} / ${of(side, tier, 'reads').toFixed(2)}`
    process.stdout.write(
      `| ${store} | ${tier === 'On' ? 'limits on' : 'limits off'} | ${a.toFixed(3)} | ${b.toFixed(3)} | ${(b / a).toFixed(2)} | ${calls('other')} → ${calls('this')} |\n`,
    )
  }
} finally {
  await Promise.all(Object.values(sides).map((gw) => gw.stop()))
  await redis?.kill()
  await upstream?.stop()
}

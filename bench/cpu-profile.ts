// Where the gateway's CPU goes on the hot path: a CPU profile (node --cpu-prof) of a gateway
// on Redis (a redis-server of its own) answering JSON chat completions from the built-in mock
// under 8 clients with a tier that has all five limits set, summarised as the functions with
// the most self time. Only the samples taken while the measured requests ran are counted
// (the profile's clock and this process's are both the monotonic clock), not the boot and
// not the warm-up. Shares are of the non-idle samples in that window.
//
//   node bench/cpu-profile.ts [--root <checkout>] [--requests 6000] [--top 10]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir, loadavg } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { startTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: resolve(import.meta.dirname, '..') },
    requests: { type: 'string', default: '6000' },
    top: { type: 'string', default: '10' },
  },
})
const ROOT = resolve(values.root)
const HIGH = 1_000_000_000
const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CONCURRENCY = 8

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: readonly ProfileNode[]
  readonly startTime: number
  readonly samples: readonly number[]
  readonly timeDeltas: readonly number[]
}

async function load(url: string, key: string, requests: number): Promise<void> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'Say hello in five words.' }],
    max_tokens: 5,
  })
  let left = requests
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) {
        const res = await fetch(`${url}/v2/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body,
        })
        await res.arrayBuffer()
        if (res.status !== 200) throw new Error(`the gateway answered ${res.status}`)
      }
    }),
  )
}

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

function summarise(profile: Profile, fromUs: number, toUs: number, top: number): string {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]))
  const self = new Map<string, number>()
  let at = profile.startTime
  let counted = 0
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0
    if (at < fromUs || at > toUs) continue
    const frame = frames.get(profile.samples[i] ?? -1)
    if (frame === undefined || frame.functionName === '(idle)') continue
    const path = frame.url.startsWith('file://') ? relative(ROOT, frame.url.slice('file://'.length)) : frame.url
    const where = frame.url === '' ? '' : ` ${path}:${frame.lineNumber + 1}`
    const name = `${frame.functionName || '(anonymous)'}${where}`
    self.set(name, (self.get(name) ?? 0) + 1)
    counted++
  }
  const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
  return [
    `| Self time, share of ${counted} non-idle samples | Function |`,
    '|---|---|',
    ...rows.map(([name, n]) => `| ${((100 * n) / counted).toFixed(1)} % | \`${name.replace(/\|/g, '\\|')}\` |`),
  ].join('\n')
}

const redis = await startPrivateRedis()
const profDir = mkdtempSync(join(tmpdir(), 'tollgate-cpu-prof-'))
const gw = await startTollgate({
  root: ROOT,
  execArgv: ['--max-semi-space-size=8', '--cpu-prof', '--cpu-prof-dir', profDir],
  env: { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' },
  dropRequestLogs: true,
  config: (doc) => {
    doc.plans = {
      defaultTier: 'On',
      tiers: { On: { default: { rpm: HIGH, tpm: HIGH, input_tpm: HIGH, output_tpm: HIGH, quota: HIGH * 1000 } } },
    }
    ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond: 1_000_000 }
    ;(doc.store as Record<string, unknown>).keyPrefix = 'cpu-profile:'
  },
})
let from: number
let to: number
try {
  const { key } = await gw.createKey({ tier: 'On' })
  await load(gw.url, key, 500) // warm-up: the mock's tokenizer, the JIT
  from = nowUs()
  await load(gw.url, key, Number(values.requests))
  to = nowUs()
} finally {
  await gw.stop()
  await redis.kill()
}
const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
if (file === undefined) throw new Error('the gateway wrote no profile')
const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as Profile
rmSync(profDir, { recursive: true, force: true })
console.log(
  `checkout: ${ROOT}; ${values.requests} JSON chat calls, Redis, limits on; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
)
console.log(summarise(profile, from, to, Number(values.top)))

// What an external guardrail check adds to a call (issue #43): the latency of a chat call
// through a gateway with no policy, against one whose policy asks a webhook check, a
// moderation check, or both, each service on loopback answering at once (allow). What is
// left is the gateway's own cost of a check: gathering the texts, signing, one HTTP round
// trip on a kept-alive connection, validating the answer. Calls go one at a time, the four
// sides alternating call by call so the machine's load drifts over all alike; the first
// round is a warm-up; medians and p95 over the rest.
//
//   node bench/guardrails-external.ts [calls per side]   e.g. node bench/guardrails-external.ts 400
import { startCheckWebhook, startModeration } from '../test/guardrails/external-servers.ts'
import { startTollgate, startUpstream } from '../test/helpers/gateway.ts'
import { machine } from './machine.ts'

const MODEL = 'gpt-oss-120b'
const SIDES = ['none', 'webhook', 'moderation', 'both'] as const
type Side = (typeof SIDES)[number]

const BODY = JSON.stringify({
  model: MODEL,
  max_tokens: 5,
  messages: [
    { role: 'system', content: 'You are the support assistant of an online shop. Answer briefly.' },
    { role: 'user', content: 'Hallo, ich habe am 12.11. bestellt und noch nichts bekommen. Wann kommt das Paket?' },
  ],
})

export async function benchExternalChecks(calls = 400): Promise<string> {
  const upstream = await startUpstream()
  const hook = await startCheckWebhook()
  const moderation = await startModeration()
  const webhook = { name: 'dlp', type: 'webhook', url: hook.url, secretEnv: 'BENCH_HOOK_SECRET', onError: 'closed' }
  const mod = { name: 'moderation', type: 'moderation', backend: 'mod', onError: 'closed' }
  const externals: Record<Side, unknown[]> = { none: [], webhook: [webhook], moderation: [mod], both: [mod, webhook] }
  const gw = await startTollgate({
    dropRequestLogs: true,
    env: { BENCH_HOOK_SECRET: hook.secret },
    config: (doc) => {
      const tier = (side: Side) => ({ default: {}, ...(side === 'none' ? {} : { guardrails: side }) })
      doc.plans = { defaultTier: 'none', tiers: Object.fromEntries(SIDES.map((s) => [s, tier(s)])) }
      doc.guardrails = {
        policies: Object.fromEntries(SIDES.filter((s) => s !== 'none').map((s) => [s, { external: externals[s] }])),
      }
      doc.backends = {
        ...(doc.backends as object),
        up: { type: 'openai', baseUrl: `${upstream.url}/v1` },
        mod: { type: 'openai', baseUrl: `${moderation.url}/v1` },
      }
      for (const m of doc.models as Array<{ name: string; deployments: unknown[] }>)
        if (m.name === MODEL) m.deployments = [{ backend: 'up' }]
    },
  })
  try {
    const keys = {} as Record<Side, string>
    for (const side of SIDES) keys[side] = (await gw.createKey({ tier: side })).key
    const samples: Record<Side, number[]> = { none: [], webhook: [], moderation: [], both: [] }
    const warmup = Math.min(50, Math.floor(calls / 5))
    for (let i = 0; i < warmup + calls; i++)
      for (const side of SIDES) {
        const started = performance.now()
        const res = await fetch(`${gw.url}/v2/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${keys[side]}`, 'content-type': 'application/json' },
          body: BODY,
        })
        await res.arrayBuffer()
        if (res.status !== 200) throw new Error(`${side}: ${res.status}`)
        if (i >= warmup) samples[side].push(performance.now() - started)
      }
    const at = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * q)] ?? NaN
    const base = at(samples.none, 0.5)
    const rows = SIDES.map((side) => {
      const p50 = at(samples[side], 0.5)
      const p95 = at(samples[side], 0.95)
      return `| ${side} | ${p50.toFixed(2)} | ${p95.toFixed(2)} | ${side === 'none' ? '—' : `+${(p50 - base).toFixed(2)}`} |`
    })
    return [
      `${calls} calls per side, one at a time, sides alternating.`,
      machine(),
      '',
      '| policy | p50 ms | p95 ms | added at p50, ms |',
      '| --- | ---: | ---: | ---: |',
      ...rows,
    ].join('\n')
  } finally {
    await gw.stop()
    await upstream.stop()
    await hook.close()
    await moderation.close()
  }
}

if (import.meta.main) console.log(await benchExternalChecks(Number(process.argv[2] ?? 400)))

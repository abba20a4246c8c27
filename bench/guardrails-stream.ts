// What reply checks on streams cost (issue #43): two gateways in front of one fake upstream
// that streams a 2,000-character reply one word per event, an event every `gapMs`; one with
// no policy, one whose policy checks replies with every built-in detector (each at `flag`,
// so the whole stream is scanned and passes). For each call: the time to the first text a
// client reads, the time to the stream's end, and the gateway's CPU per call; medians over
// the calls, the two gateways alternating. The first text is held back until 256 characters
// have come after it (reply-check.ts): that is the delay added at the start; at the end
// there is none beyond the scan. Also: the window alone, CPU per event over a 1 MB stream.
//
//   node bench/guardrails-stream.ts [calls] [gapMs]   e.g. node bench/guardrails-stream.ts 40 2
import { DETECTORS } from '../src/guardrails/detectors.ts'
import type { Rule } from '../src/guardrails/policy.ts'
import { replyWindow } from '../src/guardrails/reply-check.ts'
import { startFakeUpstream } from '../test/helpers/fake-upstream.ts'
import type { RunningTollgate } from '../test/helpers/gateway.ts'
import { EVERY_DETECTOR_FLAGGED, startPolicyGateway } from './guardrails.ts'
import { cpuMsOf } from './proxy-rig.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const REPLY = 'The order ships within two working days and the return window is thirty days. '.repeat(25)

export async function benchGuardrailsStream(calls = 40, gapMs = 2): Promise<string> {
  const upstream = await startFakeUpstream({ replyText: REPLY, eventDelayMs: gapMs })
  const start = (policy: boolean): Promise<RunningTollgate> =>
    startPolicyGateway(upstream.url, MODEL, policy ? { replies: EVERY_DETECTOR_FLAGGED } : undefined)
  const sides = { off: await start(false), on: await start(true) }
  const lines: string[] = []
  try {
    const keys = { off: (await sides.off.createKey()).key, on: (await sides.on.createKey()).key }
    const got = {
      off: { first: [] as number[], end: [] as number[], cpu: [] as number[] },
      on: { first: [] as number[], end: [] as number[], cpu: [] as number[] },
    }
    for (let i = 0; i < calls * 2; i++) {
      const side = i % 2 === 0 ? 'off' : 'on'
      const gw = sides[side]
      const cpu0 = cpuMsOf(gw.child.pid!)
      const t0 = performance.now()
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${keys[side]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      })
      let first: number | undefined
      const decoder = new TextDecoder()
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        if (first === undefined && decoder.decode(chunk).includes('"content":"T')) first = performance.now() - t0
      const end = performance.now() - t0
      if (i >= 2) {
        got[side].first.push(first ?? NaN)
        got[side].end.push(end)
        got[side].cpu.push(cpuMsOf(gw.child.pid!) - cpu0)
      }
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
    const words = REPLY.split(' ').length
    lines.push(
      `Streams of ${REPLY.length} characters (${words} events, one every ${gapMs} ms), ${calls} calls per side, medians:`,
      '',
      '| | no policy | replies checked (all 16 detectors) | ratio |',
      '|---|---|---|---|',
      ...(['first', 'end', 'cpu'] as const).map((k) => {
        const off = median(got.off[k])
        const on = median(got.on[k])
        const label = { first: 'first text read (ms)', end: 'stream ended (ms)', cpu: 'gateway CPU per call (ms)' }[k]
        return `| ${label} | ${off.toFixed(1)} | ${on.toFixed(1)} | ${(on / off).toFixed(2)}× |`
      }),
    )
  } finally {
    await Promise.all([sides.off.stop(), sides.on.stop(), upstream.close()])
  }
  // The window alone: a 1 MB stream in 6-character events, every detector at flag.
  const rules: Rule[] = [...DETECTORS.values()].map((detector) => ({ detector, action: 'flag' }))
  const text = REPLY.repeat(Math.ceil((1024 * 1024) / REPLY.length))
  const window = replyWindow(rules, () => {})
  const t0 = performance.now()
  let events = 0
  for (let i = 0; i < text.length; i += 6, events++) window.push('x', text.slice(i, i + 6))
  window.end()
  const us = ((performance.now() - t0) * 1000) / events
  lines.push('', `The window alone, 1 MB in ${events} events of 6 characters: ${us.toFixed(1)} µs per event.`)
  return lines.join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await benchGuardrailsStream(Number(process.argv[2] ?? 40), Number(process.argv[3] ?? 2)))
}

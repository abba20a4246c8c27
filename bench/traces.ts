// What traces cost (issue #26): the gateway's CPU per chat call with tracing off, on and
// exporting every call to a local OTLP/HTTP sink, and on with the sampler dropping every
// trace (OTEL_TRACES_SAMPLER=always_off: the spans are made, never exported). The three
// gateways run at once in front of one upstream process, and the bursts alternate between
// them, so the machine's load drifts over all alike. CPU is the gateway process's user +
// system time over its calls (/proc/<pid>/stat); the first round is a warm-up and the
// median of the rest is shown, as a ratio to tracing off in the same run.
//
//   node bench/traces.ts [rounds] [calls per round]   e.g. node bench/traces.ts 10 400
import { createServer } from 'node:http'
import { startTollgate, startUpstream, type RunningTollgate } from '../test/helpers/gateway.ts'
import { machine } from './machine.ts'
import { chatCpuPerCall } from './proxy-rig.ts'

const MODEL = 'gpt-oss-120b'
const CONCURRENCY = 8
const SIDES = ['off', 'on', 'on, sampled out'] as const
type Side = (typeof SIDES)[number]

export async function benchTraces(rounds = 10, calls = 400): Promise<string> {
  // The sink takes what the exporter sends and says it was taken; it counts requests and bytes.
  const sink = { requests: 0, bytes: 0 }
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (sink.bytes += chunk.length))
    req.on('end', () => {
      sink.requests++
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const sinkUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  const upstream = await startUpstream()
  const start = (tracing: boolean, env: Record<string, string> = {}): Promise<RunningTollgate> =>
    startTollgate({
      dropRequestLogs: true,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, ...env },
      config: (doc) => {
        doc.tracing = { enabled: tracing }
        doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {} } } }
        doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: `${upstream.url}/v1` } }
        for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
          if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
      },
    })
  const gateways: Record<Side, RunningTollgate> = {
    off: await start(false),
    on: await start(true),
    'on, sampled out': await start(true, { OTEL_TRACES_SAMPLER: 'always_off' }),
  }
  try {
    const keys = Object.fromEntries(
      await Promise.all(SIDES.map(async (side) => [side, (await gateways[side].createKey()).key])),
    ) as Record<Side, string>
    const samples: Record<Side, number[]> = { off: [], on: [], 'on, sampled out': [] }
    for (let round = 0; round <= rounds; round++) {
      for (const side of SIDES) {
        const ms = await burst(gateways[side], keys[side], calls)
        if (round > 0) samples[side].push(ms)
      }
    }
    const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
    const off = median(samples.off)
    const rows = SIDES.map((side) => {
      const ms = median(samples[side])
      return `| ${side} | ${(ms * 1000).toFixed(0)} | ${(ms / off).toFixed(2)} |`
    })
    return [
      `## Traces: CPU per call, off vs on (bench/traces.ts)`,
      '',
      `${rounds} rounds × ${calls} non-streamed chat calls per gateway (${CONCURRENCY} at a time), the three`,
      "gateways alternating; one upstream process behind them. CPU is the gateway process's user + system time",
      'per call, the median round; the ratio is to tracing off in the same run. "on" exports every call\'s four',
      'spans (call, admission, upstream attempt, settlement) to a local OTLP/HTTP sink; "on, sampled out" makes',
      'them under OTEL_TRACES_SAMPLER=always_off and exports none.',
      '',
      '| tracing | CPU µs per call | ratio to off |',
      '|---|---|---|',
      ...rows,
      '',
      `The sink took ${sink.requests} exports, ${(sink.bytes / 1024).toFixed(0)} KiB in all.`,
      '',
      machine(),
    ].join('\n')
  } finally {
    await Promise.all(SIDES.map((side) => gateways[side].stop()))
    await upstream.stop()
    await new Promise<void>((done) => server.close(() => done()))
  }
}

function burst(gw: RunningTollgate, key: string, calls: number): Promise<number> {
  const body = { model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 5 }
  return chatCpuPerCall(gw, key, body, calls, CONCURRENCY)
}

if (import.meta.main) {
  const [rounds = '10', calls = '400'] = process.argv.slice(2)
  process.stdout.write(`${await benchTraces(Number(rounds), Number(calls))}\n`)
}

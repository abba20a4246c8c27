// Lines per second of a batch against the same requests sent straight to /v2 (32 at once),
// in the same run, on the embedded store and the default mock: what the batch machinery
// (a stored /queue request per line, the runner's window and its looks) costs in pace; then
// the p50/p99 of interactive /queue calls of the same key, alone and while a batch of as
// many lines runs (its lines wait behind them in the key's line: the added p99 is the cost).
// Usage: node bench/batches.ts [lines]
import { toFile } from 'openai'
import { startTollgate } from '../test/helpers/gateway.ts'
import { sdkClient } from '../test/helpers/sdk-gateway.ts'

const LINES = Number(process.argv[2] ?? 1000)
const MODEL = 'gpt-oss-120b'
const body = (i: number) => ({
  model: MODEL,
  messages: [{ role: 'user' as const, content: `line ${i}` }],
  max_tokens: 16,
})

const gw = await startTollgate({ dropRequestLogs: true })
try {
  const key = await gw.createKey({ tier: 'Standard4000', limits: { '*': { rpm: 1_000_000, tpm: 1_000_000_000 } } })
  const client = sdkClient(gw, key.key)

  let next = 0
  const direct = performance.now()
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < LINES) await client.chat.completions.create(body(next++))
    }),
  )
  const directS = (performance.now() - direct) / 1000

  const text = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions', body: body(i) }),
  ).join('\n')
  const file = await client.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' })
  const start = performance.now()
  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  let status = batch.status
  while (status !== 'completed' && status !== 'failed') {
    await new Promise((resolve) => setTimeout(resolve, 100))
    status = (await client.batches.retrieve(batch.id)).status
  }
  const batchS = (performance.now() - start) / 1000

  // Interactive /queue calls (4 at once, 200 in all), alone and during a second batch.
  const interactive = async (): Promise<{ p50: number; p99: number }> => {
    const times: number[] = []
    let n = 0
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (n++ < 200) {
          const t0 = performance.now()
          const res = await fetch(`${gw.url}/queue/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
            body: JSON.stringify(body(n)),
          })
          await res.arrayBuffer()
          if (res.status !== 200) throw new Error(`interactive call: ${res.status}`)
          times.push(performance.now() - t0)
        }
      }),
    )
    times.sort((a, b) => a - b)
    const at = (q: number) => Number((times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0).toFixed(1))
    return { p50: at(0.5), p99: at(0.99) }
  }
  const alone = await interactive()
  const second = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  while ((await client.batches.retrieve(second.id)).status === 'validating')
    await new Promise((resolve) => setTimeout(resolve, 20))
  const during = await interactive()
  const inFlight = (await client.batches.retrieve(second.id)).request_counts
  console.log(
    JSON.stringify({
      lines: LINES,
      status,
      direct_v2_lines_per_s: Math.round(LINES / directS),
      batch_lines_per_s: Math.round(LINES / batchS),
      ratio: Number((directS / batchS).toFixed(2)),
      interactive_ms_alone: alone,
      interactive_ms_during_batch: during,
      added_p99_ms: Number((during.p99 - alone.p99).toFixed(1)),
      batch_lines_done_while_measuring: inFlight?.completed,
    }),
  )
} finally {
  await gw.stop()
}

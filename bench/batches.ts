// Lines per second of a batch against the same requests sent straight to /v2 (32 at once),
// in the same run, on the embedded store and the default mock: what the batch machinery
// (a stored /queue request per line, the runner's window and its looks) costs in pace.
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
  console.log(
    JSON.stringify({
      lines: LINES,
      status,
      direct_v2_lines_per_s: Math.round(LINES / directS),
      batch_lines_per_s: Math.round(LINES / batchS),
      ratio: Number((directS / batchS).toFixed(2)),
    }),
  )
} finally {
  await gw.stop()
}

// A 10,000-line batch on a running gateway, through the official SDK, on the embedded store
// and on Redis: it completes with every line's result in the output file once, and its usage
// exact: the batch's request_counts and usage, the sum of the output file's lines, and what
// the key was metered (requests, tokens and cost, in nano-units at the tier's batch price)
// agree. The mock backend is fast and the tier's limits generous, so the time is the
// gateway's own; it is printed (a comment in the TAP output). One file per store
// (ten-thousand-embedded.test.ts, ten-thousand-redis.test.ts): each has tap's whole file
// timeout, and the two can run side by side.
import { toFile } from 'openai'
import type { Test } from 'tap'
import { untilBatch } from '../helpers/batches.ts'
import { startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { PRICED, PRICED_MODEL } from '../helpers/plans.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const N = Number(process.env.BATCH_LINES ?? 10_000)
/**
 * Its lines name four models: each (key, model) line of the queue admits one request at a
 * time, so four models run four lines side by side (docs/batches.md, "How fast").
 */
const MODELS = [PRICED_MODEL, 'gpt-oss-120b', 'Llama-3.3-70B-Instruct', 'Qwen3-30B-A3B-FP8']

interface OutputLine {
  custom_id: string
  response: { status_code: number; body: { usage: { prompt_tokens: number; completion_tokens: number } } }
  error: null
}

export async function suite(t: Test, base: StartOptions): Promise<void> {
  const gw = await startTollgate({
    ...base,
    dropRequestLogs: true,
    config: (doc) => {
      base.config?.(doc)
      doc.plans = {
        defaultTier: 'Bulk',
        tiers: {
          Bulk: {
            default: { rpm: 1_000_000, tpm: 100_000_000, ...PRICED },
            batches: { priceMultiplier: 0.5 },
            storageCaps: { queuedRequests: 100_000 },
          },
        },
      }
      const backends = doc.backends as Record<string, Record<string, unknown>>
      Object.assign(backends.mock ?? {}, { tokensPerSecond: 1_000_000 })
    },
  })
  t.teardown(() => gw.stop())
  const { key, id } = await gw.createKey({ tier: 'Bulk' })
  const client = sdkClient(gw, key)
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `l-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: {
        model: MODELS[i % MODELS.length],
        messages: [{ role: 'user', content: `line ${i} ${'x '.repeat(i % 7)}` }],
        max_tokens: 3,
      },
    }),
  )
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  const started = Date.now()
  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const done = await untilBatch(client, created.id, (b) => b.status === 'completed' || b.status === 'failed', {
    ms: 600_000,
    stepMs: 500,
  })
  t.comment(`${N} lines in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  t.equal(done.status, 'completed')
  t.same(done.request_counts, { total: N, completed: N, failed: 0 })
  t.equal(done.error_file_id, null, 'no line failed')

  const text = await (await client.files.content(done.output_file_id ?? '')).text()
  const out = text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as OutputLine)
  t.equal(out.length, N, 'one output line per input line')
  const ids = new Set(out.map((l) => l.custom_id))
  t.equal(ids.size, N, 'each custom_id once')
  t.ok(
    lines.every((_, i) => ids.has(`l-${i}`)),
    'every line is there',
  )
  t.ok(
    out.every((l) => l.response.status_code === 200 && l.error === null),
    'each a 200',
  )
  const input = out.reduce((sum, l) => sum + l.response.body.usage.prompt_tokens, 0)
  const output = out.reduce((sum, l) => sum + l.response.body.usage.completion_tokens, 0)
  t.same(
    done.usage && [done.usage.input_tokens, done.usage.output_tokens],
    [input, output],
    "the batch's usage is its lines'",
  )

  const usage = await pollUntil(
    () => linesUsage(gw, id),
    (x) => x.requests === N,
    200,
    100,
  )
  t.ok(usage.met, 'every line metered')
  t.match(usage.value, { requests: N, input_tokens: input, output_tokens: output, batch_requests: N }, 'once each')
  // Prices in micro-units per million tokens, halved by the tier's batch multiplier: nano-units.
  const nanos = (550_000 * input + 1_650_000 * output) / 1000
  t.equal(usage.value.cost_nanos, nanos, 'the cost exact, at half the plan price')
  t.equal(usage.value.batch_cost_nanos, nanos, 'all of it batch lines')
}

/** The key's usage of the lines' models (the admin API's rows; the upload and the create are metered too, apart). */
async function linesUsage(gw: RunningTollgate, keyId: string): Promise<Record<string, number>> {
  const res = await fetch(`${gw.url}/admin/keys/${keyId}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  const rows = ((await res.json()) as { by_model: Array<Record<string, unknown>> }).by_model.filter((r) =>
    MODELS.includes(String(r.model)),
  )
  const sum = (field: string, nanos = false): number =>
    rows.reduce((n, r) => n + (nanos ? Math.round(Number(r[field]) * 1e9) : Number(r[field])), 0)
  return {
    requests: sum('requests'),
    input_tokens: sum('input_tokens'),
    output_tokens: sum('output_tokens'),
    batch_requests: sum('batch_requests'),
    cost_nanos: sum('cost', true),
    batch_cost_nanos: sum('batch_cost', true),
  }
}

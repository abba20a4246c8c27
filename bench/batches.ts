// Batches (docs/batches.md), in one run on the embedded store and the default mock:
//  1. pace: lines per second of a batch against the same requests sent straight to /v2
//     (32 at once), and against the deployment's declared capacity (its rpm): the share of
//     the capacity a batch uses when nothing else limits it;
//  2. interactive /queue calls of the same key (4 at once), alone and while a batch of as
//     many lines runs, no limit near: the added p50/p99 (its lines wait behind them in the
//     key's line);
//  3. under a tight limit: a key of TIGHT requests per window (limits.windowMs is WINDOW_MS
//     here, so windows pass during the run), one interactive /v2 caller every GAP_MS, alone
//     and while a batch runs on the same key: p50/p99, their ratio, and the calls refused
//     (429) in each phase: the batch takes the room they leave, from its pool (limits/pools.ts);
//  4. after a quiet window: a batch fills a key's tight window while no interactive call
//     comes for a window and a half, then the interactive caller starts: its refusals (429)
//     and p99 against phase 3's alone. Before the batch pool the first calls found the
//     window spent by the batch (up to one window of 429s); with it, none.
// Usage: node bench/batches.ts [lines] [--root <checkout>] (another checkout's gateway: a before/after)
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { toFile } from 'openai'
import { startTollgate } from '../test/helpers/gateway.ts'
import { sdkClient } from '../test/helpers/sdk-gateway.ts'
import { machine } from './machine.ts'

const { values, positionals } = parseArgs({
  options: { root: { type: 'string', default: resolve(import.meta.dirname, '..') } },
  allowPositionals: true,
})
const LINES = Number(positionals[0] ?? 1000)
const MODEL = 'gpt-oss-120b'
/** The deployment's declared capacity, requests a minute. */
const CAPACITY_RPM = 12_000
const WINDOW_MS = 2000
const TIGHT = 60
const GAP_MS = 250
const INTERACTIVE = 60
const body = (i: number) => ({
  model: MODEL,
  messages: [{ role: 'user' as const, content: `line ${i}` }],
  max_tokens: 16,
})

const quantiles = (times: number[]): { p50: number; p99: number } => {
  const sorted = [...times].sort((a, b) => a - b)
  const at = (q: number) => Number((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(1))
  return { p50: at(0.5), p99: at(0.99) }
}

const gw = await startTollgate({
  root: resolve(values.root),
  dropRequestLogs: true,
  config: (doc) => {
    ;(doc.limits as Record<string, unknown>).windowMs = WINDOW_MS
    const models = doc.models as Array<{ name: string; deployments: Array<Record<string, unknown>> }>
    const model = models.find((m) => m.name === MODEL)
    if (model !== undefined) model.deployments = model.deployments.map((d) => ({ ...d, rpm: CAPACITY_RPM }))
  },
})
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

  const upload = async (c: typeof client, lines: number): Promise<string> => {
    const text = Array.from({ length: lines }, (_, i) =>
      JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/chat/completions', body: body(i) }),
    ).join('\n')
    return (await c.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' })).id
  }
  const create = (c: typeof client, file: string) =>
    c.batches.create({ input_file_id: file, endpoint: '/v1/chat/completions', completion_window: '24h' })
  const running = async (c: typeof client, id: string): Promise<void> => {
    while ((await c.batches.retrieve(id)).status === 'validating')
      await new Promise((resolve) => setTimeout(resolve, 20))
  }

  const file = await upload(client, LINES)
  const start = performance.now()
  const batch = await create(client, file)
  let status = batch.status
  while (status !== 'completed' && status !== 'failed') {
    await new Promise((resolve) => setTimeout(resolve, 100))
    status = (await client.batches.retrieve(batch.id)).status
  }
  const batchS = (performance.now() - start) / 1000

  // 2. Interactive /queue calls (4 at once, 200 in all), alone and during a second batch.
  const queued = async (): Promise<{ p50: number; p99: number }> => {
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
    return quantiles(times)
  }
  const alone = await queued()
  const second = await create(client, file)
  await running(client, second.id)
  const during = await queued()
  const afterPhase = await client.batches.retrieve(second.id)
  const inFlight = afterPhase.request_counts
  // A batch that ended before the interactive calls did measured them partly alone: said in the output.
  const outlasted = afterPhase.status === 'in_progress'
  if (outlasted) await client.batches.cancel(second.id)

  // 3. A tight limit: one interactive /v2 caller, alone and while a batch runs on the key.
  const tight = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: TIGHT } } })
  const tightClient = sdkClient(gw, tight.key)
  const live = async (secret = tight.key): Promise<{ p50: number; p99: number; refused: number }> => {
    const times: number[] = []
    let refused = 0
    for (let i = 0; i < INTERACTIVE; i++) {
      const t0 = performance.now()
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify(body(i)),
      })
      await res.arrayBuffer()
      if (res.status === 429) refused++
      else if (res.status !== 200) throw new Error(`interactive call: ${res.status}`)
      else times.push(performance.now() - t0)
      await new Promise((resolve) => setTimeout(resolve, GAP_MS))
    }
    return { ...quantiles(times), refused }
  }
  const tightAlone = await live()
  const tightBatch = await create(tightClient, await upload(tightClient, 2000))
  await running(tightClient, tightBatch.id)
  const before = (await tightClient.batches.retrieve(tightBatch.id)).request_counts?.completed ?? 0
  const t0 = performance.now()
  const tightDuring = await live()
  const tightS = (performance.now() - t0) / 1000
  const after = (await tightClient.batches.retrieve(tightBatch.id)).request_counts?.completed ?? 0
  await tightClient.batches.cancel(tightBatch.id)

  // 4. After a quiet window: the batch alone on a fresh tight key for a window and a half, then the caller.
  const quiet = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: TIGHT } } })
  const quietClient = sdkClient(gw, quiet.key)
  const quietBatch = await create(quietClient, await upload(quietClient, 2000))
  await running(quietClient, quietBatch.id)
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS * 1.5))
  const quietAfter = await live(quiet.key)
  await quietClient.batches.cancel(quietBatch.id)

  const batchRate = LINES / batchS
  console.log(
    JSON.stringify(
      {
        lines: LINES,
        status,
        direct_v2_lines_per_s: Math.round(LINES / directS),
        batch_lines_per_s: Math.round(batchRate),
        batch_vs_direct: Number((directS / batchS).toFixed(2)),
        capacity_requests_per_s: CAPACITY_RPM / 60,
        share_of_capacity_used: Number((batchRate / (CAPACITY_RPM / 60)).toFixed(3)),
        queue_interactive_ms_alone: alone,
        queue_interactive_ms_during_batch: during,
        queue_added_p99_ms: Number((during.p99 - alone.p99).toFixed(1)),
        batch_lines_done_while_measuring: inFlight?.completed,
        batch_outlasted_the_measurement: outlasted,
        tight_limit: `${TIGHT} requests per ${WINDOW_MS} ms window; one /v2 call every ${GAP_MS} ms`,
        tight_interactive_ms_alone: tightAlone,
        tight_interactive_ms_during_batch: tightDuring,
        tight_p99_ratio: Number((tightDuring.p99 / Math.max(tightAlone.p99, 0.1)).toFixed(2)),
        tight_added_p99_ms: Number((tightDuring.p99 - tightAlone.p99).toFixed(1)),
        tight_batch_lines_per_s: Number(((after - before) / tightS).toFixed(1)),
        tight_limit_per_s: (TIGHT / WINDOW_MS) * 1000,
        after_quiet_window_interactive_ms: quietAfter,
        after_quiet_window_p99_ratio: Number((quietAfter.p99 / Math.max(tightAlone.p99, 0.1)).toFixed(2)),
      },
      null,
      1,
    ),
  )
  console.log(JSON.stringify({ root: resolve(values.root) }))
  console.log(machine())
} finally {
  await gw.stop()
}

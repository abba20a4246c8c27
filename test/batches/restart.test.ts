// A gateway killed mid-batch (SIGKILL: no drain) and started again on the same state, on
// the embedded store and on Redis: the batch goes on where it was, every line's result is
// in the output file once, and the key is metered for each line (a line running at the kill
// may be metered twice: a known gap, below).
import { mkdtempSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { toFile } from 'openai'
import t, { type Test } from 'tap'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { modelUsage, untilBatch } from '../helpers/batches.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'gpt-oss-120b'
const N = 120

const metered = (gw: RunningTollgate, keyId: string): Promise<Record<string, unknown>> => modelUsage(gw, keyId, MODEL)

async function suite(t: Test, base: StartOptions): Promise<void> {
  const options: StartOptions = {
    ...base,
    // Lines that take a while (32 tokens at 200 a second): the kill finds the batch halfway.
    config: (doc) => {
      base.config?.(doc)
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 200
    },
    dataDir: join(mkdtempSync(join(tmpdir(), 'tollgate-batch-restart-')), 'data'),
    adminToken: `adm_${randomBytes(16).toString('hex')}`,
  }
  const first = await startTollgate(options)
  const key = await first.createKey({ tier: 'Standard4000' })
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 32 },
    }),
  )
  const client = sdkClient(first, key.key)
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const before = await untilBatch(client, batch.id, (b) => (b.request_counts?.completed ?? 0) >= 10, {
    ms: 120_000,
    stepMs: 50,
  })
  await first.stop('SIGKILL')
  t.ok((before.request_counts?.completed ?? 0) < N, `killed with ${before.request_counts?.completed} of ${N} done`)

  const second = await startTollgate(options)
  t.teardown(() => second.stop())
  const again = sdkClient(second, key.key)
  const done = await untilBatch(again, batch.id, (b) => b.status === 'completed', { ms: 120_000, stepMs: 50 })
  t.same(done.request_counts, { total: N, completed: N, failed: 0 }, 'no line lost')
  const text = await (await again.files.content(done.output_file_id ?? '')).text()
  const out = text
    .split('\n')
    .filter((l) => l !== '')
    .map(
      (l) =>
        JSON.parse(l) as {
          custom_id: string
          response: { body: { usage: { prompt_tokens: number; completion_tokens: number } } }
        },
    )
  t.equal(new Set(out.map((l) => l.custom_id)).size, N, 'each line once in the output')
  t.equal(out.length, N)
  const input = out.reduce((s, l) => s + l.response.body.usage.prompt_tokens, 0)
  const output = out.reduce((s, l) => s + l.response.body.usage.completion_tokens, 0)
  // Known gap, open work (docs/queue.md): a stored /queue request killed after its reply was
  // metered and before its result was recorded runs again and is metered again. So at most
  // the lines the runner had in the queue at the kill (its window, 32) are charged twice, each
  // whole; the exact "none charged twice" waits for stored requests charged by their id.
  const charged = (await metered(second, key.id)) as { requests: number }
  const perLine = { input: input / N, output: output / N }
  t.ok(
    charged.requests >= N && charged.requests <= N + 32,
    `every line charged, at most the window's twice: ${charged.requests} for ${N}`,
  )
  t.match(
    charged,
    { input_tokens: charged.requests * perLine.input, output_tokens: charged.requests * perLine.output },
    'each charge a whole line',
  )
}

t.test('embedded store', (t) => suite(t, {}))
t.test('redis store', (t) => suite(t, onSharedRedis(`tgtest-batchrs-${randomBytes(4).toString('hex')}:`)))

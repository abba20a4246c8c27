// A gateway killed after the queue took a batch's line and before the line was marked
// submitted, then down longer than the queue keeps the line's record and its charge id (2 ×
// queue.resultTtlSeconds): the line must not run again (src/batches/runner.ts, exactly
// once). The test makes that state after a SIGKILL, on the embedded store: the line back to
// "chosen, not yet submitted", its stored request and its charge id gone, as downtime leaves
// them. The queue kept the line's id (QueueStore.submit keepIdUntil), so its submit again is
// refused: the line ends `result_expired`, and the key is charged for it once.
import { mkdtempSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import t from 'tap'
import { BATCHES_DATABASE_FILE } from '../../src/batches/embedded-store.ts'
import { QUEUE_DATABASE_FILE } from '../../src/queue/embedded-store.ts'
import { DATABASE_FILE } from '../../src/store/embedded.ts'
import { batchOf, modelUsage, untilBatch } from '../helpers/batches.ts'
import { startTollgate, type StartOptions } from '../helpers/gateway.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'gpt-oss-120b'
const N = 40

interface ErrorRow {
  readonly custom_id: string
  readonly error: { readonly code: string } | null
}

t.test('a line taken just before a crash, then purged, is not run again', async (t) => {
  const options: StartOptions = {
    // Lines that take a while (32 tokens at 200 a second): the kill finds the batch halfway.
    config: (doc) => {
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 200
    },
    dataDir: join(mkdtempSync(join(tmpdir(), 'tollgate-batch-crash-')), 'data'),
    adminToken: `adm_${randomBytes(16).toString('hex')}`,
  }
  const first = await startTollgate(options)
  const key = await first.createKey({ tier: 'Standard4000' })
  const client = sdkClient(first, key.key)
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 32 },
    }),
  )
  const batch = await batchOf(client, lines)
  await untilBatch(client, batch.id, (b) => (b.request_counts?.completed ?? 0) >= 3, { ms: 120_000, stepMs: 20 })
  await first.stop('SIGKILL')

  // A line that ran and was charged, as a crash between the queue taking it and `submitted` leaves it.
  const batches = new DatabaseSync(join(options.dataDir ?? '', BATCHES_DATABASE_FILE))
  const row = batches
    .prepare(
      `SELECT idx, json_extract(line, '$.queueId') AS queue_id, json_extract(line, '$.customId') AS custom_id
       FROM batch_lines WHERE batch_id = ? AND json_extract(line, '$.result.kind') = 'response' ORDER BY idx LIMIT 1`,
    )
    .get(batch.id)
  t.ok(row, 'a line had run before the kill')
  const queueId = String(row?.queue_id)
  const customId = String(row?.custom_id)
  batches
    .prepare(
      `UPDATE batch_lines SET line = json_set(line, '$.result', json('null'), '$.submitted', json('false'))
       WHERE batch_id = ? AND idx = ?`,
    )
    .run(batch.id, Number(row?.idx))
  batches.close()
  // Its record purged (resultTtlSeconds passed twice while the gateway was down), its charge id too.
  const queue = new DatabaseSync(join(options.dataDir ?? '', QUEUE_DATABASE_FILE))
  t.equal(Number(queue.prepare('DELETE FROM requests WHERE id = ?').run(queueId).changes), 1, 'its request purged')
  queue.close()
  const store = new DatabaseSync(join(options.dataDir ?? '', DATABASE_FILE))
  store.prepare('DELETE FROM applied_writes WHERE id = ?').run(`queue:${queueId}`)
  store.close()

  const second = await startTollgate(options)
  t.teardown(() => second.stop())
  const again = sdkClient(second, key.key)
  const done = await untilBatch(again, batch.id, (b) => b.status === 'completed', { ms: 120_000, stepMs: 50 })
  t.same(done.request_counts, { total: N, completed: N - 1, failed: 1 }, 'the line is not run again')
  const errors = (await (await again.files.content(done.error_file_id ?? '')).text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ErrorRow)
  t.same(
    errors.map((e) => [e.custom_id, e.error?.code]),
    [[customId, 'result_expired']],
    'it ends as a result no longer kept',
  )
  t.match(await modelUsage(second, key.id, MODEL), { requests: N }, 'each line charged once')
})

// A batch past its completion window expires, on the embedded store and on Redis: no line
// starts after it, the lines waiting in the queue are taken back, and it ends `expired`
// with the lines that ran in its output file and every other line in its error file as
// `batch_expired`; webhooks say batch.expired. Twenty-four hours are not waited: the
// batch's expires_at is moved into the past in its store, as the clock passing it would.
import { randomBytes } from 'node:crypto'
import type OpenAI from 'openai'
import { toFile } from 'openai'
import t, { type Test } from 'tap'
import { openEmbeddedBatchStore } from '../../src/batches/embedded-store.ts'
import type { BatchStore } from '../../src/batches/port.ts'
import { createRedisBatchStore } from '../../src/batches/redis-store.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { untilBatch } from '../helpers/batches.ts'
import { onSharedRedis, startTollgate, type StartOptions } from '../helpers/gateway.ts'
import { REDIS_URL } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'

const MODEL = 'gpt-oss-120b'

interface FileLine {
  custom_id: string
  response: { status_code: number } | null
  error: { code: string; message: string } | null
}

async function fileLines(client: OpenAI, id: string | null | undefined): Promise<FileLine[]> {
  if (id === null || id === undefined) return []
  const text = await (await client.files.content(id)).text()
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as FileLine)
}

async function suite(t: Test, base: StartOptions, storeOf: (dataDir: string) => BatchStore): Promise<void> {
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const gw = await startTollgate({
    ...base,
    config: (doc) => {
      base.config?.(doc)
      doc.webhooks = {
        allowAddresses: ['127.0.0.1'],
        retry: { baseDelayMs: 100, maxDelayMs: 800 },
        sweepIntervalMs: 200,
      }
    },
  })
  t.teardown(() => gw.stop())
  const hook = await fetch(`${gw.url}/admin/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: receiver.url }),
  })
  receiver.secret = String(((await hook.json()) as { secret: string }).secret)

  // One request a minute: the first line runs, the other two wait for the next window.
  const { key } = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 1 } } })
  const client = sdkClient(gw, key)
  const input = [0, 1, 2].map((i) =>
    JSON.stringify({
      custom_id: `e-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 4 },
    }),
  )
  const file = await client.files.create({
    file: await toFile(Buffer.from(input.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const running = await untilBatch(client, batch.id, (b) => b.request_counts?.completed === 1)
  t.equal(running.status, 'in_progress', 'one line ran; two wait for the limit')
  t.equal((running.expires_at ?? 0) - running.created_at, 24 * 3600, 'its window: 24 h')

  // The window ends.
  const store = storeOf(gw.dataDir)
  t.ok(await store.update(batch.id, { expiresAt: Date.now() - 1000 }))
  await store.close()

  const expired = await untilBatch(client, batch.id, (b) => b.status === 'expired')
  t.ok(expired.expired_at !== null && expired.finalizing_at !== null, 'expired_at and finalizing_at set')
  t.same(expired.request_counts?.completed, 1, 'the line that ran is kept')
  const out = await fileLines(client, expired.output_file_id)
  t.same(
    out.map((l) => [l.custom_id, l.response?.status_code]),
    [['e-0', 200]],
    'its result in the output file',
  )
  const errors = await fileLines(client, expired.error_file_id)
  t.same(
    errors.map((l) => [l.custom_id, l.error?.code]).sort(),
    [
      ['e-1', 'batch_expired'],
      ['e-2', 'batch_expired'],
    ],
    'the lines that never ran: batch_expired in the error file',
  )
  t.ok(
    errors.every((l) => l.response === null && /expired/.test(l.error?.message ?? '')),
    'with no response and a message that says so',
  )

  const deadline = Date.now() + 20_000
  let event: Record<string, unknown> | undefined
  while (event === undefined && Date.now() < deadline) {
    event = receiver.received.find((r) => r.type === 'batch.expired' && r.data.batch_id === batch.id)?.data
    if (event === undefined) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.match(
    event,
    { status: 'expired', request_counts: { total: 3, completed: 1 }, error_file_id: expired.error_file_id },
    'batch.expired by webhook',
  )
}

t.test('embedded store', (t) => suite(t, {}, (dataDir) => openEmbeddedBatchStore(dataDir)))
t.test('redis store', (t) => {
  const prefix = `tgtest-batch-expiry-${randomBytes(4).toString('hex')}:`
  const client = (): BatchStore =>
    createRedisBatchStore(createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-batch-expiry' }), prefix)
  return suite(t, onSharedRedis(prefix), client)
})

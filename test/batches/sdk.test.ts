// OpenAI's Batch API through the official SDK against a running gateway, on the embedded
// store and on Redis: files.create({purpose: 'batch'}), batches.create/retrieve/list/cancel
// and files.content of the output; usage exact per line (the batch's, each line's and the
// key's metered usage agree); another key gets 404 on everything of the batch; a file with
// malformed lines, an unknown model and another owner's file id fails with each reported on
// its line; a batch on a key with a small RPM limit is paced by the limiter in the room its
// key's interactive calls leave (the batch pool: limits/pools.ts), an interactive /queue call
// of the key goes before its remaining lines, and a cancel stops it, the lines that had run kept.
import { randomBytes } from 'node:crypto'
import type OpenAI from 'openai'
import { toFile } from 'openai'
import t, { type Test } from 'tap'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { modelUsage, untilBatch } from '../helpers/batches.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'

const MODEL = 'gpt-oss-120b'

interface OutputLine {
  id: string
  custom_id: string
  response: {
    status_code: number
    request_id: string
    body: { usage?: { prompt_tokens: number; completion_tokens: number } }
  } | null
  error: { code: string; message: string } | null
}

const line = (customId: string, content: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 16, ...extra },
  })

async function upload(client: OpenAI, lines: string[]): Promise<string> {
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  return file.id
}

async function outputLines(client: OpenAI, fileId: string | null | undefined): Promise<OutputLine[]> {
  if (fileId === null || fileId === undefined) return []
  const text = await (await client.files.content(fileId)).text()
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as OutputLine)
}

/** The status an SDK call was refused with (200: it was not). */
async function statusOf(call: Promise<unknown>): Promise<number> {
  return call.then(
    () => 200,
    (error: unknown) => (error as { status?: number }).status ?? 0,
  )
}

const keyUsage = (gw: RunningTollgate, keyId: string): Promise<Record<string, unknown>> => modelUsage(gw, keyId, MODEL)

/** Waits (bounded) for the receiver to have accepted a `type` event of the batch. */
async function delivered(receiver: WebhookReceiver, type: string, batchId: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    const found = receiver.received.find((r) => r.type === type && r.data.batch_id === batchId)
    if (found !== undefined) return found.data
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`no ${type} event for ${batchId}`)
}

async function suite(t: Test, base: StartOptions): Promise<void> {
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const options: StartOptions = {
    ...base,
    config: (doc) => {
      base.config?.(doc)
      doc.webhooks = {
        allowAddresses: ['127.0.0.1'],
        retry: { baseDelayMs: 100, maxDelayMs: 800 },
        sweepIntervalMs: 200,
      }
    },
  }
  const gw = await startTollgate(options)
  t.teardown(() => gw.stop())
  const hook = await fetch(`${gw.url}/admin/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: receiver.url }),
  })
  t.equal(hook.status, 201)
  receiver.secret = String(((await hook.json()) as { secret: string }).secret)
  const a = await gw.createKey({ tier: 'Standard4000' })
  const b = await gw.createKey({ tier: 'Standard4000' })
  const clientA = sdkClient(gw, a.key)
  const clientB = sdkClient(gw, b.key)

  const N = 12
  const inputId = await upload(
    clientA,
    Array.from({ length: N }, (_, i) => line(`req-${i}`, `hello number ${i}`)),
  )
  const created = await clientA.batches.create({
    input_file_id: inputId,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { job: 'nightly' },
  })
  t.equal(created.object, 'batch')
  t.equal(created.status, 'validating')
  t.same(created.metadata, { job: 'nightly' })
  const done = await untilBatch(clientA, created.id, (x) => x.status === 'completed')
  t.same(done.request_counts, { total: N, completed: N, failed: 0 })
  t.equal(done.error_file_id, null, 'no errors')
  t.ok(done.completed_at !== null && done.in_progress_at !== null && done.finalizing_at !== null)
  const out = await outputLines(clientA, done.output_file_id)
  t.same(out.map((l) => l.custom_id).sort(), Array.from({ length: N }, (_, i) => `req-${i}`).sort(), 'every line once')
  t.ok(out.every((l) => l.response?.status_code === 200 && l.error === null && l.id.startsWith('batch_req_')))
  t.ok(out.every((l) => typeof l.response?.request_id === 'string'))
  // Usage exact: each line's reply, the batch's sum, and what the key was metered agree.
  const input = out.reduce((sum, l) => sum + (l.response?.body.usage?.prompt_tokens ?? 0), 0)
  const output = out.reduce((sum, l) => sum + (l.response?.body.usage?.completion_tokens ?? 0), 0)
  t.ok(input > 0 && output > 0)
  const usage = (done as unknown as { usage: { input_tokens: number; output_tokens: number } }).usage
  t.same([usage.input_tokens, usage.output_tokens], [input, output], "the batch's usage is the sum of its lines'")
  const metered = await keyUsage(gw, a.id)
  t.match(metered, { requests: N, input_tokens: input, output_tokens: output }, 'each line metered once')

  t.match(
    await delivered(receiver, 'batch.completed', created.id),
    {
      status: 'completed',
      key_id: a.id,
      request_counts: { total: N, completed: N },
      output_file_id: done.output_file_id,
    },
    'batch.completed by webhook',
  )

  // Another key: nothing of this batch exists for it.
  for (const attempt of [
    () => clientB.batches.retrieve(created.id),
    () => clientB.batches.cancel(created.id),
    () => clientB.files.content(done.output_file_id ?? ''),
    () =>
      clientB.batches.create({ input_file_id: inputId, endpoint: '/v1/chat/completions', completion_window: '24h' }),
  ]) {
    t.equal(await statusOf(attempt()), 404)
  }
  t.same((await clientB.batches.list()).data, [], "B lists none of A's")

  // A file that fails validation: each thing wrong on its line.
  const foreign = await upload(clientB, [line('x', 'x')])
  const badId = await upload(clientA, [
    line('ok-1', 'fine'),
    '{not json',
    line('ok-1', 'again'),
    JSON.stringify({ custom_id: 'u', method: 'POST', url: '/v1/embeddings', body: { model: MODEL, input: 'x' } }),
    line('m', 'x', { model: 'no-such-model' }),
    line('f', 'x', {
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: foreign } }] }],
    }),
    JSON.stringify({ custom_id: 'g', method: 'GET', url: '/v1/chat/completions', body: {} }),
  ])
  const bad = await clientA.batches.create({
    input_file_id: badId,
    endpoint: '/v2/chat/completions' as '/v1/chat/completions',
    completion_window: '24h',
  })
  const failed = await untilBatch(clientA, bad.id, (x) => x.status === 'failed')
  const errors = failed.errors?.data ?? []
  t.same(
    errors.map((e) => [e.line, e.code]),
    [
      [2, 'invalid_json_line'],
      [3, 'duplicate_custom_id'],
      [4, 'mismatched_endpoint'],
      [5, 'model_not_found'],
      [6, 'not_found'],
      [7, 'invalid_method'],
    ],
    'each bad line reported with what is wrong',
  )
  t.notMatch(JSON.stringify(errors), foreign, "another owner's id is not echoed")
  t.match(await delivered(receiver, 'batch.failed', bad.id), { status: 'failed' }, 'batch.failed by webhook')

  // Lists page newest first.
  const first = await clientA.batches.list({ limit: 1 })
  t.equal(first.data[0]?.id, bad.id)
  t.equal(first.has_more, true)
  const next = await clientA.batches.list({ limit: 1, after: bad.id })
  t.equal(next.data[0]?.id, created.id)
  t.equal(next.has_more, false)

  // A quiet key with 20 requests a minute: its batch uses the whole window, 20 lines; the
  // rest wait for the next window, and a cancel drops them.
  const quiet = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 20 } } })
  const quietClient = sdkClient(gw, quiet.key)
  const full = await quietClient.batches.create({
    input_file_id: await upload(
      quietClient,
      Array.from({ length: 22 }, (_, i) => line(`q-${i}`, `quiet ${i}`)),
    ),
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  t.equal((await untilBatch(quietClient, full.id, (x) => x.request_counts?.completed === 20)).status, 'in_progress')
  await quietClient.batches.cancel(full.id)
  const stopped = await untilBatch(quietClient, full.id, (x) => x.status === 'cancelled')
  t.equal(stopped.request_counts?.completed, 20, "20 lines in the 20-RPM key's window")
  t.equal((await keyUsage(gw, quiet.id)).requests, 20, 'each charged once')

  // A key with 3 requests a minute that made an interactive call: the batch takes the 2
  // requests it left, and its other lines wait for the limiter's next window. Meanwhile an
  // interactive /queue call of the key is admitted at once, before the batch's remaining
  // lines (it goes ahead of them in the key's line; the batch's use is not the interactive
  // calls'), and so is a live call; the key's fourth interactive call of the window is
  // refused: its own limit. Cancel stops the batch.
  const slow = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 3 } } })
  const slowClient = sdkClient(gw, slow.key)
  await slowClient.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'first' }] })
  const paced = await slowClient.batches.create({
    input_file_id: await upload(
      slowClient,
      Array.from({ length: 5 }, (_, i) => line(`p-${i}`, `paced ${i}`)),
    ),
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const halfway = await untilBatch(slowClient, paced.id, (x) => x.request_counts?.completed === 2)
  t.equal(halfway.status, 'in_progress')
  const interactive = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${slow.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'interactive' }], max_tokens: 4 }),
  })
  t.equal(interactive.status, 200, 'an interactive /queue call is admitted while the batch waits')
  t.equal(
    (await slowClient.batches.retrieve(paced.id)).request_counts?.completed,
    2,
    "it went before the batch's remaining lines",
  )
  t.equal(
    await statusOf(slowClient.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'live' }] })),
    200,
    'a live call is admitted too: the batch filled the window, not the interactive calls',
  )
  const refused = await slowClient.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'now' }] })
    .then(
      () => null,
      (error: unknown) => error as { status: number; headers: Headers },
    )
  t.equal(refused?.status, 429, "the key's interactive calls are at its limit (three in the window)")
  t.equal((await slowClient.batches.retrieve(paced.id)).request_counts?.completed, 2, 'no third line ran in the window')
  const cancelling = await slowClient.batches.cancel(paced.id)
  t.ok(['cancelling', 'cancelled'].includes(cancelling.status))
  const cancelled = await untilBatch(slowClient, paced.id, (x) => x.status === 'cancelled')
  t.equal(cancelled.request_counts?.completed, 2, 'the lines that ran are kept')
  const kept = await outputLines(slowClient, cancelled.output_file_id)
  t.equal(kept.length, 2)
  t.match(
    await delivered(receiver, 'batch.cancelled', paced.id),
    { status: 'cancelled', request_counts: { completed: 2 } },
    'batch.cancelled by webhook',
  )
  const dropped = await outputLines(slowClient, cancelled.error_file_id)
  t.ok(dropped.every((l) => l.error?.code === 'batch_cancelled'))
  t.equal(await statusOf(slowClient.batches.cancel(paced.id)), 409, 'an ended batch cannot be cancelled')
  t.equal((await keyUsage(gw, slow.id)).requests, 5, 'only the lines that ran are charged (and the interactive calls)')
}

t.test('embedded store', (t) => suite(t, {}))
t.test('redis store', (t) => suite(t, onSharedRedis(`tgtest-batches-${randomBytes(4).toString('hex')}:`)))

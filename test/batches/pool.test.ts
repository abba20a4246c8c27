// The batch pool (src/limits/pools.ts) against running gateways, on the embedded store, on
// Redis and on a Redis Cluster: a batch's lines are counted apart from its key's
// interactive calls, so a batch that filled its key's window never costs an interactive
// call its admission, and a batch uses only the room interactive calls leave.
//  - A key with 5 requests a minute runs a 7-line batch: 5 lines run in the window (a
//    batch alone runs at the key's whole limit). An interactive /v2 call is then admitted at
//    once, and so are the key's other interactive calls up to its limit of 5; the sixth is
//    refused: the key's limit still binds its interactive calls.
//  - A key with 4 requests a minute made 2 interactive calls: its batch runs the 2 lines
//    they left, and the key's interactive calls still get their 2 others.
import { randomBytes } from 'node:crypto'
import type OpenAI from 'openai'
import { toFile } from 'openai'
import t, { type Test } from 'tap'
import { onSharedRedis, startTollgate, type StartOptions } from '../helpers/gateway.ts'
import { modelUsage, untilBatch } from '../helpers/batches.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { ensureTopology, gatewayEnv } from '../helpers/topologies.ts'

const MODEL = 'gpt-oss-120b'

const line = (customId: string): string =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: MODEL, messages: [{ role: 'user', content: `line ${customId}` }], max_tokens: 8 },
  })

async function startBatch(client: OpenAI, lines: number, prefix: string): Promise<string> {
  const file = await client.files.create({
    file: await toFile(
      Buffer.from(Array.from({ length: lines }, (_, i) => line(`${prefix}-${i}`)).join('\n')),
      'in.jsonl',
    ),
    purpose: 'batch',
  })
  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  return batch.id
}

/** The status of an interactive /v2 call of the key (200: admitted). */
const interactive = (client: OpenAI): Promise<number> =>
  client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'now' }], max_tokens: 4 }).then(
    () => 200,
    (error: unknown) => (error as { status?: number }).status ?? 0,
  )

async function suite(t: Test, base: StartOptions): Promise<void> {
  const gw = await startTollgate(base)
  t.teardown(() => gw.stop())

  // A batch alone: the key's whole window, then interactive calls still get theirs.
  const filled = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 5 } } })
  const filledClient = sdkClient(gw, filled.key)
  const full = await startBatch(filledClient, 7, 'f')
  const ran = await untilBatch(filledClient, full, (x) => x.request_counts?.completed === 5)
  t.equal(ran.status, 'in_progress', '5 lines of 7 in the 5-RPM window')
  t.equal(
    await interactive(filledClient),
    200,
    'an interactive call after the batch filled the window: admitted at once',
  )
  const more = await Promise.all(Array.from({ length: 4 }, () => interactive(filledClient)))
  t.same(more, [200, 200, 200, 200], "the key's interactive calls get their whole limit")
  t.equal(await interactive(filledClient), 429, 'the sixth interactive call of the window is refused: its own limit')
  t.equal((await filledClient.batches.retrieve(full)).request_counts?.completed, 5, 'no other line ran in the window')
  await filledClient.batches.cancel(full)
  const cancelled = await untilBatch(filledClient, full, (x) => x.status === 'cancelled')
  t.equal(cancelled.request_counts?.completed, 5, 'the lines that ran are kept')
  t.equal((await modelUsage(gw, filled.id, MODEL)).requests, 10, '5 lines and 5 interactive calls, each charged once')

  // Interactive calls first: the batch takes what they left.
  const shared = await gw.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 4 } } })
  const sharedClient = sdkClient(gw, shared.key)
  t.same(await Promise.all([interactive(sharedClient), interactive(sharedClient)]), [200, 200])
  const rest = await startBatch(sharedClient, 4, 's')
  await untilBatch(sharedClient, rest, (x) => x.request_counts?.completed === 2)
  t.same(
    await Promise.all([interactive(sharedClient), interactive(sharedClient)]),
    [200, 200],
    'the interactive calls get the rest of their limit all the same',
  )
  t.equal(await interactive(sharedClient), 429, 'then the key is at its limit')
  t.equal(
    (await sharedClient.batches.retrieve(rest)).request_counts?.completed,
    2,
    'the batch ran the 2 lines the interactive calls left',
  )
  await sharedClient.batches.cancel(rest)
  await untilBatch(sharedClient, rest, (x) => x.status === 'cancelled')
}

t.test('embedded store', (t) => suite(t, {}))
t.test('redis store', (t) => suite(t, onSharedRedis(`tgtest-batchpool-${randomBytes(4).toString('hex')}:`)))
t.test('redis cluster', async (t) => {
  await ensureTopology('cluster')
  const { REDIS_URL: _url, ...secret } = onSharedRedis('').env ?? {}
  const prefix = `tgtest-batchpool-${randomBytes(4).toString('hex')}:`
  await suite(t, {
    env: { ...secret, ...gatewayEnv('cluster') },
    config: (doc) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = prefix
    },
  })
})

// A tier's batches (config plans.tiers.<tier>.batches) on a running gateway, through the
// official SDK: each cap from the tier (input file bytes and unfinished batches per key
// refused at create with OpenAI's codes, lines per batch reported by the failed batch), and
// a batch line charged at the tier's batch price, exact in nano-units (a tier that sets
// none: the plan's price, not flex's, though the lines run in the flex class), and shown
// apart in the key's usage (batch_requests, batch_cost).
import type OpenAI from 'openai'
import { toFile } from 'openai'
import t from 'tap'
import { modelUsage, untilBatch } from '../helpers/batches.ts'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { PRICED, PRICED_MODEL, startWithTiers } from '../helpers/plans.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = PRICED_MODEL

let gw: RunningTollgate
t.before(async () => {
  gw = await startWithTiers('Plain', {
    Plain: { default: { rpm: 1000, ...PRICED } },
    Half: { default: { rpm: 1000, ...PRICED }, batches: { priceMultiplier: 0.5 } },
    // One request of the model a minute: a batch of two stays unfinished.
    Tight: {
      default: { rpm: 1000, ...PRICED },
      models: { [MODEL]: { rpm: 1, ...PRICED } },
      batches: { maxLines: 2, maxFileBytes: 1000, maxOpen: 1 },
    },
    // One stored request at a time, and one request of the model a minute: a batch's third line finds the queue full.
    Full: {
      default: { rpm: 1000, ...PRICED },
      models: { [MODEL]: { rpm: 1, ...PRICED } },
      storageCaps: { queuedRequests: 1 },
    },
  })
})
t.teardown(() => gw.stop())

const line = (customId: string, content = 'hello there'): string =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 8 },
  })

async function create(client: OpenAI, lines: string[]): Promise<OpenAI.Batches.Batch> {
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  return client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
}

/** The error an SDK call was refused with. */
const refusal = (call: Promise<unknown>): Promise<{ status?: number; code?: string; message?: string }> =>
  call.then(
    () => ({}),
    (error: unknown) => error as { status?: number; code?: string; message?: string },
  )

t.test("a batch line is charged at its tier's batch price, exact in nano-units", async (t) => {
  for (const [tier, multiplier] of [
    ['Half', 0.5],
    ['Plain', 1],
  ] as const) {
    const { key, id } = await gw.createKey({ tier })
    const client = sdkClient(gw, key)
    const batch = await create(client, [line('a', 'one'), line('b', 'two words'), line('c', 'three more words')])
    const done = await untilBatch(client, batch.id, (b) => b.status === 'completed')
    t.same(done.request_counts, { total: 3, completed: 3, failed: 0 }, `${tier}: every line ran`)
    const row = await pollUntil(
      () => modelUsage(gw, id, MODEL),
      (x) => x.requests === 3,
      100,
      50,
    )
    t.ok(row.met, `${tier}: the three lines metered`)
    const input = Number(row.value.input_tokens)
    const output = Number(row.value.output_tokens)
    t.equal(input, done.usage?.input_tokens, "the batch's usage is the key's")
    t.equal(output, done.usage?.output_tokens)
    // Prices in micro-units per million tokens, times the multiplier, then ÷ 1000: nano-units.
    const nanos = Math.round((1.1e6 * multiplier * input + 3.3e6 * multiplier * output) / 1000)
    t.equal(Math.round(Number(row.value.cost) * 1e9), nanos, `${tier}: ${multiplier}× the plan's price`)
    t.equal(row.value.batch_requests, 3, `${tier}: the usage row counts them as batch lines`)
    t.equal(Math.round(Number(row.value.batch_cost) * 1e9), nanos, `${tier}: and their cost apart, the same`)
  }
})

t.test("a tier's caps: input file bytes, lines per batch, unfinished batches per key", async (t) => {
  const client = sdkClient(gw, (await gw.createKey({ tier: 'Tight' })).key)

  const big = await refusal(create(client, [line('a', 'x'.repeat(1200))]))
  t.equal(big.status, 400, 'a file over the tier maxFileBytes is refused at create')
  t.equal(big.code, 'invalid_file')
  t.match(big.message, /holds \d+ bytes; a batch's input file may hold 1000/)

  const long = await create(client, [line('a'), line('b'), line('c')])
  const failed = await untilBatch(client, long.id, (b) => b.status === 'failed')
  t.match(failed.errors?.data, [{ code: 'too_many_lines', message: /has 3 requests; a batch may hold 2/ }])

  const open = await create(client, [line('a'), line('b')])
  await untilBatch(client, open.id, (b) => b.status === 'in_progress')
  const second = await refusal(create(client, [line('a')]))
  t.equal(second.status, 429, 'a second unfinished batch is over the tier maxOpen')
  t.equal(second.code, 'batch_limit_exceeded')
  t.match(second.message, /has 1 batches not yet finished/)
  await client.batches.cancel(open.id)
  await untilBatch(client, open.id, (b) => b.status === 'cancelled')
  t.equal((await create(client, [line('a')])).status, 'validating', 'once it ended, another may start')
})

t.test(
  "a line the key's full queue refuses counts as a refused async request, as one from a client does",
  async (t) => {
    const client = sdkClient(gw, (await gw.createKey({ tier: 'Full' })).key)
    const refused = (): Promise<number> =>
      counterSum(gw, 'tollgate_queue_requests_total', { mode: 'async', outcome: 'refused' })
    const before = await refused()
    const batch = await create(client, [line('a'), line('b'), line('c')])
    const after = await pollUntil(refused, (n) => n > before, 200, 50)
    t.ok(after.met, `refused: ${before} → ${after.value}`)
    await client.batches.cancel(batch.id)
    await untilBatch(client, batch.id, (b) => b.status === 'cancelled')
  },
)

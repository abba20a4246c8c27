// What the batch tests share: waiting on a batch through the SDK, and a key's metered usage.
import type OpenAI from 'openai'
import { toFile } from 'openai'
import type { RunningTollgate } from './gateway.ts'

/** Retrieves the batch until `done` holds of it (bounded by `ms`; looks every `stepMs`). */
export async function untilBatch(
  client: OpenAI,
  id: string,
  done: (b: OpenAI.Batches.Batch) => boolean,
  { ms = 60_000, stepMs = 100 }: { ms?: number; stepMs?: number } = {},
): Promise<OpenAI.Batches.Batch> {
  const deadline = Date.now() + ms
  let last: OpenAI.Batches.Batch | undefined
  while (Date.now() < deadline) {
    last = await client.batches.retrieve(id)
    if (done(last)) return last
    await new Promise((resolve) => setTimeout(resolve, stepMs))
  }
  throw new Error(`batch still ${JSON.stringify(last)}`)
}

/** What the key was metered for `model` (the admin API's usage row; {} when none). */
export async function modelUsage(gw: RunningTollgate, keyId: string, model: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${gw.url}/admin/keys/${keyId}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  const body = (await res.json()) as { by_model: Array<Record<string, unknown>> }
  return body.by_model.find((row) => row.model === model) ?? {}
}

/** Uploads `lines` as a batch input file and creates a chat-completions batch of it. */
export async function batchOf(client: OpenAI, lines: readonly string[]): Promise<OpenAI.Batches.Batch> {
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'),
    purpose: 'batch',
  })
  return client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
}

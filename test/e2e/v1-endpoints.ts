// /v1 files and vector stores through the official openai SDK (baseURL …/v1), against
// whichever backend the running Tollgate is configured with. Registered by
// v1-mock.test.ts and v1-upstream.test.ts.
import { toFile, type OpenAI } from 'openai'
import type { Test } from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { rejectsWith } from '../helpers/assert.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

export interface V1Subject {
  readonly gw: RunningTollgate
  /** baseURL …/v1 */
  readonly client: OpenAI
  /** The same key, baseURL …/v2. */
  readonly v2: OpenAI
  readonly key: string
  readonly keyId: string
}

/** The subject on a running gateway: a fresh key, and the SDK on /v1 and /v2 with it. */
export async function v1Subject(gw: RunningTollgate, name: string): Promise<V1Subject> {
  const { key, id } = await gw.createKey({ name, tier: 'Standard4000' })
  return {
    gw,
    key,
    keyId: id,
    client: sdkClient(gw, key, 'v1'),
    v2: sdkClient(gw, key),
  }
}

const DOCS = {
  'tides.txt': 'Tides rise and fall twice a day. The moon pulls the ocean, and spring tides follow the full moon.',
  'bread.txt': 'Knead the dough, let the sourdough starter rest overnight, then bake the loaf in a hot oven.',
  'rust.md': '# Borrowing\n\nRust borrow checker rules: one mutable reference or many shared references, never both.',
}

type Named = keyof typeof DOCS

async function keyUsage(gw: RunningTollgate, keyId: string): Promise<{ requests: number; input_tokens: number }> {
  const res = await fetch(`${gw.url}/admin/keys/${keyId}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  return ((await res.json()) as { totals: { requests: number; input_tokens: number } }).totals
}

/** Usage is written in batches every second: wait until the totals reach what is expected. */
async function usageReaching(
  gw: RunningTollgate,
  keyId: string,
  requests: number,
): Promise<{ requests: number; input_tokens: number }> {
  for (let i = 0; i < 60; i++) {
    const totals = await keyUsage(gw, keyId)
    if (totals.requests >= requests) return totals
    await new Promise((r) => setTimeout(r, 100))
  }
  return keyUsage(gw, keyId)
}

export function v1Tests(t: Test, subject: () => V1Subject): void {
  t.test('files: upload, list, retrieve, content, delete; one store with /v2/files', async (t) => {
    const { client, v2 } = subject()
    const uploaded = await client.files.create({
      file: await toFile(Buffer.from('hello from /v1'), 'v1.txt'),
      purpose: 'assistants',
    })
    t.match(uploaded, { object: 'file', filename: 'v1.txt', bytes: 14, purpose: 'assistants' })
    const fromV2 = await v2.files.create({
      file: await toFile(Buffer.from('hello from /v2'), 'v2.txt'),
      purpose: 'user_data',
    })

    const onV1: string[] = []
    for await (const f of client.files.list()) onV1.push(f.id)
    const onV2: string[] = []
    for await (const f of v2.files.list()) onV2.push(f.id)
    t.ok(onV1.includes(uploaded.id) && onV1.includes(fromV2.id), '/v1 lists both uploads')
    t.same(onV2.sort(), onV1.sort(), '/v2 lists the same files')
    t.same(await v2.files.retrieve(uploaded.id), await client.files.retrieve(uploaded.id))
    t.equal(await (await client.files.content(fromV2.id)).text(), 'hello from /v2', 'content of a /v2 upload, on /v1')
    t.match(await client.files.delete(fromV2.id), { id: fromV2.id, deleted: true })
    await rejectsWith(t, v2.files.retrieve(fromV2.id), 404, 'gone from /v2 too')
  })

  t.test(
    'vector stores: create, attach (in_progress → completed), search finds the chunk with the words, metering',
    async (t) => {
      const { client, gw, keyId } = subject()
      const before = await keyUsage(gw, keyId)
      const files: Record<string, string> = {}
      for (const [name, text] of Object.entries(DOCS)) {
        files[name] = (
          await client.files.create({ file: await toFile(Buffer.from(text), name), purpose: 'assistants' })
        ).id
      }
      const store = await client.vectorStores.create({ name: 'knowledge', metadata: { team: 'docs' } })
      t.match(store, {
        object: 'vector_store',
        name: 'knowledge',
        status: 'completed',
        metadata: { team: 'docs' },
        file_counts: { total: 0 },
      })

      // The attach reply comes at once, in progress; the SDK polls until the file is done.
      const raw = await client.vectorStores.files
        .create(store.id, { file_id: files['tides.txt'] ?? '', attributes: { topic: 'sea' } })
        .withResponse()
      t.equal(raw.data.status, 'in_progress')
      const ingestTokens = (raw.data as unknown as { usage?: { prompt_tokens: number } }).usage?.prompt_tokens ?? 0
      t.ok(ingestTokens > 0, 'the attach reply counts the embedding tokens')
      t.ok(raw.response.headers.get('x-ratelimit-limit-requests'), 'rate-limit headers on /v1')
      const done = await client.vectorStores.files.poll(store.id, files['tides.txt'] ?? '', { pollIntervalMs: 50 })
      t.equal(done.status, 'completed')
      for (const name of ['bread.txt', 'rust.md'] as Named[]) {
        const attached = await client.vectorStores.files.createAndPoll(
          store.id,
          { file_id: files[name] ?? '', attributes: { topic: name === 'bread.txt' ? 'food' : 'code' } },
          { pollIntervalMs: 50 },
        )
        t.equal(attached.status, 'completed', `${name} completed`)
      }
      const uploaded = await client.vectorStores.files.uploadAndPoll(
        store.id,
        await toFile(Buffer.from('Glaciers carve valleys of granite over thousands of years.'), 'ice.txt'),
        { pollIntervalMs: 50 },
      )
      t.equal(uploaded.status, 'completed', 'uploadAndPoll: upload to /v1/files, attach, poll')

      const retrieved = await client.vectorStores.retrieve(store.id)
      t.match(retrieved.file_counts, { completed: 4, in_progress: 0, failed: 0, total: 4 })
      t.ok(retrieved.usage_bytes > 0)

      const page = await client.vectorStores.search(store.id, { query: 'sourdough loaf', max_num_results: 3 })
      const results = page.data
      t.ok(results.length > 0 && results.length <= 3, 'max_num_results')
      t.equal(results[0]?.file_id, files['bread.txt'], "the chunk with the query's words comes first")
      t.match(results[0]?.content[0]?.text, /sourdough/)
      t.same(results[0]?.attributes, { topic: 'food' })
      const threshold = await client.vectorStores.search(store.id, {
        query: 'mutable reference borrow checker',
        ranking_options: { score_threshold: 0.3 },
      })
      t.same(
        threshold.data.map((r) => r.file_id),
        [files['rust.md']],
        'the score threshold keeps only the match',
      )
      const filtered = await client.vectorStores.search(store.id, {
        query: 'moon ocean',
        filters: { type: 'eq', key: 'topic', value: 'code' },
      })
      t.ok(
        filtered.data.every((r) => r.file_id === files['rust.md']),
        'attribute filters',
      )

      const content = []
      for await (const part of client.vectorStores.files.content(files['rust.md'] ?? '', { vector_store_id: store.id }))
        content.push(part.text)
      t.equal(content.join(''), DOCS['rust.md'])
      const updated = await client.vectorStores.files.update(files['tides.txt'] ?? '', {
        vector_store_id: store.id,
        attributes: { topic: 'moon' },
      })
      t.same(updated.attributes, { topic: 'moon' })
      const listed: string[] = []
      for await (const f of client.vectorStores.files.list(store.id, { filter: 'completed' })) listed.push(f.id)
      t.equal(listed.length, 4)
      t.match(await client.vectorStores.files.delete(files['tides.txt'] ?? '', { vector_store_id: store.id }), {
        deleted: true,
        object: 'vector_store.file.deleted',
      })
      await rejectsWith(
        t,
        client.vectorStores.files.retrieve(files['tides.txt'] ?? '', { vector_store_id: store.id }),
        404,
        'detached',
      )
      t.ok(await client.files.retrieve(files['tides.txt'] ?? ''), 'detaching leaves the file')

      // Ingestion and searches are metered: 4 uploads + 1 store + 4 attaches... at least the attach's tokens and the queries'.
      const after = await usageReaching(gw, keyId, before.requests + 10)
      t.ok(
        after.input_tokens - before.input_tokens >= ingestTokens + 3,
        `embedding tokens metered (${after.input_tokens - before.input_tokens})`,
      )
    },
  )

  t.test('batches, a file that fails, modify, list and delete stores', async (t) => {
    const { client } = subject()
    const ids = []
    for (const n of [1, 2, 3])
      ids.push(
        (
          await client.files.create({
            file: await toFile(Buffer.from(`note ${n}: `.repeat(40)), `n${n}.txt`),
            purpose: 'assistants',
          })
        ).id,
      )
    const binary = (
      await client.files.create({
        file: await toFile(Buffer.from([0, 159, 146, 150, 0, 255]), 'blob.bin'),
        purpose: 'assistants',
      })
    ).id
    const store = await client.vectorStores.create({
      name: 'batches',
      expires_after: { anchor: 'last_active_at', days: 3 },
    })
    t.equal(store.expires_at, (store.last_active_at ?? 0) + 3 * 86400)

    const batch = await client.vectorStores.fileBatches.createAndPoll(
      store.id,
      { file_ids: [...ids, binary], attributes: { set: 'notes' } },
      { pollIntervalMs: 50 },
    )
    t.match(batch, {
      object: 'vector_store.files_batch',
      status: 'completed',
      file_counts: { completed: 3, failed: 1, total: 4 },
    })
    const failed = await client.vectorStores.files.retrieve(binary, { vector_store_id: store.id })
    t.equal(failed.status, 'failed')
    t.equal(failed.last_error?.code, 'unsupported_file')
    const inBatch: string[] = []
    for await (const f of client.vectorStores.fileBatches.listFiles(batch.id, { vector_store_id: store.id }))
      inBatch.push(f.id)
    t.same(inBatch.sort(), [...ids, binary].sort())
    t.equal((await client.vectorStores.fileBatches.retrieve(batch.id, { vector_store_id: store.id })).id, batch.id)
    t.equal(
      (await client.vectorStores.fileBatches.cancel(batch.id, { vector_store_id: store.id })).status,
      'completed',
      'nothing left to cancel',
    )

    const uploaded = await client.vectorStores.fileBatches.uploadAndPoll(
      store.id,
      {
        files: [await toFile(Buffer.from('Comets have icy nuclei and dusty tails.'), 'comet.txt')],
      },
      { pollIntervalMs: 50 },
    )
    t.equal(uploaded.status, 'completed', 'fileBatches.uploadAndPoll')

    const renamed = await client.vectorStores.update(store.id, { name: 'renamed' })
    t.equal(renamed.name, 'renamed')
    const second = await client.vectorStores.create({ name: 'second' })
    const mine: string[] = []
    for await (const s of client.vectorStores.list({ limit: 1 })) mine.push(s.id)
    t.ok(mine.includes(store.id) && mine.includes(second.id), 'the auto-pager walks every page')
    t.match(await client.vectorStores.delete(second.id), {
      id: second.id,
      deleted: true,
      object: 'vector_store.deleted',
    })
    await rejectsWith(t, client.vectorStores.retrieve(second.id), 404)
    await rejectsWith(
      t,
      client.vectorStores.search(store.id, { query: 'x', max_num_results: 99 }),
      400,
      'the gateway checks the body',
    )
  })
}

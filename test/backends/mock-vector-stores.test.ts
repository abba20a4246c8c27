// The mock's vector stores, driven directly through the adapter: chunking, ingestion from
// in_progress to completed or failed, search by cosine similarity (threshold, result
// count, filters, several queries), batches, detaching, and what a deleted file does.
import t from 'tap'
import type OpenAI from 'openai'
import { text as readText } from 'node:stream/consumers'
import type { Endpoint } from '../../src/config/schema.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import type { RequestBody } from '../../src/http/body.ts'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import { chunkText } from '../../src/backends/mock/chunking.ts'
import { estimateTextTokens } from '../../src/tokenizer/estimate-text.ts'
import { countInputTokens } from '../../src/tokenizer/tokens.ts'
import { multipartBody } from '../helpers/multipart.ts'
import { client, MOCK_CONFIG, mockBackend, type OpenAIErrorBody } from './mock-helpers.ts'

function call(
  endpoint: Endpoint,
  method: UpstreamRequest['method'],
  path: string,
  value?: Record<string, unknown>,
): UpstreamRequest {
  const body: RequestBody = value === undefined ? { kind: 'none' } : { kind: 'json', value }
  return {
    endpoint,
    method,
    path,
    model: null,
    requestId: 'req-vs',
    body,
    signal: new AbortController().signal,
    client,
  }
}

async function send<T extends object>(
  backend: BackendAdapter,
  request: UpstreamRequest,
  status = 200,
): Promise<T & { headers: Record<string, string> }> {
  const response: UpstreamResponse = await backend.send(request)
  const body = await readText(response.body)
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${body}`)
  return Object.assign(JSON.parse(body) as T, { headers: response.headers })
}

async function upload(
  backend: BackendAdapter,
  dir: string,
  name: string,
  data: string | Buffer,
): Promise<OpenAI.FileObject> {
  const body = await multipartBody(
    [
      { name: 'purpose', value: 'assistants' },
      {
        name: 'file',
        filename: name,
        data: typeof data === 'string' ? Buffer.from(data) : data,
        contentType: 'text/plain',
      },
    ],
    dir,
  )
  return send<OpenAI.FileObject>(backend, { ...call('files.create', 'POST', '/files'), body })
}

type VSFile = OpenAI.VectorStores.VectorStoreFile & { usage?: { prompt_tokens: number } }

async function settled(backend: BackendAdapter, storeId: string, fileId: string): Promise<VSFile> {
  for (let i = 0; i < 200; i++) {
    const file = await send<VSFile>(
      backend,
      call('vector_stores.files.list', 'GET', `/vector_stores/${storeId}/files/${fileId}`),
    )
    if (file.status !== 'in_progress') return file
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error('the file stayed in_progress')
}

const TOPICS = {
  'volcano.txt':
    'Volcanoes erupt molten basalt lava. Magma chambers feed the eruption, and ash clouds drift for miles.',
  'bakery.txt':
    'The bakery sells sourdough bread, croissants and cinnamon rolls. Flour, butter and yeast arrive every morning.',
  'orbit.txt':
    'Satellites orbit the planet. A geostationary orbit keeps the satellite above one longitude of the equator.',
}

t.test(
  'chunking: chunks of at most N estimated tokens, overlapping, cut between words, covering the text',
  async (t) => {
    const words = Array.from({ length: 3000 }, (_, i) => `word${i}`)
    const text = words.join(' ')
    const chunks = await chunkText(text, { maxTokens: 100, overlapTokens: 40 })
    if (chunks === undefined) throw new Error('no limit was set')
    t.ok(chunks.length > 10)
    for (const chunk of chunks)
      t.ok(estimateTextTokens(chunk) <= 101, 'within the size (plus the rounding of the whole)')
    for (const chunk of chunks) t.match(chunk, /^word\d+( word\d+)*$/, 'whole words only')
    t.ok(chunks[0]?.startsWith('word0 '))
    t.ok(chunks.at(-1)?.endsWith('word2999'))
    // Each chunk starts within the previous one: the overlap.
    for (let i = 1; i < chunks.length; i++) {
      const first = chunks[i]?.split(' ')[0] ?? ''
      t.ok(chunks[i - 1]?.split(' ').includes(first), `chunk ${i} overlaps chunk ${i - 1}`)
    }
    const noOverlap = await chunkText(text, { maxTokens: 100, overlapTokens: 0 })
    t.equal(noOverlap?.join(' '), text, 'without overlap the chunks are the text')
    t.equal(
      await chunkText(text, { maxTokens: 100, overlapTokens: 0, textLimitTokens: 1000 }),
      undefined,
      'a text over the limit is not chunked',
    )
    t.same(await chunkText('short text', { maxTokens: 800, overlapTokens: 400 }), ['short text'])
    const emoji = '😀'.repeat(500)
    t.notOk(
      (await chunkText(emoji, { maxTokens: 100, overlapTokens: 0 }))?.some((c) =>
        /^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(c),
      ),
      'no split surrogate pair',
    )
  },
)

t.test(
  'a store: create, attach (in_progress, then completed), search ranks the chunk with the words first',
  async (t) => {
    const backend = mockBackend(t)
    const dir = t.testdir()
    const uploaded: OpenAI.FileObject[] = []
    for (const [name, text] of Object.entries(TOPICS)) uploaded.push(await upload(backend, dir, name, text))

    const store = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.create', 'POST', '/vector_stores', { name: 'notes', metadata: { team: 'a' } }),
    )
    t.match(store.id, /^vs_/)
    t.match(store, {
      object: 'vector_store',
      name: 'notes',
      status: 'completed',
      usage_bytes: 0,
      metadata: { team: 'a' },
      expires_at: null,
      file_counts: { total: 0 },
    })

    let tokens = 0
    for (const file of uploaded) {
      const attached = await send<VSFile>(
        backend,
        call('vector_stores.files.create', 'POST', `/vector_stores/${store.id}/files`, {
          file_id: file.id,
          attributes: { name: file.filename },
        }),
      )
      t.equal(attached.status, 'in_progress', 'attaching answers at once')
      t.equal(attached.headers['openai-poll-after-ms'], '100', 'and tells pollers when to look again')
      t.match(attached, {
        id: file.id,
        object: 'vector_store.file',
        vector_store_id: store.id,
        last_error: null,
        chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
      })
      t.equal(
        attached.usage?.prompt_tokens,
        await countInputTokens([TOPICS[file.filename as keyof typeof TOPICS]]),
        'usage: the tokens embedded',
      )
      tokens += attached.usage?.prompt_tokens ?? 0
    }
    t.ok(tokens > 0)
    for (const file of uploaded) {
      const done = await settled(backend, store.id, file.id)
      t.equal(done.status, 'completed')
      t.ok(done.usage_bytes > 0)
    }
    const after = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.list', 'GET', `/vector_stores/${store.id}`),
    )
    t.match(after.file_counts, { completed: 3, in_progress: 0, failed: 0, cancelled: 0, total: 3 })
    t.ok(after.usage_bytes > 0)

    const results = await send<{
      object: string
      data: OpenAI.VectorStores.VectorStoreSearchResponse[]
      search_query: string[]
    }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'sourdough croissants' }),
    )
    t.equal(results.object, 'vector_store.search_results.page')
    t.same(results.search_query, ['sourdough croissants'])
    t.equal(results.data[0]?.filename, 'bakery.txt', 'the chunk with the words comes first')
    t.match(results.data[0]?.content[0]?.text, /sourdough/)
    t.same(results.data[0]?.attributes, { name: 'bakery.txt' })
    t.ok((results.data[0]?.score ?? 0) > (results.data[1]?.score ?? 1), 'and scores clearly above the rest')
    t.ok(results.data.every((r) => r.score >= 0 && r.score <= 1))
    for (let i = 1; i < results.data.length; i++)
      t.ok((results.data[i - 1]?.score ?? 0) >= (results.data[i]?.score ?? 0), 'best first')

    const one = await send<{ data: unknown[] }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'lava', max_num_results: 1 }),
    )
    t.equal(one.data.length, 1, 'max_num_results')
    const strict = await send<{ data: Array<{ filename: string; score: number }> }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, {
        query: 'geostationary satellite orbit',
        ranking_options: { score_threshold: 0.3 },
      }),
    )
    t.same(
      strict.data.map((r) => r.filename),
      ['orbit.txt'],
      'the score threshold drops the unrelated files',
    )
    t.ok(strict.data.every((r) => r.score >= 0.3))
    const both = await send<{ data: Array<{ filename: string }> }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, {
        query: ['basalt magma', 'yeast butter'],
        max_num_results: 2,
      }),
    )
    t.same(
      both.data.map((r) => r.filename).sort(),
      ['bakery.txt', 'volcano.txt'],
      'several queries: each chunk by its best match',
    )
    const filtered = await send<{ data: Array<{ filename: string }> }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, {
        query: 'sourdough',
        filters: {
          type: 'or',
          filters: [
            { type: 'eq', key: 'name', value: 'orbit.txt' },
            { type: 'in', key: 'name', value: ['volcano.txt'] },
          ],
        },
      }),
    )
    t.same(filtered.data.map((r) => r.filename).sort(), ['orbit.txt', 'volcano.txt'], 'filters on attributes')

    const refused = await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'x', max_num_results: 51 }),
      400,
    )
    t.equal(refused.error.param, 'max_num_results')
    const missing = await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, {}),
      400,
    )
    t.match(missing.error, { param: 'query', code: 'missing_required_parameter' })
  },
)

t.test(
  'a file that is not text fails; detaching, content, attributes, and a deleted file leaves the store',
  async (t) => {
    const backend = mockBackend(t)
    const dir = t.testdir()
    const binary = await upload(backend, dir, 'image.bin', Buffer.from([0xff, 0xfe, 0x00, 0x81, 0x00]))
    const text = await upload(backend, dir, 'note.txt', 'A note about the moon and its craters.')
    const store = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.create', 'POST', '/vector_stores', {
        file_ids: [binary.id, text.id],
        chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 50 } },
      }),
    )
    t.equal(store.status, 'in_progress')
    t.equal(
      (store as { usage?: { prompt_tokens: number } }).usage?.prompt_tokens,
      await countInputTokens(['A note about the moon and its craters.']),
      'usage of the files attached at creation',
    )
    const failed = await settled(backend, store.id, binary.id)
    t.equal(failed.status, 'failed')
    t.equal(failed.last_error?.code, 'unsupported_file')
    const done = await settled(backend, store.id, text.id)
    t.same(done.chunking_strategy, { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 50 } })

    const listed = await send<{ data: VSFile[]; first_id: string; last_id: string; has_more: boolean }>(
      backend,
      call('vector_stores.files.list', 'GET', `/vector_stores/${store.id}/files?filter=failed`),
    )
    t.same(
      listed.data.map((f) => f.id),
      [binary.id],
      'filtered by status',
    )
    const all = await send<{ data: VSFile[] }>(
      backend,
      call('vector_stores.files.list', 'GET', `/vector_stores/${store.id}/files?order=asc`),
    )
    t.same(
      all.data.map((f) => f.id),
      [binary.id, text.id],
    )

    const content = await send<{ object: string; data: Array<{ text: string }> }>(
      backend,
      call('vector_stores.files.list', 'GET', `/vector_stores/${store.id}/files/${text.id}/content`),
    )
    t.equal(content.object, 'vector_store.file_content.page')
    t.equal(content.data[0]?.text, 'A note about the moon and its craters.')

    const updated = await send<VSFile>(
      backend,
      call('vector_stores.files.update', 'POST', `/vector_stores/${store.id}/files/${text.id}`, {
        attributes: { year: 2024 },
      }),
    )
    t.same(updated.attributes, { year: 2024 })
    const gte = await send<{ data: unknown[] }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, {
        query: 'moon',
        filters: { type: 'gte', key: 'year', value: 2025 },
      }),
    )
    t.same(gte.data, [], 'a comparison that fails drops the file')

    const detached = await send<{ id: string; object: string; deleted: boolean }>(
      backend,
      call('vector_stores.files.delete', 'DELETE', `/vector_stores/${store.id}/files/${binary.id}`),
    )
    t.same(
      { ...detached, headers: undefined },
      { id: binary.id, object: 'vector_store.file.deleted', deleted: true, headers: undefined },
    )
    await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.files.list', 'GET', `/vector_stores/${store.id}/files/${binary.id}`),
      404,
    )

    await send(backend, call('files.delete', 'DELETE', `/files/${text.id}`))
    const emptied = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.list', 'GET', `/vector_stores/${store.id}`),
    )
    t.equal(emptied.file_counts.total, 0, 'deleting the file detaches it everywhere')
    const none = await send<{ data: unknown[] }>(
      backend,
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'moon' }),
    )
    t.same(none.data, [])
    const unknown = await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.files.create', 'POST', `/vector_stores/${store.id}/files`, { file_id: 'file-nope' }),
      404,
    )
    t.equal(unknown.error.param, 'file_id')
  },
)

t.test(
  'batches: attach many, status and counts, list their files, cancel; list, modify and delete stores',
  async (t) => {
    const backend = mockBackend(t)
    const dir = t.testdir()
    const files = await Promise.all(
      ['a', 'b', 'c'].map((n) => upload(backend, dir, `${n}.txt`, `file ${n} text `.repeat(50))),
    )
    const store = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.create', 'POST', '/vector_stores', { name: 'batchy' }),
    )
    const batch = await send<OpenAI.VectorStores.VectorStoreFileBatch & { usage: { prompt_tokens: number } }>(
      backend,
      call('vector_stores.file_batches.create', 'POST', `/vector_stores/${store.id}/file_batches`, {
        file_ids: files.map((f) => f.id),
        attributes: { kind: 'letters' },
      }),
    )
    t.match(batch, {
      object: 'vector_store.files_batch',
      vector_store_id: store.id,
      status: 'in_progress',
      file_counts: { total: 3 },
    })
    t.match(batch.id, /^vsfb_/)
    t.ok(batch.usage.prompt_tokens > 0)
    let now = batch
    for (let i = 0; i < 200 && now.status === 'in_progress'; i++) {
      await new Promise((r) => setTimeout(r, 10))
      now = await send(
        backend,
        call('vector_stores.file_batches.list', 'GET', `/vector_stores/${store.id}/file_batches/${batch.id}`),
      )
    }
    t.match(now, { status: 'completed', file_counts: { completed: 3, total: 3 } })
    const batchFiles = await send<{ data: VSFile[] }>(
      backend,
      call('vector_stores.file_batches.list', 'GET', `/vector_stores/${store.id}/file_batches/${batch.id}/files`),
    )
    t.same(batchFiles.data.map((f) => f.id).sort(), files.map((f) => f.id).sort())
    t.ok(batchFiles.data.every((f) => f.attributes?.kind === 'letters'))
    const cancelled = await send<{ status: string }>(
      backend,
      call('vector_stores.file_batches.cancel', 'POST', `/vector_stores/${store.id}/file_batches/${batch.id}/cancel`),
    )
    t.equal(cancelled.status, 'completed', 'nothing left to cancel')
    const neither = await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.file_batches.create', 'POST', `/vector_stores/${store.id}/file_batches`, {}),
      400,
    )
    t.equal(neither.error.param, 'file_ids')
    await send<OpenAIErrorBody>(
      backend,
      call('vector_stores.file_batches.create', 'POST', `/vector_stores/${store.id}/file_batches`, {
        file_ids: [files[0]?.id, 'file-missing'],
      }),
      404,
    )

    const second = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.create', 'POST', '/vector_stores', { name: 'second' }),
    )
    const list = await send<{ data: Array<{ id: string }>; has_more: boolean; first_id: string }>(
      backend,
      call('vector_stores.list', 'GET', '/vector_stores?limit=1'),
    )
    t.same(
      [list.data.map((s) => s.id), list.has_more, list.first_id],
      [[second.id], true, second.id],
      'newest first, paged',
    )
    const next = await send<{ data: Array<{ id: string }>; has_more: boolean }>(
      backend,
      call('vector_stores.list', 'GET', `/vector_stores?limit=1&after=${second.id}`),
    )
    t.same([next.data.map((s) => s.id), next.has_more], [[store.id], false])
    const back = await send<{ data: Array<{ id: string }> }>(
      backend,
      call('vector_stores.list', 'GET', `/vector_stores?before=${store.id}`),
    )
    t.same(
      back.data.map((s) => s.id),
      [second.id],
      'before',
    )

    const modified = await send<OpenAI.VectorStores.VectorStore>(
      backend,
      call('vector_stores.update', 'POST', `/vector_stores/${store.id}`, {
        name: 'renamed',
        expires_after: { anchor: 'last_active_at', days: 7 },
      }),
    )
    t.equal(modified.name, 'renamed')
    t.equal(modified.expires_at, (modified.last_active_at ?? 0) + 7 * 86400)
    const deleted = await send<{ deleted: boolean; object: string }>(
      backend,
      call('vector_stores.delete', 'DELETE', `/vector_stores/${store.id}`),
    )
    t.match(deleted, { deleted: true, object: 'vector_store.deleted' })
    for (const request of [
      call('vector_stores.list', 'GET', `/vector_stores/${store.id}`),
      call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'x' }),
      call('vector_stores.files.list', 'GET', `/vector_stores/${store.id}/files`),
      call('vector_stores.file_batches.list', 'GET', `/vector_stores/${store.id}/file_batches/${batch.id}`),
    ])
      await send<OpenAIErrorBody>(backend, request, 404)
  },
)

t.test('an expired store reports it and refuses search and attach', async (t) => {
  let clock = Date.now()
  const backend = createMockBackend('mock', MOCK_CONFIG, { now: () => clock })
  t.teardown(() => backend.close())
  const store = await send<OpenAI.VectorStores.VectorStore>(
    backend,
    call('vector_stores.create', 'POST', '/vector_stores', { expires_after: { anchor: 'last_active_at', days: 1 } }),
  )
  clock += 2 * 86_400_000
  const expired = await send<OpenAI.VectorStores.VectorStore>(
    backend,
    call('vector_stores.list', 'GET', `/vector_stores/${store.id}`),
  )
  t.equal(expired.status, 'expired')
  const refused = await send<OpenAIErrorBody>(
    backend,
    call('vector_stores.search', 'POST', `/vector_stores/${store.id}/search`, { query: 'x' }),
    400,
  )
  t.equal(refused.error.code, 'vector_store_expired')
})

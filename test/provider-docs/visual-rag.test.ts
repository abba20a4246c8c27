// Issue 27, item 3: the provider's Visual RAG guide runs unchanged against Tollgate as `npm
// start` starts it (the built-in mock as the resource backend). The guide is
// telekom/aifoundation-docs, src/content/docs/v1/guides/visual-rag.mdx: Python with the
// openai SDK, base_url …/v1 (…/v2 for the LLM of its end-to-end example). Each call below
// is the guide's, translated to the JS SDK; its Visual RAG parameters are passed the way
// the Python SDK passes a dict (unchecked, as sent): `chunking_strategy` dicts without a
// `type`, and the search's `extra_body` fields in the body. Each step names its section.
// A second gateway in front of a separate upstream shows the parameters reach it unchanged.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { encodePng } from '../../src/backends/mock/png.ts'
import { startBehindUpstream } from '../helpers/gateway.ts'
import { sdkClient, startKeyedGateway } from '../helpers/sdk-gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { rejectsWith } from '../helpers/assert.ts'

/** The guide's vector store parameters ("Create a Vector Store"), as its Python dict. */
const STORE_CHUNKING = {
  text_embedding_model: 'text-embedding-bge-m3',
  vision_embedding_model: 'tsi-embedding-colqwen2-2b-v1',
}
/** The guide's ingest parameters ("Ingest a File"). */
const FILE_CHUNKING = { chunk_size: 1024, chunk_overlap: 100 }

/** What the SDK's types call a chunking strategy: the guide's dicts are not one of OpenAI's, and Python does not check. */
type SdkChunking = OpenAI.VectorStores.FileChunkingStrategyParam
const asSdk = (chunking: object): SdkChunking => chunking as SdkChunking
/** The search's extra_body, spread into the body as the Python SDK merges it. */
type SearchParams = OpenAI.VectorStores.VectorStoreSearchParams
const withExtraBody = (params: SearchParams, extra: Record<string, unknown>): SearchParams => ({ ...params, ...extra })

/** A text long enough for several 1024-token chunks. */
const REPORT = Array.from(
  { length: 40 },
  (_, i) =>
    `Section ${i + 1}. The release supports new features: streaming answers, table extraction and chart reading. ` +
    'Key metrics this quarter were revenue growth, active users and retention, each reported per region and per product line. '.repeat(
      6,
    ),
).join('\n\n')

const CHART = encodePng(8, 8, (x, y) => [x * 30, y * 30, 128])
const SLIDE = encodePng(8, 8, (x) => [x * 30, 200, 40])

interface ImageResult {
  type: string
  text: string
}
type SearchResult = OpenAI.VectorStores.VectorStoreSearchResponse & { page_number?: number }

const { gw, key } = await startKeyedGateway(t, { name: 'visual-rag' })
// "Setup": base_url …/v1 ("Note: v1 for Visual RAG").
const client = sdkClient(gw, key, 'v1')

async function ingested(vectorStoreId: string, fileId: string): Promise<OpenAI.VectorStores.VectorStoreFile> {
  const polled = await pollUntil(
    () => client.vectorStores.files.retrieve(fileId, { vector_store_id: vectorStoreId }),
    (f) => f.status !== 'in_progress',
    500,
    10,
  )
  return polled.value
}

t.test('the guide, section by section', async (t) => {
  // "File Operations" → "Upload a File": purpose "visual-rag".
  const report = await client.files.create({
    file: await toFile(Buffer.from(REPORT), 'release-report.txt'),
    purpose: 'visual-rag' as OpenAI.FilePurpose,
  })
  t.match(report, { object: 'file', filename: 'release-report.txt', purpose: 'visual-rag' })
  const chart = await client.files.create({
    file: await toFile(CHART, 'key-metrics-chart.png'),
    purpose: 'visual-rag' as OpenAI.FilePurpose,
  })
  const slide = await client.files.create({
    file: await toFile(SLIDE, 'new-features-slide.png'),
    purpose: 'visual-rag' as OpenAI.FilePurpose,
  })
  const other = await client.files.create({
    file: await toFile(Buffer.from('{"messages": []}\n'), 'train.jsonl'),
    purpose: 'fine-tune',
  })

  // "List Files": purpose="visual-rag" lists those, and only those.
  const listed: string[] = []
  for await (const f of client.files.list({ purpose: 'visual-rag' })) listed.push(f.id)
  t.same(listed.sort(), [report.id, chart.id, slide.id].sort(), 'the visual-rag files, not the fine-tune one')

  // "Get File Info".
  t.match(await client.files.retrieve(report.id), {
    id: report.id,
    purpose: 'visual-rag',
    bytes: Buffer.byteLength(REPORT),
  })

  // "Vector Store Operations" → "Create a Vector Store", with the embedding models.
  const vs = await client.vectorStores.create({ name: 'my_vs', chunking_strategy: asSdk(STORE_CHUNKING) })
  t.match(vs, { object: 'vector_store', name: 'my_vs' })
  t.same(
    (vs as unknown as { chunking_strategy: unknown }).chunking_strategy,
    STORE_CHUNKING,
    'the store records its embedding models',
  )

  // "List Vector Stores".
  const stores: OpenAI.VectorStores.VectorStore[] = []
  for await (const s of client.vectorStores.list()) stores.push(s)
  t.ok(
    stores.some((s) => s.id === vs.id && s.name === 'my_vs' && typeof s.file_counts.total === 'number'),
    'listed with its name and file_counts',
  )

  // "Ingest a File", with chunk_size and chunk_overlap.
  for (const file of [report, chart, slide]) {
    const attached = await client.vectorStores.files.create(vs.id, {
      file_id: file.id,
      chunking_strategy: asSdk(FILE_CHUNKING),
    })
    t.equal(attached.id, file.id)
    t.same(
      attached.chunking_strategy,
      {
        type: 'static',
        static: { max_chunk_size_tokens: 1024, chunk_overlap_tokens: 100 },
        ...STORE_CHUNKING,
        ...FILE_CHUNKING,
      },
      `${file.filename}: OpenAI's static chunking, and the guide's parameters with the store's models`,
    )
    const done = await ingested(vs.id, file.id)
    t.equal(done.status, 'completed', `${file.filename} ingested`)
  }

  // "List Ingested Files".
  const ingestedFiles = await client.vectorStores.files.list(vs.id)
  t.same(ingestedFiles.data.map((f) => f.id).sort(), [report.id, chart.id, slide.id].sort())
  t.ok(
    ingestedFiles.data.every((f) => typeof f.created_at === 'number'),
    'each with created_at, as the guide prints',
  )

  // "Retrieval": text and image results; top_k_texts 3, top_k_images 2.
  const results = await client.vectorStores.search(
    vs.id,
    withExtraBody({ query: 'Which new features are supported?' }, { top_k_texts: 3, top_k_images: 2 }),
  )
  const page = results.getPaginatedItems() as SearchResult[]
  const texts = page.filter((r) => r.content[0]?.type === 'text')
  const images = page.filter((r) => (r.content[0] as ImageResult | undefined)?.type === 'base64')
  t.equal(texts.length, 3, 'top_k_texts: three text chunks (the report has more)')
  t.equal(images.length, 2, 'top_k_images: both page images')
  t.equal(texts.length + images.length, page.length, 'nothing else')
  t.ok(
    texts.every((r) => r.filename === 'release-report.txt' && (r.content[0]?.text.length ?? 0) > 0),
    'texts from the report, as result.content[0].text',
  )
  for (const image of images) {
    t.equal(image.page_number, 1, `${image.filename}: page_number, as the guide prints it`)
    const url = (image.content[0] as ImageResult).text
    t.match(url, /^data:image\/png;base64,/, `${image.filename}: the image as a data URL`)
    t.same(
      Buffer.from(url.slice(url.indexOf(',') + 1), 'base64'),
      image.filename === 'key-metrics-chart.png' ? CHART : SLIDE,
      'the very bytes uploaded',
    )
  }
  const scores = page.map((r) => r.score)
  t.same(
    scores,
    [...scores].sort((a, b) => b - a),
    'best first',
  )
  t.equal(images[0]?.filename, 'new-features-slide.png', 'the image named for the query ranks first among images')

  const fewer = (
    await client.vectorStores.search(
      vs.id,
      withExtraBody({ query: 'key metrics chart' }, { top_k_texts: 1, top_k_images: 0 }),
    )
  ).getPaginatedItems() as SearchResult[]
  t.same(
    fewer.map((r) => r.content[0]?.type),
    ['text'],
    'top_k_texts 1 and top_k_images 0: one text, no image',
  )
  const imagesOnly = (
    await client.vectorStores.search(
      vs.id,
      withExtraBody({ query: 'key metrics chart' }, { top_k_texts: 0, top_k_images: 1 }),
    )
  ).getPaginatedItems() as SearchResult[]
  t.same(
    imagesOnly.map((r) => [r.content[0]?.type, r.filename]),
    [['base64', 'key-metrics-chart.png']],
    'one image: the chart, for a query about the chart',
  )
  const plain = (
    await client.vectorStores.search(vs.id, { query: 'Which new features are supported?', max_num_results: 4 })
  ).getPaginatedItems()
  t.equal(plain.length, 4, 'without top_k: max_num_results over texts and images together, as OpenAI does')

  // "End-to-End RAG Example": retrieve (top_k 5 / 3), build the prompt, ask the /v2 LLM.
  const llm = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  const contexts = (
    await client.vectorStores.search(
      vs.id,
      withExtraBody({ query: 'What are the key metrics?' }, { top_k_texts: 5, top_k_images: 3 }),
    )
  ).getPaginatedItems() as SearchResult[]
  const first = { type: 'text' as const, text: 'Based on the following context, answer: What are the key metrics?\n\n' }
  const content: OpenAI.Chat.ChatCompletionContentPart[] = [first]
  for (const ctx of contexts) {
    const part = ctx.content[0] as ImageResult
    if (part.type === 'text') first.text += `${part.text}\n\n`
    else if (part.type === 'base64') content.push({ type: 'image_url', image_url: { url: part.text } })
  }
  t.equal(content.length, 3, 'two images in the prompt beside the text')
  t.equal(contexts.filter((c) => c.content[0]?.type === 'text').length, 5, 'five text contexts')
  const response = await llm.chat.completions.create({
    model: 'claude-sonnet-4',
    messages: [{ role: 'user', content }],
    max_tokens: 2048,
  })
  t.ok((response.choices[0]?.message.content ?? '').length > 0, 'the LLM answers')

  // "Delete an Ingested File", "Delete a Vector Store", "Delete a File".
  t.match(await client.vectorStores.files.delete(chart.id, { vector_store_id: vs.id }), { id: chart.id, deleted: true })
  t.notOk(
    (await client.vectorStores.files.list(vs.id)).data.some((f) => f.id === chart.id),
    'no longer ingested',
  )
  t.match(await client.vectorStores.delete(vs.id), { id: vs.id, deleted: true })
  for (const file of [report, chart, slide, other])
    t.match(await client.files.delete(file.id), { id: file.id, deleted: true })
  await rejectsWith(t, client.files.retrieve(report.id), 404, 'the file is gone')
})

t.test("refused: what the parameters may not be, in OpenAI's error shape with detail", async (t) => {
  const vs = await client.vectorStores.create({ name: 'refusals' })
  const cases: Array<[string, string, unknown, string]> = [
    ['/v1/vector_stores', 'an empty chunking_strategy', { chunking_strategy: {} }, 'chunking_strategy'],
    [
      '/v1/vector_stores',
      'a model that is not a string',
      { chunking_strategy: { text_embedding_model: 7 } },
      'chunking_strategy.text_embedding_model',
    ],
    [
      '/v1/vector_stores',
      'an unknown Visual RAG key',
      { chunking_strategy: { text_embedding_model: 'a', colour: 'red' } },
      'chunking_strategy',
    ],
    [
      `/v1/vector_stores/${vs.id}/files`,
      'an overlap over half the chunk',
      { file_id: 'file-x', chunking_strategy: { chunk_size: 200, chunk_overlap: 150 } },
      'chunking_strategy.chunk_overlap',
    ],
    [
      `/v1/vector_stores/${vs.id}/files`,
      'chunks too small',
      { file_id: 'file-x', chunking_strategy: { chunk_size: 10 } },
      'chunking_strategy.chunk_size',
    ],
    [`/v1/vector_stores/${vs.id}/search`, 'a negative top_k_images', { query: 'x', top_k_images: -1 }, 'top_k_images'],
    [`/v1/vector_stores/${vs.id}/search`, 'top_k_texts as a string', { query: 'x', top_k_texts: '3' }, 'top_k_texts'],
  ]
  for (const [path, what, body, param] of cases) {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const reply = (await res.json()) as { error: { param: string | null; message: string }; detail: string }
    t.equal(res.status, 400, `${what}: 400`)
    t.equal(reply.error.param, param, `${what}: param ${param}`)
    t.equal(reply.detail, reply.error.message, `${what}: detail is the message`)
  }
  // A PNG in a store without a vision model is not an image index: it fails as unsupported.
  const png = await client.files.create({
    file: await toFile(CHART, 'chart.png'),
    purpose: 'visual-rag' as OpenAI.FilePurpose,
  })
  await client.vectorStores.files.create(vs.id, { file_id: png.id })
  const failed = await ingested(vs.id, png.id)
  t.match(failed, { status: 'failed', last_error: { code: 'unsupported_file', message: /vision_embedding_model/ } })
  t.same(
    failed.chunking_strategy,
    { type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
    "OpenAI's chunking alone, without Visual RAG parameters",
  )
})

t.test('through the openai adapter: the parameters reach the upstream unchanged', async (t) => {
  const behind = await startBehindUpstream({ upstreamArgs: ['--record-bodies'] })
  const { gw: front, upstream } = behind
  t.teardown(() => behind.stop())
  const viaUpstream = new OpenAI({
    apiKey: (await front.createKey({ tier: 'Standard4000' })).key,
    baseURL: `${front.url}/v1`,
    maxRetries: 0,
  })
  const file = await viaUpstream.files.create({
    file: await toFile(Buffer.from(REPORT), 'report.txt'),
    purpose: 'visual-rag' as OpenAI.FilePurpose,
  })
  for await (const listed of viaUpstream.files.list({ purpose: 'visual-rag' }))
    t.equal(listed.id, file.id, 'listed by purpose through the upstream')
  const vs = await viaUpstream.vectorStores.create({ name: 'my_vs', chunking_strategy: asSdk(STORE_CHUNKING) })
  await viaUpstream.vectorStores.files.create(vs.id, { file_id: file.id, chunking_strategy: asSdk(FILE_CHUNKING) })
  await viaUpstream.vectorStores.search(
    vs.id,
    withExtraBody({ query: 'Which new features are supported?' }, { top_k_texts: 3, top_k_images: 2 }),
  )

  const seen = await upstream.requests()
  const bodyOf = (method: string, path: RegExp): Record<string, unknown> =>
    JSON.parse(seen.find((r) => r.method === method && path.test(r.path))?.body ?? '{}') as Record<string, unknown>
  t.equal(bodyOf('POST', /^\/v1\/files$/).purpose, 'visual-rag', "the upload's purpose")
  t.ok(
    seen.some((r) => r.method === 'GET' && /^\/v1\/files\?(.*&)?purpose=visual-rag/.test(r.path)),
    "the list's purpose",
  )
  t.same(
    bodyOf('POST', /^\/v1\/vector_stores$/).chunking_strategy,
    STORE_CHUNKING,
    "the store's embedding models, as sent",
  )
  t.same(
    bodyOf('POST', /^\/v1\/vector_stores\/[^/]+\/files$/).chunking_strategy,
    FILE_CHUNKING,
    "the ingest's chunk sizes, as sent",
  )
  t.match(
    bodyOf('POST', /^\/v1\/vector_stores\/[^/]+\/search$/),
    { top_k_texts: 3, top_k_images: 2 },
    "the search's top_k, as sent",
  )
})

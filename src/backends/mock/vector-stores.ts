// /vector_stores: stores (create, list, retrieve, modify, delete), their files (attach,
// list, retrieve, update attributes, content, detach), file batches (create, retrieve,
// cancel, list files) and search, implemented for real: files are chunked, embedded with
// the mock's deterministic embeddings, and searched by cosine similarity. One set of
// stores per backend, global to it; the gateway keeps who owns which.
import { readFile } from 'node:fs/promises'
import {
  CreateVectorStoreFileBatchRequest,
  CreateVectorStoreFileRequest,
  CreateVectorStoreRequest,
  SearchRequest,
  UpdateVectorStoreFileRequest,
  UpdateVectorStoreRequest,
  VectorStoreFileStatus,
} from '../../api/vector-stores.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { MockError, notFound, unknownUrl } from './errors.ts'
import type { FileStore } from './files.ts'
import { newId } from './ids.ts'
import { listPage, paginate } from './page.ts'
import { objectById, optionalEnum, parsedBody, queryOf, quotableId, segmentsOf } from './params.ts'
import { jsonResponse } from './reply.ts'
import { search } from './vector-store-search.ts'
import { createAttacher, type AttachOptions } from './vector-store-attach.ts'
import {
  batchObject,
  fileObject,
  filesOfBatch,
  isExpired,
  storeObject,
  type AttachedFile,
  type BatchRecord,
  type StoreRecord,
} from './vector-store-records.ts'
import { fileChunkingOf, storeModelsOf } from './vector-store-chunking.ts'

const LIST_LIMITS = { default: 20, max: 100 }
/** How soon the SDK's pollers (createAndPoll, uploadAndPoll) should look again. */
const POLL_AFTER_MS = '100'

export interface VectorStores {
  handle(request: UpstreamRequest): Promise<UpstreamResponse>
  /** Stops the embedding still under way. */
  close(): void
}

type Query = Readonly<Record<string, unknown>>

/** The object's reply; one still in progress tells pollers when to ask again. */
function reply(value: { status: string }, extra: Record<string, unknown> = {}): UpstreamResponse {
  return jsonResponse(
    200,
    { ...value, ...extra },
    value.status === 'in_progress' ? { 'openai-poll-after-ms': POLL_AFTER_MS } : {},
  )
}

function usage(tokens: number): Record<string, unknown> {
  return { usage: { prompt_tokens: tokens, total_tokens: tokens } }
}

function ordered<T>(items: Iterable<T>, query: Query): T[] {
  const list = [...items]
  return (optionalEnum(query, 'order', ['asc', 'desc'] as const) ?? 'desc') === 'desc' ? list.reverse() : list
}

export function createVectorStores(ctx: MockContext, files: FileStore): VectorStores {
  const stores = new Map<string, StoreRecord>()
  let closed = false
  const attacher = createAttacher(files, ctx.now, (store) => closed || stores.get(store.id) !== store)

  // A deleted file leaves every store it was in.
  files.onDeleted((fileId) => {
    for (const store of stores.values()) store.files.delete(fileId)
  })

  const existing = (id: string): StoreRecord => objectById(stores, id, 'vector store', 'vector_store_id')

  const usable = (id: string): StoreRecord => {
    const store = existing(id)
    if (isExpired(store, ctx.now()))
      throw new MockError(400, 'This vector store has expired.', 'vector_store_id', 'vector_store_expired')
    return store
  }

  const attachedFile = (store: StoreRecord, fileId: string): AttachedFile => {
    const file = store.files.get(fileId)
    if (file === undefined)
      throw notFound(`No such file in vector store ${quotableId(store.id)}: ${quotableId(fileId)}`, 'file_id')
    return file
  }

  const batchOf = (store: StoreRecord, batchId: string): BatchRecord =>
    objectById(store.batches, batchId, 'file batch', 'batch_id')

  /** Attaches one after another; the tokens of all of them. */
  async function attachAll(
    store: StoreRecord,
    entries: ReadonlyArray<{ fileId: string; options: AttachOptions }>,
  ): Promise<number> {
    attacher.checkExists(entries.map((e) => e.fileId))
    let tokens = 0
    for (const entry of entries) tokens += (await attacher.attach(store, entry.fileId, entry.options)).tokens
    return tokens
  }

  const fileList = (candidates: readonly AttachedFile[], query: Query): UpstreamResponse => {
    const status = optionalEnum(query, 'filter', VectorStoreFileStatus.options)
    const matching = candidates.filter((f) => status === undefined || f.status === status)
    const page = paginate(ordered(matching, query), query, LIST_LIMITS)
    return jsonResponse(200, listPage({ ...page, data: page.data.map(fileObject) }))
  }

  // --- stores -------------------------------------------------------------------------

  async function createStore(request: UpstreamRequest): Promise<UpstreamResponse> {
    const body = parsedBody(request, CreateVectorStoreRequest)
    const fileIds = body.file_ids ?? []
    attacher.checkExists(fileIds)
    const nowMs = ctx.now()
    const store: StoreRecord = {
      id: newId('vs_'),
      createdAtMs: nowMs,
      name: body.name ?? '',
      metadata: body.metadata ?? null,
      expiresAfter: body.expires_after ?? null,
      models: storeModelsOf(body.chunking_strategy),
      lastActiveMs: nowMs,
      files: new Map(),
      batches: new Map(),
    }
    stores.set(store.id, store)
    const options: AttachOptions = {
      chunking: fileChunkingOf(body.chunking_strategy, store.models),
      attributes: null,
      batchId: null,
    }
    const tokens = await attachAll(
      store,
      fileIds.map((fileId) => ({ fileId, options })),
    )
    return reply(storeObject(store, ctx.now()), fileIds.length > 0 ? usage(tokens) : {})
  }

  function updateStore(request: UpstreamRequest, store: StoreRecord): UpstreamResponse {
    const body = parsedBody(request, UpdateVectorStoreRequest)
    if (body.name !== undefined) store.name = body.name ?? ''
    if (body.expires_after !== undefined) store.expiresAfter = body.expires_after
    if (body.metadata !== undefined) store.metadata = body.metadata
    return reply(storeObject(store, ctx.now()))
  }

  function searchStore(request: UpstreamRequest, store: StoreRecord): UpstreamResponse {
    const body = parsedBody(request, SearchRequest)
    store.lastActiveMs = ctx.now()
    return jsonResponse(200, search(store, body))
  }

  // --- files and batches --------------------------------------------------------------

  async function attachFile(request: UpstreamRequest, store: StoreRecord): Promise<UpstreamResponse> {
    const body = parsedBody(request, CreateVectorStoreFileRequest)
    const attached = await attacher.attach(store, body.file_id, {
      chunking: fileChunkingOf(body.chunking_strategy, store.models),
      attributes: body.attributes ?? null,
      batchId: null,
    })
    return reply(fileObject(attached.file), usage(attached.tokens))
  }

  async function createBatch(request: UpstreamRequest, store: StoreRecord): Promise<UpstreamResponse> {
    const body = parsedBody(request, CreateVectorStoreFileBatchRequest)
    const batch: BatchRecord = { id: newId('vsfb_'), vectorStoreId: store.id, createdAtMs: ctx.now(), cancelled: false }
    const shared = {
      chunking: fileChunkingOf(body.chunking_strategy, store.models),
      attributes: body.attributes ?? null,
      batchId: batch.id,
    }
    const entries =
      body.files !== undefined
        ? body.files.map((f) => ({
            fileId: f.file_id,
            options: {
              chunking: fileChunkingOf(f.chunking_strategy, store.models),
              attributes: f.attributes ?? null,
              batchId: batch.id,
            },
          }))
        : (body.file_ids ?? []).map((fileId) => ({ fileId, options: shared }))
    attacher.checkExists(entries.map((e) => e.fileId))
    store.batches.set(batch.id, batch)
    const tokens = await attachAll(store, entries)
    return reply(batchObject(store, batch), usage(tokens))
  }

  function cancelBatch(store: StoreRecord, batch: BatchRecord): UpstreamResponse {
    const files = filesOfBatch(store, batch)
    if (files.some((f) => f.status === 'in_progress')) {
      batch.cancelled = true
      for (const file of files) if (file.status === 'in_progress') file.status = 'cancelled'
    }
    return reply(batchObject(store, batch))
  }

  /** The file's text as it was ingested (OpenAI: its parsed content); a page image as its data URL (Visual RAG). */
  async function content(file: AttachedFile): Promise<UpstreamResponse> {
    let text = ''
    const image = file.chunks.find((chunk) => chunk.image !== undefined)?.image
    if (image === undefined && file.status === 'completed' && files.get(file.id) !== undefined) {
      text = new TextDecoder('utf-8').decode(await readFile(files.pathOf(file.id)))
    }
    return jsonResponse(200, {
      object: 'vector_store.file_content.page',
      data:
        image !== undefined ? [{ type: 'base64', text: image.dataUrl }] : text === '' ? [] : [{ type: 'text', text }],
      has_more: false,
      next_page: null,
    })
  }

  // --- routing ------------------------------------------------------------------------

  async function route(request: UpstreamRequest): Promise<UpstreamResponse> {
    const { pathname, query } = queryOf(request.path)
    const segments = segmentsOf(pathname)
    if (segments === undefined || segments[0] !== 'vector_stores') throw unknownUrl()
    const [, storeId, sub, childId, leaf, ...rest] = segments
    const { method } = request
    if (rest.length > 0) throw unknownUrl()

    if (storeId === undefined || storeId === '') {
      if (method === 'POST') return createStore(request)
      if (method === 'GET') {
        const page = paginate(ordered(stores.values(), query), query, LIST_LIMITS)
        return jsonResponse(200, listPage({ ...page, data: page.data.map((s) => storeObject(s, ctx.now())) }))
      }
      throw unknownUrl()
    }
    if (sub === undefined) {
      const store = existing(storeId)
      if (method === 'GET') return reply(storeObject(store, ctx.now()))
      if (method === 'POST') return updateStore(request, store)
      if (method === 'DELETE') {
        stores.delete(store.id)
        return jsonResponse(200, { id: store.id, object: 'vector_store.deleted', deleted: true })
      }
      throw unknownUrl()
    }
    if (sub === 'search' && childId === undefined && method === 'POST') return searchStore(request, usable(storeId))
    if (sub === 'files') {
      if (childId === undefined) {
        if (method === 'POST') return attachFile(request, usable(storeId))
        if (method === 'GET') return fileList([...existing(storeId).files.values()], query)
        throw unknownUrl()
      }
      const store = existing(storeId)
      const file = attachedFile(store, childId)
      if (leaf === 'content' && method === 'GET') return content(file)
      if (leaf !== undefined) throw unknownUrl()
      if (method === 'GET') return reply(fileObject(file))
      if (method === 'POST') {
        file.attributes = parsedBody(request, UpdateVectorStoreFileRequest).attributes
        return reply(fileObject(file))
      }
      if (method === 'DELETE') {
        store.files.delete(file.id)
        return jsonResponse(200, { id: file.id, object: 'vector_store.file.deleted', deleted: true })
      }
      throw unknownUrl()
    }
    if (sub === 'file_batches') {
      if (childId === undefined) {
        if (method === 'POST') return createBatch(request, usable(storeId))
        throw unknownUrl()
      }
      const store = existing(storeId)
      const batch = batchOf(store, childId)
      if (leaf === undefined && method === 'GET') return reply(batchObject(store, batch))
      if (leaf === 'cancel' && method === 'POST') return cancelBatch(store, batch)
      if (leaf === 'files' && method === 'GET') return fileList(filesOfBatch(store, batch), query)
    }
    throw unknownUrl()
  }

  return {
    handle: route,
    close() {
      closed = true
    },
  }
}

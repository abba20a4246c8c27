// Attaching a file to a vector store: the file is prepared (read, chunked, its tokens
// counted) before the reply, which says `in_progress` and carries the tokens as usage;
// embedding goes on after it, and the file ends `completed`, or `failed` with the reason
// prepare() found. A detach, a cancel or the store's deletion stops the work where it is.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { notFound } from './errors.ts'
import type { FileStore } from './files.ts'
import { quotableId } from './params.ts'
import { chunkBytes, embed, prepare, type Prepared } from './vector-store-ingest.ts'
import type { AttachedFile, Attributes, FileChunking, StoreRecord } from './vector-store-records.ts'

export interface AttachOptions {
  readonly chunking: FileChunking
  readonly attributes: Attributes
  readonly batchId: string | null
}

export interface Attached {
  readonly file: AttachedFile
  /** Embedding tokens this attach costs; 0 for a file that was already attached or cannot be read. */
  readonly tokens: number
}

export interface Attacher {
  /** Refuses (404) before anything is attached if any of the files does not exist. */
  checkExists(fileIds: readonly string[]): void
  attach(store: StoreRecord, fileId: string, options: AttachOptions): Promise<Attached>
}

/** `gone` tells whether a store was deleted (or the backend closed): its work stops. */
export function createAttacher(files: FileStore, now: () => number, gone: (store: StoreRecord) => boolean): Attacher {
  const checkExists = (fileIds: readonly string[]): void => {
    for (const id of fileIds) {
      if (files.get(id) === undefined) throw notFound(`No file found with id '${quotableId(id)}'.`, 'file_id')
    }
  }

  async function finish(store: StoreRecord, file: AttachedFile, prepared: Prepared): Promise<void> {
    const stillWanted = (): boolean =>
      !gone(store) && store.files.get(file.id) === file && file.status === 'in_progress'
    if (!prepared.ok) {
      // Found at once, reported as processing would: the attach reply was `in_progress`.
      await nextTurn()
      if (stillWanted()) {
        file.status = 'failed'
        file.lastError = prepared.error
      }
      return
    }
    const chunks = await embed(prepared, stillWanted)
    if (chunks === undefined) return
    file.chunks = chunks
    file.usageBytes = chunks.reduce((sum, chunk) => sum + chunkBytes(chunk), 0)
    file.status = 'completed'
  }

  return {
    checkExists,
    async attach(store, fileId, options) {
      const existing = store.files.get(fileId)
      if (existing !== undefined) return { file: existing, tokens: 0 }
      checkExists([fileId])
      const stored = files.get(fileId)
      const prepared = await prepare(
        files.pathOf(fileId),
        { bytes: stored?.bytes ?? 0, filename: stored?.filename ?? '' },
        options.chunking,
      )
      // Meanwhile the same file may have been attached by another call, or deleted, or the store.
      if (gone(store)) throw notFound(`No such vector store: ${quotableId(store.id)}`, 'vector_store_id')
      const raced = store.files.get(fileId)
      if (raced !== undefined) return { file: raced, tokens: 0 }
      checkExists([fileId])
      store.lastActiveMs = now()
      const file: AttachedFile = {
        id: fileId,
        vectorStoreId: store.id,
        createdAtMs: now(),
        filename: stored?.filename ?? '',
        chunking: options.chunking,
        batchId: options.batchId,
        attributes: options.attributes,
        status: 'in_progress',
        lastError: null,
        usageBytes: 0,
        chunks: [],
      }
      store.files.set(fileId, file)
      void finish(store, file, prepared).catch(() => {
        file.status = 'failed'
        file.lastError = { code: 'server_error', message: 'The file could not be embedded.' }
      })
      return { file, tokens: prepared.ok ? prepared.tokens : 0 }
    },
  }
}

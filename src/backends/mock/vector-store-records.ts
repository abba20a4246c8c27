// What the mock keeps of a vector store, its files and its file batches, and the objects
// (OpenAI's shapes, src/api/vector-stores.ts) it shows of them. Counts and statuses are
// derived from the files whenever an object is shown, so they never drift.
import type {
  AttributeValue,
  VectorStoreFileBatchObject,
  VectorStoreFileObject,
  VectorStoreObject,
} from '../../api/vector-stores.ts'
import { unixSeconds } from './ids.ts'
import { chunkingStrategyObject } from './vector-store-chunking.ts'

export type FileStatus = VectorStoreFileObject['status']
export type LastError = NonNullable<VectorStoreFileObject['last_error']>
export type Attributes = Record<string, AttributeValue> | null

export interface ChunkSizing {
  readonly max_chunk_size_tokens: number
  readonly chunk_overlap_tokens: number
}

/** The embedding models a store or a file names (Visual RAG); the mock records them. */
export interface EmbeddingModels {
  readonly text?: string
  readonly vision?: string
}

/** How one file was chunked, and with which models (vector-store-chunking.ts). */
export interface FileChunking {
  readonly sizing: ChunkSizing
  readonly models: EmbeddingModels
  /** Given Visual RAG parameters (here or on its store): its chunking_strategy shows them. */
  readonly visual: boolean
}

/** A page image of a file indexed with a vision model (Visual RAG). */
export interface PageImage {
  /** `data:image/png;base64,…`: what search answers as a `base64` result's text. */
  readonly dataUrl: string
  readonly page: number
}

export interface IndexedChunk {
  /** The chunk's text; for a page image, the words its vector is made from. */
  readonly text: string
  /** Unit length: a dot product is the cosine similarity. */
  readonly vector: Float32Array
  readonly image?: PageImage
}

export interface AttachedFile {
  readonly id: string
  readonly vectorStoreId: string
  readonly createdAtMs: number
  readonly filename: string
  readonly chunking: FileChunking
  readonly batchId: string | null
  attributes: Attributes
  status: FileStatus
  lastError: LastError | null
  usageBytes: number
  chunks: readonly IndexedChunk[]
}

export interface BatchRecord {
  readonly id: string
  readonly vectorStoreId: string
  readonly createdAtMs: number
  cancelled: boolean
}

export interface StoreRecord {
  readonly id: string
  readonly createdAtMs: number
  name: string
  metadata: Record<string, string> | null
  expiresAfter: { readonly anchor: 'last_active_at'; readonly days: number } | null
  /** Visual RAG: the embedding models its files default to. */
  readonly models: EmbeddingModels
  lastActiveMs: number
  /** Insertion order is attach order. */
  readonly files: Map<string, AttachedFile>
  readonly batches: Map<string, BatchRecord>
}

const DAY_MS = 86_400_000

export function expiresAtMs(store: StoreRecord): number | null {
  return store.expiresAfter === null ? null : store.lastActiveMs + store.expiresAfter.days * DAY_MS
}

export function isExpired(store: StoreRecord, nowMs: number): boolean {
  const at = expiresAtMs(store)
  return at !== null && at <= nowMs
}

function counts(files: Iterable<AttachedFile>): VectorStoreObject['file_counts'] {
  const tally = { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: 0 }
  for (const file of files) {
    tally[file.status]++
    tally.total++
  }
  return tally
}

export function storeObject(store: StoreRecord, nowMs: number): VectorStoreObject {
  const fileCounts = counts(store.files.values())
  const expiresAt = expiresAtMs(store)
  let usageBytes = 0
  for (const file of store.files.values()) usageBytes += file.usageBytes
  return {
    id: store.id,
    object: 'vector_store',
    created_at: unixSeconds(store.createdAtMs),
    name: store.name,
    usage_bytes: usageBytes,
    file_counts: fileCounts,
    status: isExpired(store, nowMs) ? 'expired' : fileCounts.in_progress > 0 ? 'in_progress' : 'completed',
    ...(store.expiresAfter === null ? {} : { expires_after: store.expiresAfter }),
    expires_at: expiresAt === null ? null : unixSeconds(expiresAt),
    last_active_at: unixSeconds(store.lastActiveMs),
    metadata: store.metadata,
    ...(store.models.text === undefined && store.models.vision === undefined
      ? {}
      : {
          chunking_strategy: {
            ...(store.models.text === undefined ? {} : { text_embedding_model: store.models.text }),
            ...(store.models.vision === undefined ? {} : { vision_embedding_model: store.models.vision }),
          },
        }),
  }
}

export function fileObject(file: AttachedFile): VectorStoreFileObject {
  return {
    id: file.id,
    object: 'vector_store.file',
    usage_bytes: file.usageBytes,
    created_at: unixSeconds(file.createdAtMs),
    vector_store_id: file.vectorStoreId,
    status: file.status,
    last_error: file.lastError,
    chunking_strategy: chunkingStrategyObject(file.chunking),
    attributes: file.attributes,
  }
}

export function filesOfBatch(store: StoreRecord, batch: BatchRecord): AttachedFile[] {
  return [...store.files.values()].filter((f) => f.batchId === batch.id)
}

export function batchObject(store: StoreRecord, batch: BatchRecord): VectorStoreFileBatchObject {
  const fileCounts = counts(filesOfBatch(store, batch))
  const status = batch.cancelled
    ? 'cancelled'
    : fileCounts.in_progress > 0
      ? 'in_progress'
      : fileCounts.total > 0 && fileCounts.failed === fileCounts.total
        ? 'failed'
        : 'completed'
  return {
    id: batch.id,
    object: 'vector_store.files_batch',
    created_at: unixSeconds(batch.createdAtMs),
    vector_store_id: store.id,
    status,
    file_counts: fileCounts,
  }
}

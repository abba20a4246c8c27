// Vector stores, their files and file batches, and search: OpenAI's shapes (the
// CreateVectorStoreRequest, VectorStoreObject, ... of its OpenAPI document), as the
// gateway validates them, the mock implements them and /openapi.json shows them.
import { z } from 'zod'
import { EmbeddingUsage, Metadata, cursorQuery, deletedObject, listOf } from './common.ts'

/** OpenAI's `auto` chunking: 800-token chunks overlapping by 400. */
export const AUTO_CHUNKING = { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } as const

export const StaticChunking = z
  .strictObject({
    max_chunk_size_tokens: z
      .int()
      .min(100)
      .max(4096)
      .meta({ description: 'Tokens per chunk, 100 to 4096 (default 800).' }),
    chunk_overlap_tokens: z.int().min(0).meta({
      description: 'Tokens shared by neighbouring chunks; at most half of max_chunk_size_tokens (default 400).',
    }),
  })
  .refine((s) => s.chunk_overlap_tokens <= s.max_chunk_size_tokens / 2, {
    message: 'chunk_overlap_tokens must not exceed half of max_chunk_size_tokens',
    path: ['chunk_overlap_tokens'],
  })

const embeddingModel = z.string().min(1).max(256)

/**
 * The provider's Visual RAG parameters (its guides/visual-rag page): no `type`; the embedding
 * models of a store's text and page images (on create), and a file's chunk size and overlap
 * in tokens (on attach), any of them. Chunk sizes are bounded as OpenAI's static ones are:
 * smaller chunks or a larger overlap would multiply a file's chunks.
 */
export const VisualRagChunking = z
  .strictObject({
    type: z.undefined().meta({ not: {}, description: 'Absent: Visual RAG parameters have no type.' }).optional(),
    text_embedding_model: embeddingModel.optional().meta({
      description:
        "The model that embeds text chunks (e.g. `text-embedding-bge-m3`). Given on a store, it is every file's default.",
    }),
    vision_embedding_model: embeddingModel.optional().meta({
      description:
        "The model that embeds page images (e.g. `tsi-embedding-colqwen2-2b-v1`): with it, images are indexed and searched too. Given on a store, it is every file's default.",
    }),
    chunk_size: z
      .int()
      .min(100)
      .max(4096)
      .optional()
      .meta({ description: 'Tokens per text chunk, 100 to 4096 (default 800).' }),
    chunk_overlap: z.int().min(0).optional().meta({
      description:
        'Tokens shared by neighbouring chunks; at most half of chunk_size (default: half of it, at most 400).',
    }),
  })
  .refine((v) => Object.keys(v).some((k) => k !== 'type'), {
    message:
      "give type (auto or static), or Visual RAG's text_embedding_model, vision_embedding_model, chunk_size or chunk_overlap",
  })
  .refine((v) => (v.chunk_overlap ?? 0) <= (v.chunk_size ?? AUTO_CHUNKING.max_chunk_size_tokens) / 2, {
    message: 'chunk_overlap must not exceed half of chunk_size',
    path: ['chunk_overlap'],
  })
  .meta({ description: "The provider's Visual RAG chunking (no `type`): embedding models and chunk sizes." })

export const ChunkingStrategyParam = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('auto') }),
    z.strictObject({ type: z.literal('static'), static: StaticChunking }),
    VisualRagChunking,
  ])
  .meta({
    description:
      "How files are cut into chunks before they are embedded; `auto` when unset. OpenAI's `auto` or `static`, or the provider's Visual RAG parameters (no `type`).",
  })

/** What a store or a file shows of the Visual RAG parameters it was given (an extension to OpenAI's objects). */
const VisualRagShown = {
  text_embedding_model: embeddingModel.optional(),
  vision_embedding_model: embeddingModel.optional(),
  chunk_size: z.int().optional().meta({ description: 'The same as static.max_chunk_size_tokens.' }),
  chunk_overlap: z.int().optional().meta({ description: 'The same as static.chunk_overlap_tokens.' }),
}

export const ChunkingStrategy = z.discriminatedUnion('type', [
  z.object({ type: z.literal('static'), static: StaticChunking, ...VisualRagShown }).meta({
    description:
      "OpenAI's static chunking; for a file given Visual RAG parameters (or in a store with embedding models), those too.",
  }),
  z.object({ type: z.literal('other') }),
])

export const StoreChunking = z
  .object({
    text_embedding_model: embeddingModel.optional(),
    vision_embedding_model: embeddingModel.optional(),
  })
  .meta({ description: "The embedding models the store was created with (Visual RAG), its files' defaults." })

const attributeValue = z.union([z.string().max(512), z.number(), z.boolean()])
export type AttributeValue = z.infer<typeof attributeValue>

export const Attributes = z
  .record(z.string().max(64), attributeValue)
  .refine((a) => Object.keys(a).length <= 16, 'at most 16 attributes')
  .nullable()
  .meta({
    description:
      'Up to 16 attributes of a file, for filtering searches: strings (up to 512 characters), numbers or booleans.',
  })

export const ExpiresAfter = z
  .strictObject({
    anchor: z.literal('last_active_at'),
    days: z.int().min(1).max(365),
  })
  .meta({ description: 'The store expires this many days after it was last active.' })

export const ComparisonFilter = z
  .strictObject({
    type: z.enum(['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin']),
    key: z.string().min(1).max(64),
    value: z.union([z.string(), z.number(), z.boolean(), z.array(z.union([z.string(), z.number()]))]),
  })
  .meta({ description: 'Compares one attribute with a value.' })

export const CompoundFilter = z
  .strictObject({
    type: z.enum(['and', 'or']),
    get filters(): z.ZodArray<z.ZodUnion<readonly [typeof ComparisonFilter, typeof CompoundFilter]>> {
      return z.array(z.union([ComparisonFilter, CompoundFilter])).min(1)
    },
  })
  .meta({ description: 'Combines filters with `and` or `or`.' })

export type Comparison = z.infer<typeof ComparisonFilter>
export type Filter = Comparison | { type: 'and' | 'or'; filters: Filter[] }

const fileIds = (max: number) => z.array(z.string().min(1).max(256)).max(max)

export const CreateVectorStoreRequest = z
  .object({
    name: z.string().max(256).optional(),
    description: z.string().max(512).optional(),
    file_ids: fileIds(500).optional().meta({ description: 'Files (yours) to attach at once, up to 500.' }),
    chunking_strategy: ChunkingStrategyParam.optional(),
    expires_after: ExpiresAfter.optional(),
    metadata: Metadata.optional(),
  })
  .loose()

export const UpdateVectorStoreRequest = z
  .object({
    name: z.string().max(256).nullable().optional(),
    expires_after: ExpiresAfter.nullable().optional(),
    metadata: Metadata.optional(),
  })
  .loose()

export const CreateVectorStoreFileRequest = z
  .object({
    file_id: z.string().min(1).max(256).meta({ description: 'A file of yours, uploaded to /v1/files or /v2/files.' }),
    chunking_strategy: ChunkingStrategyParam.optional(),
    attributes: Attributes.optional(),
  })
  .loose()

export const CreateVectorStoreFileBatchRequest = z
  .object({
    file_ids: fileIds(2000).min(1).optional().meta({ description: 'Files (yours) to attach, up to 2000; or `files`.' }),
    files: z
      .array(CreateVectorStoreFileRequest)
      .min(1)
      .max(2000)
      .optional()
      .meta({ description: 'Files with their own attributes and chunking; or `file_ids`.' }),
    chunking_strategy: ChunkingStrategyParam.optional(),
    attributes: Attributes.optional(),
  })
  .loose()
  .superRefine((body, ctx) => {
    if ((body.file_ids === undefined) === (body.files === undefined)) {
      ctx.addIssue({
        code: 'custom',
        message: 'Give either file_ids or files.',
        path: body.file_ids === undefined ? ['file_ids'] : ['files'],
      })
    }
  })

export const UpdateVectorStoreFileRequest = z
  .object({
    attributes: Attributes,
  })
  .loose()

export const SearchRequest = z
  .object({
    query: z
      .union([z.string().min(1).max(4096), z.array(z.string().min(1).max(4096)).min(1).max(16)])
      .meta({ description: 'What to look for; several queries rank each chunk by its best match.' }),
    max_num_results: z
      .int()
      .min(1)
      .max(50)
      .optional()
      .meta({ description: 'At most this many results, 1 to 50 (default 10).' }),
    rewrite_query: z.boolean().optional(),
    filters: z.union([ComparisonFilter, CompoundFilter]).optional(),
    ranking_options: z
      .object({
        ranker: z.enum(['none', 'auto', 'default-2024-11-15']).optional(),
        score_threshold: z
          .number()
          .min(0)
          .max(1)
          .optional()
          .meta({ description: 'Only results scoring at least this (0 to 1).' }),
      })
      .loose()
      .optional(),
    // The provider's Visual RAG (its guides/visual-rag page sends them in extra_body).
    top_k_texts: z.int().min(0).max(50).optional().meta({
      description:
        'Visual RAG: at most this many text chunks (0 to 50). With either top_k, texts and page images are ranked apart, each capped by its own (unset: max_num_results, or 10), and merged best first.',
    }),
    top_k_images: z.int().min(0).max(50).optional().meta({
      description:
        'Visual RAG: at most this many page images (0 to 50), from files indexed with a vision_embedding_model.',
    }),
  })
  .loose()

export const VectorStoreListQuery = z.object(cursorQuery)
export const VectorStoreFileListQuery = z.object({
  ...cursorQuery,
  filter: z
    .enum(['in_progress', 'completed', 'failed', 'cancelled'])
    .optional()
    .meta({ description: 'Only files with this status.' }),
})

const FileCounts = z.object({
  in_progress: z.int(),
  completed: z.int(),
  failed: z.int(),
  cancelled: z.int(),
  total: z.int(),
})

export const VectorStore = z
  .object({
    id: z.string(),
    object: z.literal('vector_store'),
    created_at: z.int(),
    name: z.string(),
    usage_bytes: z.int(),
    file_counts: FileCounts,
    status: z.enum(['expired', 'in_progress', 'completed']),
    expires_after: ExpiresAfter.optional(),
    expires_at: z.int().nullable(),
    last_active_at: z.int().nullable(),
    metadata: Metadata,
    chunking_strategy: StoreChunking.optional(),
    usage: EmbeddingUsage.optional(),
  })
  .meta({ description: 'A collection of chunked, embedded files to search.' })

export const VectorStoreFileStatus = z.enum(['in_progress', 'completed', 'cancelled', 'failed'])

export const VectorStoreFile = z
  .object({
    id: z.string().meta({ description: 'The id of the file.' }),
    object: z.literal('vector_store.file'),
    usage_bytes: z.int(),
    created_at: z.int(),
    vector_store_id: z.string(),
    status: VectorStoreFileStatus,
    last_error: z
      .object({
        code: z.enum(['server_error', 'unsupported_file', 'invalid_file']),
        message: z.string(),
      })
      .nullable(),
    chunking_strategy: ChunkingStrategy,
    attributes: Attributes,
    usage: EmbeddingUsage.optional(),
  })
  .meta({
    description:
      'A file attached to a vector store: in_progress until it is chunked and embedded, then completed or failed.',
  })

export const VectorStoreFileBatch = z
  .object({
    id: z.string(),
    object: z.literal('vector_store.files_batch'),
    created_at: z.int(),
    vector_store_id: z.string(),
    status: z.enum(['in_progress', 'completed', 'cancelled', 'failed']),
    file_counts: FileCounts,
    usage: EmbeddingUsage.optional(),
  })
  .meta({ description: 'Files attached together.' })

/** A chunk's content: its text, or (Visual RAG) a page image as a data URL in `text`. */
const ChunkContent = z.object({
  type: z.enum(['text', 'base64']).meta({
    description: '`text`; or `base64` for a page image (Visual RAG), whose `text` is a `data:image/png;base64,…` URL.',
  }),
  text: z.string(),
})

export const SearchResultsPage = z
  .object({
    object: z.literal('vector_store.search_results.page'),
    search_query: z.array(z.string()),
    data: z.array(
      z.object({
        file_id: z.string(),
        filename: z.string(),
        score: z
          .number()
          .min(0)
          .max(1)
          .meta({ description: 'Cosine similarity of the query and the chunk (below 0 counts as 0).' }),
        attributes: Attributes,
        content: z.array(ChunkContent),
        page_number: z.int().min(1).optional().meta({ description: 'Visual RAG: the page a page image is of.' }),
      }),
    ),
    has_more: z.boolean(),
    next_page: z.string().nullable(),
  })
  .meta({ description: 'The chunks that match best, best first.' })

export const FileContentPage = z.object({
  object: z.literal('vector_store.file_content.page'),
  data: z.array(ChunkContent),
  has_more: z.boolean(),
  next_page: z.string().nullable(),
})

export const VectorStoreList = listOf(VectorStore)
export const VectorStoreFileList = listOf(VectorStoreFile)
export const VectorStoreDeleted = deletedObject('vector_store.deleted')
export const VectorStoreFileDeleted = deletedObject('vector_store.file.deleted')

export type VectorStoreObject = z.output<typeof VectorStore>
export type VectorStoreFileObject = z.output<typeof VectorStoreFile>
export type VectorStoreFileBatchObject = z.output<typeof VectorStoreFileBatch>
export type SearchResultsPageObject = z.output<typeof SearchResultsPage>

// What a chunking_strategy means for the files it applies to: OpenAI's `auto` and `static`,
// or the provider's Visual RAG parameters (no `type`): embedding models for text and page
// images, and a chunk size and overlap. A store created with embedding models keeps them as
// its files' defaults; a file's own parameters win. The mock records the models and shows
// them back where OpenAI shows a file's chunking_strategy (and on the store); it embeds
// with its own deterministic vectors whatever the models are called.
import type { z } from 'zod'
import { AUTO_CHUNKING, type ChunkingStrategyParam, type VectorStoreFileObject } from '../../api/vector-stores.ts'
import type { EmbeddingModels, FileChunking } from './vector-store-records.ts'

type Param = z.output<typeof ChunkingStrategyParam> | undefined
type VisualParam = Extract<NonNullable<Param>, { text_embedding_model?: string }>

/** The overlap of a Visual RAG chunk size given alone: as `auto`'s ratio, at most 400 tokens. */
const defaultOverlap = (size: number): number => Math.min(AUTO_CHUNKING.chunk_overlap_tokens, Math.floor(size / 2))

function visualOf(param: Param): VisualParam | undefined {
  return param !== undefined && param.type === undefined ? param : undefined
}

/** The embedding models a store is created with (its files' defaults). */
export function storeModelsOf(param: Param): EmbeddingModels {
  const visual = visualOf(param)
  return {
    ...(visual?.text_embedding_model === undefined ? {} : { text: visual.text_embedding_model }),
    ...(visual?.vision_embedding_model === undefined ? {} : { vision: visual.vision_embedding_model }),
  }
}

export function fileChunkingOf(param: Param, storeModels: EmbeddingModels): FileChunking {
  const visual = visualOf(param)
  const models: EmbeddingModels = { ...storeModels, ...storeModelsOf(param) }
  const isVisual = visual !== undefined || models.text !== undefined || models.vision !== undefined
  if (param?.type === 'static') return { sizing: param.static, models, visual: isVisual }
  if (visual?.chunk_size === undefined && visual?.chunk_overlap === undefined)
    return { sizing: AUTO_CHUNKING, models, visual: isVisual }
  const size = visual.chunk_size ?? AUTO_CHUNKING.max_chunk_size_tokens
  return {
    sizing: { max_chunk_size_tokens: size, chunk_overlap_tokens: visual.chunk_overlap ?? defaultOverlap(size) },
    models,
    visual: true,
  }
}

/** A file's chunking_strategy: OpenAI's static one, with the Visual RAG parameters beside it when it had any. */
export function chunkingStrategyObject(chunking: FileChunking): VectorStoreFileObject['chunking_strategy'] {
  const shown = { type: 'static' as const, static: { ...chunking.sizing } }
  if (!chunking.visual) return shown
  return {
    ...shown,
    ...(chunking.models.text === undefined ? {} : { text_embedding_model: chunking.models.text }),
    ...(chunking.models.vision === undefined ? {} : { vision_embedding_model: chunking.models.vision }),
    chunk_size: chunking.sizing.max_chunk_size_tokens,
    chunk_overlap: chunking.sizing.chunk_overlap_tokens,
  }
}

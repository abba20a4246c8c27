// Which schema (src/api/) checks the body and the query of each endpoint. The corridor
// validates with these, and the OpenAPI document shows them: one description of a request.
import { z } from 'zod'
import { CreateFileForm, FileListQuery } from '../api/files.ts'
import {
  AudioForm,
  ChatCompletionRequest,
  CompletionRequest,
  EmbeddingRequest,
  FineTuningJobRequest,
  ImageEditForm,
  ImageGenerationRequest,
  ResponseRequest,
} from '../api/inference.ts'
import {
  CreateVectorStoreFileBatchRequest,
  CreateVectorStoreFileRequest,
  CreateVectorStoreRequest,
  SearchRequest,
  UpdateVectorStoreFileRequest,
  UpdateVectorStoreRequest,
  VectorStoreFileListQuery,
  VectorStoreListQuery,
} from '../api/vector-stores.ts'
import type { Endpoint } from '../config/schema.ts'
import { cursorQuery } from '../api/common.ts'

/** JSON bodies. */
export const JSON_BODIES: Partial<Record<Endpoint, z.ZodType>> = {
  'chat.completions': ChatCompletionRequest,
  completions: CompletionRequest,
  responses: ResponseRequest,
  embeddings: EmbeddingRequest,
  'images.generations': ImageGenerationRequest,
  'fine_tuning.jobs.create': FineTuningJobRequest,
  'vector_stores.create': CreateVectorStoreRequest,
  'vector_stores.update': UpdateVectorStoreRequest,
  'vector_stores.search': SearchRequest,
  'vector_stores.files.create': CreateVectorStoreFileRequest,
  'vector_stores.files.update': UpdateVectorStoreFileRequest,
  'vector_stores.file_batches.create': CreateVectorStoreFileBatchRequest,
}

/** multipart/form-data bodies: text fields as strings, each file part as UPLOADED_PART. */
export const FORMS: Partial<Record<Endpoint, z.ZodType>> = {
  'audio.transcriptions': AudioForm,
  'audio.translations': AudioForm,
  'images.edits': ImageEditForm,
  'files.create': CreateFileForm,
}

/** Query strings of the lists (the retrieve routes that share a list's endpoint name take none). */
export const QUERIES: Partial<Record<Endpoint, z.ZodType>> = {
  'files.list': FileListQuery,
  'fine_tuning.jobs.list': z.object({ limit: cursorQuery.limit, after: cursorQuery.after }),
  'vector_stores.list': VectorStoreListQuery,
  'vector_stores.files.list': VectorStoreFileListQuery,
  'vector_stores.file_batches.list': VectorStoreFileListQuery,
}

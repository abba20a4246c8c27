// The proxied endpoints in the OpenAPI document, generated from their specs: method and
// path from the route table, the body and query schemas the corridor validates with
// (request-schemas.ts), and from the table below the words and the reply's schema. An
// endpoint added to a route table without an entry here stops the document from building.
import { z } from 'zod'
import { FileDeleted, FileList, FileObject, FileValidation } from '../api/files.ts'
import {
  ChatCompletion,
  Completion,
  EmbeddingList,
  FineTuningEventList,
  FineTuningJob,
  FineTuningJobList,
  ImagesResponse,
  Model,
  ModelList,
  ResponseObject,
  Transcription,
} from '../api/inference.ts'
import {
  FileContentPage,
  SearchResultsPage,
  VectorStore,
  VectorStoreDeleted,
  VectorStoreFile,
  VectorStoreFileBatch,
  VectorStoreFileDeleted,
  VectorStoreFileList,
  VectorStoreList,
} from '../api/vector-stores.ts'
import type { HttpMethod, OperationDoc } from '../openapi/operation.ts'
import { templateOf } from '../openapi/operation.ts'
import { azureTwinOf } from './azure-endpoints.ts'
import type { EndpointSpec } from './endpoints.ts'
import { FORMS, JSON_BODIES, QUERIES } from './request-schemas.ts'

interface RouteWords {
  readonly id: string
  readonly summary: string
  readonly tag: string
  readonly reply: z.ZodType
  readonly description?: string
  /** The reply is the file's bytes. */
  readonly binary?: boolean
  /** A list: it takes its endpoint's query (limit, order, after...). */
  readonly list?: true
}

const TAG = {
  models: 'Models',
  chat: 'Chat and completions',
  embeddings: 'Embeddings',
  audio: 'Audio',
  images: 'Images',
  files: 'Files',
  fineTuning: 'Fine-tuning',
  stores: 'Vector stores',
  storeFiles: 'Vector store files',
  batches: 'Vector store file batches',
} as const

const OWNED =
  'Only the owner of the key (its `owner`, or the key itself) sees it; to anyone else it does not exist (404).'

const WORDS: Readonly<Record<string, RouteWords>> = {
  'POST /chat/completions': {
    id: 'createChatCompletion',
    summary: 'Create a chat completion',
    tag: TAG.chat,
    reply: ChatCompletion,
  },
  'POST /completions': {
    id: 'createCompletion',
    summary: 'Create a completion (legacy)',
    tag: TAG.chat,
    reply: Completion,
  },
  'POST /responses': {
    id: 'createResponse',
    summary: 'Create a response (Responses API)',
    tag: TAG.chat,
    reply: ResponseObject,
  },
  'POST /embeddings': {
    id: 'createEmbedding',
    summary: 'Create embeddings',
    tag: TAG.embeddings,
    reply: EmbeddingList,
  },
  'POST /audio/transcriptions': {
    id: 'createTranscription',
    summary: 'Transcribe audio',
    tag: TAG.audio,
    reply: Transcription,
  },
  'POST /audio/translations': {
    id: 'createTranslation',
    summary: 'Translate audio into English',
    tag: TAG.audio,
    reply: Transcription,
  },
  'POST /images/generations': { id: 'createImage', summary: 'Generate images', tag: TAG.images, reply: ImagesResponse },
  'POST /images/edits': { id: 'createImageEdit', summary: 'Edit an image', tag: TAG.images, reply: ImagesResponse },
  'POST /fine_tuning/jobs': {
    id: 'createFineTuningJob',
    summary: 'Create a fine-tuning job',
    tag: TAG.fineTuning,
    reply: FineTuningJob,
    description: "The training and validation files must be the caller's.",
  },
  'GET /fine_tuning/jobs': {
    id: 'listFineTuningJobs',
    summary: 'List your fine-tuning jobs',
    tag: TAG.fineTuning,
    reply: FineTuningJobList,
    list: true,
  },
  'GET /fine_tuning/jobs/:id': {
    id: 'retrieveFineTuningJob',
    summary: 'Retrieve a fine-tuning job',
    tag: TAG.fineTuning,
    reply: FineTuningJob,
    description: OWNED,
  },
  'POST /fine_tuning/jobs/:id/cancel': {
    id: 'cancelFineTuningJob',
    summary: 'Cancel a fine-tuning job',
    tag: TAG.fineTuning,
    reply: FineTuningJob,
  },
  'GET /fine_tuning/jobs/:id/events': {
    id: 'listFineTuningEvents',
    summary: "List a fine-tuning job's events",
    tag: TAG.fineTuning,
    reply: FineTuningEventList,
  },
  'POST /files': {
    id: 'createFile',
    summary: 'Upload a file',
    tag: TAG.files,
    reply: FileObject,
    description: 'One store serves /v2/files and /v1/files: a file uploaded on either is on both.',
  },
  'GET /files': { id: 'listFiles', summary: 'List your files', tag: TAG.files, reply: FileList, list: true },
  'GET /files/:id': {
    id: 'retrieveFile',
    summary: 'Retrieve a file',
    tag: TAG.files,
    reply: FileObject,
    description: OWNED,
  },
  'GET /files/:id/content': {
    id: 'downloadFile',
    summary: "Download a file's bytes",
    tag: TAG.files,
    reply: FileObject,
    binary: true,
  },
  'GET /files/validate/:id': {
    id: 'validateFile',
    summary: 'Validate a fine-tuning dataset',
    tag: TAG.files,
    reply: FileValidation,
    description: `Checks that the file is JSONL of chat examples in OpenAI's fine-tuning format (the provider's fine-tuning guide calls it before creating a job, with the key in an \`api-key\` header). An invalid file is still a 200, with \`valid: false\` and the problems by line. ${OWNED}`,
  },
  'DELETE /files/:id': {
    id: 'deleteFile',
    summary: 'Delete a file',
    tag: TAG.files,
    reply: FileDeleted,
    description: 'The file also leaves every vector store it was attached to.',
  },

  'POST /vector_stores': {
    id: 'createVectorStore',
    summary: 'Create a vector store',
    tag: TAG.stores,
    reply: VectorStore,
    description:
      "Files named in `file_ids` (yours) are attached at once; the reply's `usage` counts their embedding tokens. " +
      "Visual RAG (the provider's guide): `chunking_strategy` may name `text_embedding_model` and `vision_embedding_model` instead of a `type`; the store keeps them as its files' defaults and shows them as its `chunking_strategy`.",
  },
  'GET /vector_stores': {
    id: 'listVectorStores',
    summary: 'List your vector stores',
    tag: TAG.stores,
    reply: VectorStoreList,
    list: true,
  },
  'GET /vector_stores/:vector_store_id': {
    id: 'retrieveVectorStore',
    summary: 'Retrieve a vector store',
    tag: TAG.stores,
    reply: VectorStore,
    description: OWNED,
  },
  'POST /vector_stores/:vector_store_id': {
    id: 'modifyVectorStore',
    summary: 'Modify a vector store',
    tag: TAG.stores,
    reply: VectorStore,
  },
  'DELETE /vector_stores/:vector_store_id': {
    id: 'deleteVectorStore',
    summary: 'Delete a vector store',
    tag: TAG.stores,
    reply: VectorStoreDeleted,
  },
  'POST /vector_stores/:vector_store_id/search': {
    id: 'searchVectorStore',
    summary: 'Search a vector store',
    tag: TAG.stores,
    reply: SearchResultsPage,
    description:
      "The chunks most similar to the query, best first. The query's tokens are metered as the call's input tokens. " +
      'Visual RAG: page images are results too (`content[0].type` `base64`, a data URL in `text`, with `page_number`); `top_k_texts` and `top_k_images` cap each kind.',
  },
  'POST /vector_stores/:vector_store_id/files': {
    id: 'createVectorStoreFile',
    summary: 'Attach a file to a vector store',
    tag: TAG.storeFiles,
    reply: VectorStoreFile,
    description:
      "Answers `in_progress` at once; the file is `completed` (or `failed`) once chunked and embedded. The reply's `usage` counts the embedding tokens, metered against the key. " +
      "Visual RAG: `chunking_strategy` may be `{chunk_size, chunk_overlap}` (and the embedding models) instead of a `type`; the file's `chunking_strategy` shows them beside OpenAI's `static`.",
  },
  'GET /vector_stores/:vector_store_id/files': {
    id: 'listVectorStoreFiles',
    summary: "List a vector store's files",
    tag: TAG.storeFiles,
    reply: VectorStoreFileList,
    list: true,
  },
  'GET /vector_stores/:vector_store_id/files/:file_id': {
    id: 'retrieveVectorStoreFile',
    summary: 'Retrieve a vector store file',
    tag: TAG.storeFiles,
    reply: VectorStoreFile,
  },
  'GET /vector_stores/:vector_store_id/files/:file_id/content': {
    id: 'retrieveVectorStoreFileContent',
    summary: "Retrieve a vector store file's parsed text",
    tag: TAG.storeFiles,
    reply: FileContentPage,
  },
  'POST /vector_stores/:vector_store_id/files/:file_id': {
    id: 'updateVectorStoreFileAttributes',
    summary: "Update a vector store file's attributes",
    tag: TAG.storeFiles,
    reply: VectorStoreFile,
  },
  'DELETE /vector_stores/:vector_store_id/files/:file_id': {
    id: 'deleteVectorStoreFile',
    summary: 'Detach a file from a vector store',
    tag: TAG.storeFiles,
    reply: VectorStoreFileDeleted,
    description: 'The file itself stays (DELETE /v1/files/{id} deletes it).',
  },
  'POST /vector_stores/:vector_store_id/file_batches': {
    id: 'createVectorStoreFileBatch',
    summary: 'Attach files to a vector store, as a batch',
    tag: TAG.batches,
    reply: VectorStoreFileBatch,
  },
  'GET /vector_stores/:vector_store_id/file_batches/:batch_id': {
    id: 'retrieveVectorStoreFileBatch',
    summary: 'Retrieve a file batch',
    tag: TAG.batches,
    reply: VectorStoreFileBatch,
  },
  'POST /vector_stores/:vector_store_id/file_batches/:batch_id/cancel': {
    id: 'cancelVectorStoreFileBatch',
    summary: 'Cancel a file batch',
    tag: TAG.batches,
    reply: VectorStoreFileBatch,
    description: 'Files still in progress end `cancelled`.',
  },
  'GET /vector_stores/:vector_store_id/file_batches/:batch_id/files': {
    id: 'listFilesInVectorStoreBatch',
    summary: "List a file batch's files",
    tag: TAG.batches,
    reply: VectorStoreFileList,
    list: true,
  },
}

/** What an Azure-style alias says before its twin's words. */
function azureWords(prefix: string, twin: string, deployment: boolean): string {
  return (
    `Azure OpenAI's path to \`${prefix}${twin}\`, for Azure OpenAI clients (the SDKs' AzureOpenAI with this gateway's \`${prefix}\` as its endpoint), ` +
    'which send the key in an `api-key` header. ' +
    (deployment
      ? "The deployment is the model: a JSON body's `model` is set to it; a multipart form is forwarded as sent, so its `model` must name the deployment."
      : "The body's `model` names the deployment, as on Azure.")
  )
}

/** The query an Azure OpenAI client adds to every call. */
const AzureQuery = z.object({
  'api-version': z.string().optional().meta({
    description:
      "Azure OpenAI's API version, as Azure clients send it: accepted (any value, or none) and not passed on upstream.",
  }),
})

const PARAMS: Readonly<Record<string, string>> = {
  deployment: "The model to use (a name from /v2/models), in Azure's deployment position.",
  id: "The object's id.",
  vector_store_id: 'A vector store of yours.',
  file_id: 'The id of a file attached to the store.',
  batch_id: 'A file batch of the store.',
}

export interface InferenceDocOptions {
  /** Makes operationIds unique across prefixes: "v1" → v1CreateFile. */
  readonly idPrefix?: string
}

/** The OperationDocs of `specs`, served under `prefix`. */
export function inferenceOperations(
  prefix: string,
  specs: readonly EndpointSpec[],
  options: InferenceDocOptions = {},
): OperationDoc[] {
  return specs.map((spec) => {
    // An Azure-style alias has its twin's words.
    const azureTwin = azureTwinOf(spec.route)
    const twin = azureTwin ?? spec.route
    const words = WORDS[`${spec.method} ${twin}`]
    if (words === undefined) throw new Error(`no API reference words for ${spec.method} ${spec.route}`)
    const body =
      spec.body === 'json' ? JSON_BODIES[spec.endpoint] : spec.body === 'multipart' ? FORMS[spec.endpoint] : undefined
    if (spec.body !== 'none' && body === undefined) throw new Error(`no request schema for ${spec.endpoint}`)
    const query = words.list === true ? QUERIES[spec.endpoint] : azureTwin === undefined ? undefined : AzureQuery
    return {
      method: spec.method.toLowerCase() as HttpMethod,
      path: `${prefix}${templateOf(spec.route)}`,
      operationId:
        options.idPrefix === undefined
          ? words.id
          : `${options.idPrefix}${words.id.charAt(0).toUpperCase()}${words.id.slice(1)}`,
      summary: azureTwin === undefined ? words.summary : `${words.summary} (Azure OpenAI path)`,
      description: [
        azureTwin === undefined ? undefined : azureWords(prefix, twin, spec.modelParam !== undefined),
        words.description,
        `Scope: \`${spec.endpoint}\`.`,
      ]
        .filter(Boolean)
        .join(' '),
      tag: words.tag,
      security: 'apiKey',
      pathParams: PARAMS,
      ...(query === undefined ? {} : { query }),
      ...(body === undefined
        ? {}
        : {
            body: { contentType: spec.body === 'multipart' ? 'multipart/form-data' : 'application/json', schema: body },
          }),
      responses: {
        200:
          words.binary === true
            ? { description: 'The bytes of the file, as uploaded.', contentType: 'application/octet-stream' }
            : { description: 'OK', schema: words.reply, ...(spec.streams === true ? { streams: true } : {}) },
      },
      rateLimited: true,
    } satisfies OperationDoc
  })
}

/** The model routes app.ts answers itself, from the configuration. */
export function modelOperations(prefix: string): OperationDoc[] {
  const common = { tag: TAG.models, security: 'apiKey', rateLimited: true } as const
  return [
    {
      ...common,
      method: 'get',
      path: `${prefix}/models`,
      operationId: 'listModels',
      summary: 'List the models the key may use',
      description: 'Scope: `models.list`.',
      responses: { 200: { description: 'OK', schema: ModelList } },
    },
    {
      ...common,
      method: 'get',
      path: `${prefix}/models/{model}`,
      operationId: 'retrieveModel',
      summary: 'Retrieve a model',
      description: "Scope: `models.get`. 404 for a model that is unknown or outside the key's scopes.",
      pathParams: { model: 'A model name (may hold `/`).' },
      responses: { 200: { description: 'OK', schema: Model } },
    },
    {
      ...common,
      method: 'get',
      path: `${prefix}/audio/models`,
      operationId: 'listAudioModels',
      summary: 'List the audio models the key may use',
      description: 'Scope: `audio.models`.',
      responses: { 200: { description: 'OK', schema: ModelList } },
    },
  ]
}

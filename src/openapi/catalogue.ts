// The gateway's API, as one OpenAPI 3.1 document: each route module contributes its
// OperationDocs (the routes it serves), and this list gathers them. A route served but not
// listed here (or listed but not served) fails test/openapi/routes.test.ts, which compares
// this document with the router: a feature adding routes adds its operations below.
import packageJson from '../../package.json' with { type: 'json' }
import { ApiKey } from '../api/admin.ts'
import { EmbeddingUsage, Metadata } from '../api/common.ts'
import { FileObject } from '../api/files.ts'
import {
  Attributes,
  ChunkingStrategy,
  ChunkingStrategyParam,
  ComparisonFilter,
  CompoundFilter,
  ExpiresAfter,
  VectorStore,
  VectorStoreFile,
  VectorStoreFileBatch,
  VectorStoreFileList,
  VisualRagChunking,
} from '../api/vector-stores.ts'
import { ADMIN_OPERATIONS, BACKENDS_TAG, BUDGETS_TAG, CONFIG_TAG } from '../admin/docs.ts'
import { USER_ADMIN_OPERATIONS } from '../admin/users.ts'
import { WEBHOOK_OPERATIONS } from '../admin/webhooks.ts'
import { AUDIT_OPERATIONS, AUDIT_TAG } from '../audit/api.ts'
import { TOKEN_OPERATIONS } from '../jwt/routes.ts'
import { PROBE_OPERATIONS } from '../http/probes.ts'
import { FRONT_DOOR_OPERATIONS } from '../http/front-door.ts'
import { inferenceOperations, modelOperations } from '../inference/docs.ts'
import { AZURE_ENDPOINTS } from '../inference/azure-endpoints.ts'
import { PROXIED_ENDPOINTS } from '../inference/endpoints.ts'
import { FILE_SPECS, VECTOR_STORE_ENDPOINTS } from '../inference/v1-endpoints.ts'
import { buildDocument, type OpenApiDocument, type TagGroups } from './document.ts'
import type { OperationDoc } from './operation.ts'
import { QUEUE_ADMIN_OPERATIONS, QueueRequest, queueOperations } from '../queue/docs.ts'
import { REFERENCE_OPERATIONS } from './routes.ts'
import { BATCHES_TAG, batchOperations } from '../batches/docs.ts'
import { RAG_OPERATIONS, RAG_TAG } from '../rag/docs.ts'
import { PORTAL_OPERATIONS } from '../portal/operations.ts'
import { ANTHROPIC_OPERATIONS, ANTHROPIC_QUEUE_OPERATIONS, ANTHROPIC_TAG } from '../protocols/anthropic/docs.ts'

/** What this gateway serves beyond what it always does. */
export interface ServedParts {
  /** portal.enabled: the /portal pages. */
  readonly portal: boolean
}

const ALL: ServedParts = { portal: true }

export function apiOperations(served: ServedParts = ALL): OperationDoc[] {
  return [
    ...FRONT_DOOR_OPERATIONS,
    ...PROBE_OPERATIONS,
    ...modelOperations('/v2'),
    ...inferenceOperations('/v2', PROXIED_ENDPOINTS),
    ...inferenceOperations('/v2', AZURE_ENDPOINTS, { idPrefix: 'azure' }),
    ...inferenceOperations('/v1', FILE_SPECS, { idPrefix: 'v1' }),
    ...inferenceOperations('/v1', VECTOR_STORE_ENDPOINTS),
    ...queueOperations(),
    ...batchOperations(),
    ...ANTHROPIC_OPERATIONS,
    ...ANTHROPIC_QUEUE_OPERATIONS,
    ...ADMIN_OPERATIONS,
    ...QUEUE_ADMIN_OPERATIONS,
    ...USER_ADMIN_OPERATIONS,
    ...WEBHOOK_OPERATIONS,
    ...AUDIT_OPERATIONS,
    ...TOKEN_OPERATIONS,
    ...REFERENCE_OPERATIONS,
    ...RAG_OPERATIONS,
    ...(served.portal ? PORTAL_OPERATIONS : []),
  ]
}

/** Schemas shown under their own names (the rest are named after their operation). */
const NAMED = {
  Metadata,
  File: FileObject,
  VectorStore,
  VectorStoreFile,
  VectorStoreFileList,
  VectorStoreFileBatch,
  VectorStoreFileAttributes: Attributes,
  ChunkingStrategyRequestParam: ChunkingStrategyParam,
  VisualRagChunkingParam: VisualRagChunking,
  ChunkingStrategy,
  VectorStoreExpirationAfter: ExpiresAfter,
  ComparisonFilter,
  CompoundFilter,
  EmbeddingUsage,
  ApiKey,
  QueueRequest,
}

const GROUPS: TagGroups = [
  { name: 'Inference (/v2)', tags: ['Models', 'Chat and completions', 'Embeddings', 'Audio', 'Images', 'Fine-tuning'] },
  {
    name: 'Files and vector stores (/v1, /v2)',
    tags: ['Files', 'Vector stores', 'Vector store files', 'Vector store file batches'],
  },
  { name: 'Queue (/queue)', tags: ['Queue'] },
  { name: 'Batches (/v2, /v1)', tags: [BATCHES_TAG] },
  { name: 'Anthropic Messages API (/v1/messages)', tags: [ANTHROPIC_TAG] },
  {
    name: 'Key portal (/admin)',
    tags: [
      'Admin: keys',
      'Admin: usage and tiers',
      'Admin: queue',
      'Admin: users',
      BUDGETS_TAG,
      BACKENDS_TAG,
      'Admin: webhooks',
      CONFIG_TAG,
      AUDIT_TAG,
    ],
  },
  { name: 'RAG gateway', tags: ['RAG gateway: login', RAG_TAG] },
  { name: 'Key portal in a browser (/portal)', tags: ['Portal'] },
  { name: 'Gateway', tags: ['Health', 'API reference'] },
]

const DESCRIPTION = `Tollgate is a rate-limit-aware gateway in front of OpenAI-compatible model backends.
Clients keep the official OpenAI SDK and change only \`baseURL\` (\`http://host:port/v2\`,
\`/v1\` for files and vector stores, \`/queue\` to wait for capacity instead of a 429) and the key.

**Authentication.** \`/v2\`, \`/v1\` and \`/queue\` take an API key, \`Authorization: Bearer <API_KEY>\`
or, as Azure OpenAI clients send it, \`api-key: <API_KEY>\` (both at once must be the same key);
\`/admin\` takes the admin token. A key outside its scopes gets 403. Azure OpenAI clients pointed at
\`/v2\` call \`/v2/openai/deployments/{deployment}/...\`: those paths are aliases of their \`/v2\` twins,
the deployment being the model.

**Limits.** Every reply after authentication carries the key's \`x-ratelimit-*\` headers; over a
limit the answer is 429 with \`retry-after\` and \`retry-after-ms\`. Endpoints without a model
(files, vector stores, fine-tuning) count under the model \`*\`.

**Ownership.** Files, fine-tuning jobs, vector stores and file batches belong to the owner of
the key that made them; to any other owner they do not exist (404).

**Errors** are OpenAI's, with FastAPI's \`detail\` beside them holding the same message:
\`{"error": {"message", "type", "param", "code"}, "detail": "..."}\`. The OpenAI SDKs read \`error\`;
code written for the provider's API, which answers \`{"detail": "..."}\`, reads \`detail\`. Upstream
errors in OpenAI's shape are relayed with \`detail\` added. The RAG gateway answers \`{"detail": ...}\` alone.`

/** The document of everything the gateway serves (all of it, unless `served` says a part is off). */
export function apiDocument(served: ServedParts = ALL): OpenApiDocument {
  const groups = served.portal ? GROUPS : GROUPS.filter((g) => !g.tags.includes('Portal'))
  return buildDocument(
    apiOperations(served),
    NAMED,
    { title: 'Tollgate', version: packageJson.version, description: DESCRIPTION },
    groups,
  )
}

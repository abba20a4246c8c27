// Issue 27: /openapi.json documents what the provider's docs use that OpenAI's API does not
// have: the Visual RAG parameters (guides/visual-rag.mdx), files/validate
// (guides/fine-tuning.mdx), the `api-key` header and the Azure paths
// (integrations/llama-index.mdx), and the `detail` of error bodies
// (reference/error-codes.mdx); pages of telekom/aifoundation-docs, src/content/docs/v1/.
// The document's schemas accept the guides' own bodies and refuse what the gateway refuses.
import { Ajv2020 } from 'ajv/dist/2020.js'
import t from 'tap'
import { apiDocument } from '../../src/openapi/catalogue.ts'

const document = apiDocument()
type Schema = { properties?: Record<string, Record<string, unknown>>; required?: string[] }
const schemas = document.components.schemas as Record<string, Schema>
type Operation = {
  parameters?: Array<{ name: string; in: string }>
  security?: Array<Record<string, unknown>>
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>
}
const paths = document.paths as Record<string, Record<string, Operation>>

const ajv = new Ajv2020({ strict: false, validateFormats: false })
ajv.addSchema({ $id: 'https://tollgate.invalid/openapi.json', components: document.components })
const validator = (name: string) => {
  const validate = ajv.getSchema(`https://tollgate.invalid/openapi.json#/components/schemas/${name}`)
  if (validate === undefined) throw new Error(`no schema ${name}`)
  return (value: unknown): boolean => validate(value) === true
}

t.test('the Visual RAG parameters', async (t) => {
  const createStore = validator('CreateVectorStoreRequest')
  const attach = validator('CreateVectorStoreFileRequest')
  const search = validator('SearchVectorStoreRequest')
  // visual-rag.mdx, "Create a Vector Store" / "Ingest a File" / "Retrieval".
  t.ok(
    createStore({
      name: 'my_vs',
      chunking_strategy: {
        text_embedding_model: 'text-embedding-bge-m3',
        vision_embedding_model: 'tsi-embedding-colqwen2-2b-v1',
      },
    }),
    "the guide's store",
  )
  t.ok(
    attach({ file_id: 'file-abc123', chunking_strategy: { chunk_size: 1024, chunk_overlap: 100 } }),
    "the guide's ingest",
  )
  t.ok(search({ query: 'Which new features are supported?', top_k_texts: 3, top_k_images: 2 }), "the guide's search")
  t.ok(
    createStore({
      chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
    }),
    "OpenAI's static still",
  )
  t.notOk(createStore({ chunking_strategy: { type: 'auto', text_embedding_model: 'x' } }), 'not both kinds at once')
  t.notOk(attach({ file_id: 'f', chunking_strategy: { chunk_size: 10 } }), 'chunks too small')
  t.notOk(search({ query: 'x', top_k_images: 51 }), 'top_k_images over 50')
  const purposes = (schemas.CreateFileRequest?.properties?.purpose as { enum?: string[] } | undefined)?.enum ?? []
  t.ok(purposes.includes('visual-rag'), 'purpose visual-rag')
  t.ok(schemas.VisualRagChunkingParam, 'the parameters under their own name')
  t.ok(schemas.VectorStore?.properties?.chunking_strategy, 'a store shows its embedding models')
})

t.test('files/validate, the api-key header and the Azure paths', async (t) => {
  for (const prefix of ['/v2', '/v1'])
    t.ok(paths[`${prefix}/files/validate/{id}`]?.get, `GET ${prefix}/files/validate/{id}`)
  t.match(
    paths['/v2/files/validate/{id}']?.get?.responses['200']?.content?.['application/json']?.schema?.$ref,
    /ValidateFileResponse$/,
  )
  t.ok(schemas.ValidateFileResponse?.required?.includes('valid'), 'its reply says valid')

  const schemes = document.components.securitySchemes as Record<string, Record<string, unknown>>
  t.match(
    schemes.apiKeyHeader,
    { type: 'apiKey', in: 'header', name: 'api-key' },
    'the api-key header, a security scheme',
  )
  t.same(
    paths['/v2/chat/completions']?.post?.security,
    [{ apiKey: [] }, { apiKeyHeader: [] }],
    'a Bearer key or the api-key header, either',
  )

  for (const route of [
    'chat/completions',
    'completions',
    'embeddings',
    'audio/transcriptions',
    'audio/translations',
    'images/generations',
    'images/edits',
  ]) {
    const operation = paths[`/v2/openai/deployments/{deployment}/${route}`]?.post
    t.ok(operation, `POST /v2/openai/deployments/{deployment}/${route}`)
    t.ok(
      operation?.parameters?.some((p) => p.name === 'api-version' && p.in === 'query'),
      `${route}: api-version in the query`,
    )
    t.ok(
      operation?.parameters?.some((p) => p.name === 'deployment' && p.in === 'path'),
      `${route}: the deployment`,
    )
  }
})

t.test('the detail of error bodies', async (t) => {
  t.same([...(schemas.Error?.required ?? [])].sort(), ['detail', 'error'], 'Error has error and detail')
  const error = validator('Error')
  t.ok(
    error({
      error: {
        message: 'Incorrect API key provided.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
      detail: 'Incorrect API key provided.',
    }),
  )
  t.match(
    paths['/v2/chat/completions']?.post?.responses['401']?.content?.['application/json']?.schema?.$ref,
    /\/Error$/,
    '/v2 refusals are Error',
  )
  t.match(
    paths['/api/v1/auth/me']?.get?.responses['401']?.content?.['application/json']?.schema?.$ref,
    /\/ErrorDetail$/,
    "the RAG side's are FastAPI's",
  )
})

// What the fuzz suite attacks: one entry per endpoint. Adding an endpoint to the fuzz
// run is adding an entry here (or a list of them, e.g. QUEUE_TARGETS, RAG_TARGETS) and
// passing it to runFuzz: the generators read the method, path, credential, body kind and
// template, and the property checks replies against the target's error shape.
import type { Part } from '../helpers/multipart.ts'

/**
 * How a target's errors look: OpenAI's `{"error": {...}}`, FastAPI's `{"detail": ...}` (RAG
 * services), or a browser's: an HTML page or a redirect within the site (the portal).
 */
export type ErrorShape = 'openai' | 'fastapi' | 'html' | 'anthropic'

export type BodyKind = 'json' | 'optional-json' | 'multipart' | 'form' | 'none'

/**
 * A credential as it travels: an Authorization header value (API keys, tokens), or a
 * Cookie header value (a portal session), which comes with the CSRF token its forms carry.
 */
export type Credential =
  | { readonly header: 'authorization'; readonly value: string }
  | { readonly header: 'x-api-key'; readonly value: string }
  | { readonly header: 'cookie'; readonly value: string; readonly csrf: string }

export const bearer = (token: string): Credential => ({ header: 'authorization', value: `Bearer ${token}` })

/** What the fuzz run knows once its gateway is up: credentials, names and ids to aim at. */
export interface FuzzContext {
  /** Credentials by name: 'api-key', 'admin', 'portal', ... */
  readonly credentials: Readonly<Record<string, Credential>>
  /** Configured model names by kind (chat, embedding, image, audio). */
  readonly models: Readonly<Record<string, readonly string[]>>
  /** Ids that exist, by kind ('key', 'file', 'fine_tuning.job'), for `{id}` in paths. Never the fuzz's own key. */
  readonly ids: Readonly<Record<string, readonly string[]>>
  /** Secrets no reply may contain (the admin token, the API key). */
  readonly secrets: readonly string[]
}

export interface FuzzTarget {
  /** For reports: e.g. "v2 chat.completions". */
  readonly name: string
  readonly method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'
  /** Path, with `{id}` (from ctx.ids[idKind]) or `{model}` (from ctx.models) to fill in. */
  readonly path: string
  readonly idKind?: string
  /** Which ctx.credentials entry authorizes it; 'none' for public routes. */
  readonly auth: string
  readonly body: BodyKind
  readonly errors: ErrorShape
  /** A body the endpoint accepts: the fuzzer mutates its fields (wrong types, removed, added). */
  readonly template?: (ctx: FuzzContext) => Record<string, unknown>
  /** For multipart targets: the form's parts. */
  readonly form?: (ctx: FuzzContext) => Part[]
  /** For url-encoded form targets: each field with values it plausibly takes, the usual one first. */
  readonly fields?: (ctx: FuzzContext) => Readonly<Record<string, readonly string[]>>
  /** Query parameters the route knows, with plausible values (from the context where they are ids). */
  readonly query?:
    Readonly<Record<string, readonly string[]>> | ((ctx: FuzzContext) => Readonly<Record<string, readonly string[]>>)
  /** A page a browser loads: its requests carry Origin and Sec-Fetch-Site as a browser's would. */
  readonly browser?: boolean
  /** Headers the route reads, as sets one of which each request carries: the usual set first (e.g. anthropic-version). */
  readonly headers?: ReadonlyArray<ReadonlyArray<readonly [string, string]>>
}

const pick = (list: readonly string[] | undefined, fallback: string): string => list?.[0] ?? fallback
const chat = (ctx: FuzzContext): string => pick(ctx.models.chat, 'gpt-4o')

const AUDIO = Buffer.from('RIFF$\u0000\u0000\u0000WAVEfmt ', 'latin1')
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')

export const V2_TARGETS: readonly FuzzTarget[] = [
  { name: 'v2 models.list', method: 'GET', path: '/v2/models', auth: 'api-key', body: 'none', errors: 'openai' },
  { name: 'v2 models.get', method: 'GET', path: '/v2/models/{model}', auth: 'api-key', body: 'none', errors: 'openai' },
  { name: 'v2 audio.models', method: 'GET', path: '/v2/audio/models', auth: 'api-key', body: 'none', errors: 'openai' },
  {
    name: 'v2 chat.completions',
    method: 'POST',
    path: '/v2/chat/completions',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there.' },
      ],
      max_tokens: 16,
      temperature: 0.5,
      n: 1,
      stream: false,
      stream_options: null,
      user: 'fuzz',
      tools: [],
      seed: 1,
    }),
  },
  {
    name: 'v2 completions',
    method: 'POST',
    path: '/v2/completions',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      prompt: 'Once upon a time',
      max_tokens: 16,
      n: 1,
      best_of: 1,
      stream: false,
      echo: false,
      logprobs: null,
    }),
  },
  {
    name: 'v2 responses',
    method: 'POST',
    path: '/v2/responses',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      input: 'Say something.',
      instructions: 'Be brief.',
      max_output_tokens: 16,
      stream: false,
    }),
  },
  {
    name: 'v2 embeddings',
    method: 'POST',
    path: '/v2/embeddings',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: pick(ctx.models.embedding, 'text-embedding-ada-002'),
      input: ['one', 'two'],
      encoding_format: 'float',
      dimensions: 8,
    }),
  },
  {
    name: 'v2 images.generations',
    method: 'POST',
    path: '/v2/images/generations',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: pick(ctx.models.image, 'gpt-image-1'),
      prompt: 'a red square',
      n: 1,
      size: '256x256',
      response_format: 'b64_json',
    }),
  },
  {
    name: 'v2 audio.transcriptions',
    method: 'POST',
    path: '/v2/audio/transcriptions',
    auth: 'api-key',
    body: 'multipart',
    errors: 'openai',
    form: (ctx) => [
      { name: 'model', value: pick(ctx.models.audio, 'whisper-large-v3') },
      { name: 'response_format', value: 'json' },
      { name: 'file', filename: 'a.wav', data: AUDIO, contentType: 'audio/wav' },
    ],
  },
  {
    name: 'v2 audio.translations',
    method: 'POST',
    path: '/v2/audio/translations',
    auth: 'api-key',
    body: 'multipart',
    errors: 'openai',
    form: (ctx) => [
      { name: 'model', value: pick(ctx.models.audio, 'whisper-large-v3') },
      { name: 'file', filename: 'a.wav', data: AUDIO, contentType: 'audio/wav' },
    ],
  },
  {
    name: 'v2 images.edits',
    method: 'POST',
    path: '/v2/images/edits',
    auth: 'api-key',
    body: 'multipart',
    errors: 'openai',
    form: (ctx) => [
      { name: 'model', value: pick(ctx.models.image, 'gpt-image-1') },
      { name: 'prompt', value: 'make it blue' },
      { name: 'image', filename: 'a.png', data: PNG, contentType: 'image/png' },
    ],
  },
  {
    name: 'v2 files.create',
    method: 'POST',
    path: '/v2/files',
    auth: 'api-key',
    body: 'multipart',
    errors: 'openai',
    form: () => [
      { name: 'purpose', value: 'fine-tune' },
      {
        name: 'file',
        filename: 'train.jsonl',
        data: Buffer.from('{"messages": []}\n'),
        contentType: 'application/jsonl',
      },
    ],
  },
  {
    name: 'v2 files.list',
    method: 'GET',
    path: '/v2/files',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { purpose: ['fine-tune'], limit: ['2'], after: ['file-x'] },
  },
  {
    name: 'v2 files.get',
    method: 'GET',
    path: '/v2/files/{id}',
    idKind: 'file',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v2 files.validate',
    method: 'GET',
    path: '/v2/files/validate/{id}',
    idKind: 'file',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v2 files.delete',
    method: 'DELETE',
    path: '/v2/files/{id}',
    idKind: 'file',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v2 fine_tuning.jobs.create',
    method: 'POST',
    path: '/v2/fine_tuning/jobs',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      training_file: pick(ctx.ids.file, 'file-x'),
      suffix: 'fuzz',
      hyperparameters: { n_epochs: 1 },
    }),
  },
  {
    name: 'v2 fine_tuning.jobs.list',
    method: 'GET',
    path: '/v2/fine_tuning/jobs',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { limit: ['2'], after: ['ftjob-x'] },
  },
  {
    name: 'v2 fine_tuning.jobs.get',
    method: 'GET',
    path: '/v2/fine_tuning/jobs/{id}',
    idKind: 'fine_tuning.job',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v2 fine_tuning.jobs.cancel',
    method: 'POST',
    path: '/v2/fine_tuning/jobs/{id}/cancel',
    idKind: 'fine_tuning.job',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  // Azure OpenAI's paths: the deployment in the path is the model (any configured one, of any kind).
  {
    name: 'v2 azure chat.completions',
    method: 'POST',
    path: '/v2/openai/deployments/{model}/chat/completions',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    query: { 'api-version': ['2024-10-21', '', '../x'] },
    template: () => ({
      model: '',
      messages: [{ role: 'user', content: 'Hello there.' }],
      max_tokens: 16,
      stream: false,
    }),
  },
  {
    name: 'v2 azure embeddings',
    method: 'POST',
    path: '/v2/openai/deployments/{model}/embeddings',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    query: { 'api-version': ['2024-10-21'] },
    template: () => ({ input: ['one', 'two'], encoding_format: 'float' }),
  },
  {
    name: 'v2 azure audio.transcriptions',
    method: 'POST',
    path: '/v2/openai/deployments/{model}/audio/transcriptions',
    auth: 'api-key',
    body: 'multipart',
    errors: 'openai',
    query: { 'api-version': ['2024-10-21'] },
    form: (ctx) => [
      { name: 'model', value: pick(ctx.models.audio, 'whisper-1') },
      { name: 'file', filename: 'a.wav', data: AUDIO, contentType: 'audio/wav' },
    ],
  },
  {
    name: 'v2 fine_tuning.jobs.events',
    method: 'GET',
    path: '/v2/fine_tuning/jobs/{id}/events',
    idKind: 'fine_tuning.job',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { limit: ['5'] },
  },
]

/** The /queue twins of the /v2 endpoints, drawn from the same templates. */
const QUEUED = [
  'v2 chat.completions',
  'v2 completions',
  'v2 embeddings',
  'v2 images.generations',
  'v2 audio.transcriptions',
  'v2 images.edits',
]

export const QUEUE_TARGETS: readonly FuzzTarget[] = [
  ...V2_TARGETS.filter((target) => QUEUED.includes(target.name)).map((target) => ({
    ...target,
    name: target.name.replace(/^v2/, 'queue'),
    path: target.path.replace(/^\/v2/, '/queue'),
  })),
  { name: 'queue models', method: 'GET', path: '/queue/models', auth: 'api-key', body: 'none', errors: 'openai' },
  {
    name: 'queue requests.list',
    method: 'GET',
    path: '/queue/requests',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { limit: ['2', '0', '101'], after: ['qr-x'], status: ['queued', 'completed', 'nope'] },
  },
  {
    name: 'queue requests.get',
    method: 'GET',
    path: '/queue/requests/{id}',
    idKind: 'queue.request',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'queue requests.cancel',
    method: 'DELETE',
    path: '/queue/requests/{id}',
    idKind: 'queue.request',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
]

export const V1_TARGETS: readonly FuzzTarget[] = [
  ...V2_TARGETS.filter((target) => target.name.startsWith('v2 files.')).map((target) => ({
    ...target,
    name: target.name.replace(/^v2/, 'v1'),
    path: target.path.replace(/^\/v2/, '/v1'),
  })),
  {
    name: 'v1 files.content',
    method: 'GET',
    path: '/v1/files/{id}/content',
    idKind: 'file',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v1 vector_stores.create',
    method: 'POST',
    path: '/v1/vector_stores',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      name: 'fuzz store',
      file_ids: [pick(ctx.ids.file, 'file-x')],
      metadata: { team: 'fuzz' },
      chunking_strategy: { type: 'auto' },
    }),
  },
  {
    name: 'v1 vector_stores.list',
    method: 'GET',
    path: '/v1/vector_stores',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { limit: ['2', '0'], order: ['asc', 'desc', 'up'], after: ['vs_x'] },
  },
  {
    name: 'v1 vector_stores.get',
    method: 'GET',
    path: '/v1/vector_stores/{id}',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'v1 vector_stores.update',
    method: 'POST',
    path: '/v1/vector_stores/{id}',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: () => ({ name: 'renamed', metadata: { a: 'b' }, expires_after: { anchor: 'last_active_at', days: 7 } }),
  },
  {
    name: 'v1 vector_stores.search',
    method: 'POST',
    path: '/v1/vector_stores/{id}/search',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: () => ({
      query: 'messages training',
      max_num_results: 3,
      ranking_options: { score_threshold: 0.1 },
      rewrite_query: false,
    }),
  },
  {
    name: 'v1 vector_stores.files.list',
    method: 'GET',
    path: '/v1/vector_stores/{id}/files',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: { filter: ['completed', 'failed', 'x'], limit: ['3'] },
  },
  {
    name: 'v1 vector_stores.files.create',
    method: 'POST',
    path: '/v1/vector_stores/{id}/files',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({ file_id: pick(ctx.ids.file, 'file-x'), attributes: { n: 1 } }),
  },
  {
    name: 'v1 vector_stores.file_batches.create',
    method: 'POST',
    path: '/v1/vector_stores/{id}/file_batches',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({ file_ids: [pick(ctx.ids.file, 'file-x')] }),
  },
  {
    name: 'v1 vector_stores.delete',
    method: 'DELETE',
    path: '/v1/vector_stores/{id}',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
]

const DATES = ['2025-01-01', '2030-12-31', 'yesterday', '2025-02-30', '']

/**
 * Another tenant's objects planted in every field of a body that can name one (the table of
 * src/inference/object-ids.ts): the fuzz key must never reach them, however the body is
 * mutated around them. ctx.ids['foreign.*'] belong to another owner.
 */
const foreign = (ctx: FuzzContext, kind: 'file' | 'vector_store' | 'response' | 'item'): string =>
  pick(ctx.ids[`foreign.${kind}`], `foreign-${kind}`)

export const FOREIGN_ID_TARGETS: readonly FuzzTarget[] = [
  {
    name: 'foreign responses tools',
    method: 'POST',
    path: '/v2/responses',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      input: 'Say something.',
      max_output_tokens: 8,
      tools: [
        { type: 'file_search', vector_store_ids: [foreign(ctx, 'vector_store')] },
        { type: 'code_interpreter', container: { type: 'auto', file_ids: [foreign(ctx, 'file')] } },
      ],
    }),
  },
  {
    name: 'foreign responses input',
    method: 'POST',
    path: '/v2/responses',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      max_output_tokens: 8,
      previous_response_id: foreign(ctx, 'response'),
      input: [
        { type: 'item_reference', id: foreign(ctx, 'item') },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'read this' },
            { type: 'input_file', file_id: foreign(ctx, 'file') },
            { type: 'input_image', file_id: foreign(ctx, 'file') },
          ],
        },
      ],
      prompt: { id: 'pmpt_fuzz', variables: { doc: { type: 'input_file', file_id: foreign(ctx, 'file') } } },
      conversation: { id: 'conv_fuzz' },
    }),
  },
  {
    name: 'foreign chat file part',
    method: 'POST',
    path: '/v2/chat/completions',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      max_tokens: 8,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'summarise' },
            { type: 'file', file: { file_id: foreign(ctx, 'file') } },
          ],
        },
      ],
    }),
  },
  {
    name: 'foreign queue chat file part',
    method: 'POST',
    path: '/queue/chat/completions',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      max_tokens: 8,
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: foreign(ctx, 'file') } }] }],
    }),
  },
  {
    name: 'foreign fine-tuning files',
    method: 'POST',
    path: '/v2/fine_tuning/jobs',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      model: chat(ctx),
      training_file: foreign(ctx, 'file'),
      validation_file: foreign(ctx, 'file'),
      suffix: 'fuzz',
    }),
  },
  {
    name: 'foreign vector store files',
    method: 'POST',
    path: '/v1/vector_stores',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({ name: 'fuzz', file_ids: [foreign(ctx, 'file')] }),
  },
  {
    name: 'foreign vector store attach',
    method: 'POST',
    path: '/v1/vector_stores/{id}/files',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({ file_id: foreign(ctx, 'file'), attributes: { file_id: 'an attribute, not a reference' } }),
  },
  {
    name: 'foreign vector store batch',
    method: 'POST',
    path: '/v1/vector_stores/{id}/file_batches',
    idKind: 'vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({ file_ids: [foreign(ctx, 'file')], files: [{ file_id: foreign(ctx, 'file') }] }),
  },
  {
    name: 'foreign search',
    method: 'POST',
    path: '/v1/vector_stores/{id}/search',
    idKind: 'foreign.vector_store',
    auth: 'api-key',
    body: 'json',
    errors: 'openai',
    template: () => ({ query: 'notes' }),
  },
  {
    name: 'foreign list cursor',
    method: 'GET',
    path: '/v1/files',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
    query: (ctx) => ({ after: [foreign(ctx, 'file')], limit: ['2'] }),
  },
  {
    name: 'foreign store read',
    method: 'GET',
    path: '/v1/vector_stores/{id}',
    idKind: 'foreign.vector_store',
    auth: 'api-key',
    body: 'none',
    errors: 'openai',
  },
]

export const ADMIN_TARGETS: readonly FuzzTarget[] = [
  {
    name: 'admin keys.create',
    method: 'POST',
    path: '/admin/keys',
    auth: 'admin',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      name: 'fuzz',
      owner: 'fuzz-team',
      tier: 'Basic',
      models: [chat(ctx)],
      endpoints: ['chat.completions'],
      expires_at: '2099-01-01T00:00:00Z',
      limits: { '*': { rpm: 10 }, [chat(ctx)]: { tpm: 1000, quota: 5000 } },
    }),
  },
  {
    name: 'admin keys.list',
    method: 'GET',
    path: '/admin/keys',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
    query: { owner: ['fuzz-team'], tier: ['Basic'], status: ['active', 'revoked', 'expired'] },
  },
  {
    name: 'admin keys.get',
    method: 'GET',
    path: '/admin/keys/{id}',
    idKind: 'key',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'admin keys.reservations',
    method: 'GET',
    path: '/admin/keys/{id}/reservations',
    idKind: 'key',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
    query: { model: ['fuzz-model'] },
  },
  {
    name: 'admin keys.update',
    method: 'PATCH',
    path: '/admin/keys/{id}',
    idKind: 'key',
    auth: 'admin',
    body: 'json',
    errors: 'openai',
    template: (ctx) => ({
      name: 'renamed',
      tier: 'Standard1000',
      models: null,
      endpoints: null,
      expires_at: null,
      limits: { [chat(ctx)]: { rpm: 5 } },
    }),
  },
  {
    name: 'admin keys.rotate',
    method: 'POST',
    path: '/admin/keys/{id}/rotate',
    idKind: 'key',
    auth: 'admin',
    body: 'optional-json',
    errors: 'openai',
    template: () => ({ grace_seconds: 60 }),
  },
  {
    name: 'admin keys.revoke',
    method: 'DELETE',
    path: '/admin/keys/{id}',
    idKind: 'key',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'admin keys.usage',
    method: 'GET',
    path: '/admin/keys/{id}/usage',
    idKind: 'key',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
    query: { from: DATES, to: DATES },
  },
  {
    name: 'admin usage',
    method: 'GET',
    path: '/admin/usage',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
    query: {
      group_by: ['key', 'owner', 'tier', 'model'],
      from: DATES,
      to: DATES,
      granularity: ['day', 'total'],
      owner: ['fuzz-team'],
      tier: ['Basic'],
      model: ['gpt-4o'],
    },
  },
  { name: 'admin tiers', method: 'GET', path: '/admin/tiers', auth: 'admin', body: 'none', errors: 'openai' },
  {
    name: 'admin users.create',
    method: 'POST',
    path: '/admin/users',
    auth: 'admin',
    body: 'json',
    errors: 'openai',
    template: () => ({
      username: 'fuzz-user',
      password: 'fuzz password',
      roles: ['user'],
      groups: ['g'],
      tenant: 'fuzz',
      disabled: false,
    }),
  },
  { name: 'admin users.list', method: 'GET', path: '/admin/users', auth: 'admin', body: 'none', errors: 'openai' },
  {
    name: 'admin users.get',
    method: 'GET',
    path: '/admin/users/{id}',
    idKind: 'user',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
  },
  {
    name: 'admin users.update',
    method: 'PATCH',
    path: '/admin/users/{id}',
    idKind: 'user',
    auth: 'admin',
    body: 'json',
    errors: 'openai',
    template: () => ({ roles: ['admin'], groups: [], tenant: 't2', disabled: true, password: 'another password' }),
  },
  {
    name: 'admin users.delete',
    method: 'DELETE',
    path: '/admin/users/{id}',
    idKind: 'user',
    auth: 'admin',
    body: 'none',
    errors: 'openai',
  },
]

export const PROBE_TARGETS: readonly FuzzTarget[] = [
  { name: 'healthz', method: 'GET', path: '/healthz', auth: 'none', body: 'none', errors: 'openai' },
  { name: 'readyz', method: 'GET', path: '/readyz', auth: 'none', body: 'none', errors: 'openai' },
]

/** The RAG gateway's login side: FastAPI-shaped errors. Logout is left out: it would end the run's session. */
export const RAG_AUTH_TARGETS: readonly FuzzTarget[] = [
  {
    name: 'rag auth.login',
    method: 'POST',
    path: '/api/v1/auth/user',
    auth: 'none',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ username: 'fuzz-rag', password: 'fuzz-rag password' }),
  },
  {
    name: 'rag auth.refresh',
    method: 'POST',
    path: '/api/v1/auth/refresh',
    auth: 'none',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ refresh_token: 'rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }),
  },
  { name: 'rag auth.me', method: 'GET', path: '/api/v1/auth/me', auth: 'session', body: 'none', errors: 'fastapi' },
  { name: 'rag jwks', method: 'GET', path: '/.well-known/jwks.json', auth: 'none', body: 'none', errors: 'fastapi' },
]

const RAG_FILE = Buffer.from('# Notes\nfuzzed upload\n')

/** The RAG services behind the gateway (the built-in mock), as the run's logged-in user. */
export const RAG_TARGETS: readonly FuzzTarget[] = [
  {
    name: 'rag sessions.list',
    method: 'GET',
    path: '/chat-session-manager/api/v1/sessions/',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
    query: { limit: ['5', '0', '-1', 'x'] },
  },
  {
    name: 'rag sessions.create',
    method: 'POST',
    path: '/chat-session-manager/api/v1/sessions/',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ title: 'fuzz session' }),
  },
  {
    name: 'rag sessions.feedback',
    method: 'POST',
    path: '/chat-session-manager/api/v1/sessions/fuzz-session/feedback',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ message_id: 'm1', rating: 'up', comment: 'fine' }),
  },
  {
    name: 'rag sessions.history',
    method: 'GET',
    path: '/chat-session-manager/api/v1/sessions/fuzz-session/history',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
    query: { limit: ['5', 'all'] },
  },
  {
    name: 'rag query',
    method: 'POST',
    path: '/query-pipelines/api/v1/query',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ query: 'What does the mock say?', session_id: 'fuzz-session', stream: false, top_k: 3 }),
  },
  {
    name: 'rag files.upload',
    method: 'POST',
    path: '/file-manager/api/v1/files/upload',
    auth: 'session',
    body: 'multipart',
    errors: 'fastapi',
    form: () => [{ name: 'files', filename: 'notes.md', data: RAG_FILE, contentType: 'text/markdown' }],
  },
  {
    name: 'rag files.list',
    method: 'GET',
    path: '/file-manager/api/v1/files/',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
  },
  {
    name: 'rag ingest',
    method: 'POST',
    path: '/ingest-master/api/v1/ingest',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ file_ids: ['file_fuzz', 'file_will_fail'] }),
  },
  {
    name: 'rag users',
    method: 'GET',
    path: '/user-manager/api/v1/users/',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
  },
  {
    name: 'rag configurations',
    method: 'GET',
    path: '/config-manager/api/v1/configurations/',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
  },
  {
    name: 'rag configurations.create (admin only)',
    method: 'POST',
    path: '/config-manager/api/v1/configurations/',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ name: 'fuzz', settings: { top_k: 3 } }),
  },
  {
    name: 'rag config.redoc (public)',
    method: 'GET',
    path: '/config-manager/redoc',
    auth: 'none',
    body: 'none',
    errors: 'fastapi',
  },
  // The routes of the provider's SmartChat guides (local-chat.mdx, global-chat.mdx; issue 27).
  {
    name: 'rag user configs',
    method: 'GET',
    path: '/config-manager/api/v1/user/configs',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
  },
  {
    name: 'rag files.create (documented)',
    method: 'POST',
    path: '/file-manager/api/v1/files/',
    auth: 'session',
    body: 'multipart',
    errors: 'fastapi',
    query: { kb: ['local', 'global', 'nope', ''] },
    form: () => [{ name: 'files', filename: 'notes.pdf', data: RAG_FILE, contentType: 'application/pdf' }],
  },
  {
    name: 'rag files.status',
    method: 'GET',
    path: '/file-manager/api/v1/files/',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
    query: { kb: ['local', 'x'], fileIds: ['file_fuzz', ''] },
  },
  {
    name: 'rag ingest task',
    method: 'POST',
    path: '/ingest-master/api/v1/task',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({
      filePath: 'mock://file-manager/local/file_fuzz/notes.pdf',
      role: 'user',
      metadata: {
        file_id: 'file_fuzz',
        user_id: 'u',
        file_name: 'notes.pdf',
        file_uri: 'mock://file-manager/local/file_fuzz/notes.pdf',
      },
    }),
  },
  {
    name: 'rag ingest tasks.file',
    method: 'POST',
    path: '/ingest-master/api/v1/tasks/file',
    auth: 'session',
    body: 'none',
    errors: 'fastapi',
    query: { file_path: ['mock://file-manager/local/file_fuzz/notes.pdf', ''], role: ['user', ''] },
  },
  {
    name: 'rag sessions.create (documented)',
    method: 'POST',
    path: '/chat-session-manager/api/v1/sessions/',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({
      title: 'fuzz',
      config: { localConfigId: 'default', globalContext: false, activeFiles: ['file_fuzz'], chatModel: 'mock-llm' },
    }),
  },
  {
    name: 'rag chat (documented)',
    method: 'POST',
    path: '/query-pipelines/api/v1/chat',
    auth: 'session',
    body: 'json',
    errors: 'fastapi',
    template: () => ({ sessionId: 'fuzz-session', userPrompt: 'Can you summarize the context?' }),
  },
]

// The key portal's usual values, and the edges of each: days that do not exist, ranges the
// wrong way round or longer than a usage query covers, page numbers out of range.
const PORTAL_DAYS = ['2026-01-01', '2099-12-31', '1970-01-01', '2025-02-30', '2025-13-01', 'today', '0000-00-00', '']
const PAGES = ['1', '2', '0', '-1', '99999999999999999999', '1e3', 'x', '']
const portalKey = (ctx: FuzzContext): readonly string[] => [
  ...(ctx.ids['portal.key'] ?? []),
  'key_000000000000000000000000',
  'nope',
  '',
]

/**
 * The key portal (/portal): pages for a signed-in user ('portal'), an admin ('portal-admin'),
 * and forms carrying the session's CSRF token. Sign-out has a session of its own
 * ('portal-leaving'): once it has succeeded, the rest of the run stays signed in.
 */
export const PORTAL_TARGETS: readonly FuzzTarget[] = [
  { name: 'portal home', method: 'GET', path: '/portal', auth: 'portal', body: 'none', errors: 'html', browser: true },
  {
    name: 'portal sign-in page',
    method: 'GET',
    path: '/portal/sign-in',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
  },
  {
    name: 'portal sign-in',
    method: 'POST',
    path: '/portal/sign-in',
    auth: 'none',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({
      username: ['fuzz-portal', ' fuzz-portal ', 'nobody', 'fuzz-victim-1'],
      password: ['fuzz-portal password', 'wrong password'],
    }),
  },
  {
    name: 'portal sign-out',
    method: 'POST',
    path: '/portal/sign-out',
    auth: 'portal-leaving',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({}),
  },
  {
    name: 'portal keys',
    method: 'GET',
    path: '/portal/keys',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
    query: { page: PAGES },
  },
  {
    name: 'portal keys.create',
    method: 'POST',
    path: '/portal/keys',
    auth: 'portal',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({
      name: ['fuzz key', '', '<b>key</b>'],
      expires: ['', '2099-12-31', '2000-01-01', '2025-02-30', '2099-12-31T00:00:00Z'],
    }),
  },
  {
    name: 'portal key',
    method: 'GET',
    path: '/portal/keys/{id}',
    idKind: 'portal.key',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
  },
  {
    name: 'portal key.secret',
    method: 'GET',
    path: '/portal/keys/{id}/secret',
    idKind: 'portal.key',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
  },
  {
    name: 'portal key.rotate',
    method: 'POST',
    path: '/portal/keys/{id}/rotate',
    idKind: 'portal.key',
    auth: 'portal',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({
      grace_preset: ['300', '0', '604800', 'custom'],
      grace_seconds: ['60', '0', '999999999', '-1', '1.5'],
    }),
  },
  {
    name: 'portal key.revoke',
    method: 'POST',
    path: '/portal/keys/{id}/revoke',
    idKind: 'portal.key.revocable',
    auth: 'portal',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({ confirm: ['yes', 'no', ''] }),
  },
  {
    name: 'portal usage',
    method: 'GET',
    path: '/portal/usage',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
    query: (ctx) => ({ key: portalKey(ctx), from: PORTAL_DAYS, to: PORTAL_DAYS }),
  },
  {
    name: 'portal usage.csv',
    method: 'GET',
    path: '/portal/usage.csv',
    auth: 'portal',
    body: 'none',
    errors: 'html',
    browser: true,
    query: (ctx) => ({ key: portalKey(ctx), from: PORTAL_DAYS, to: PORTAL_DAYS }),
  },
  {
    name: 'portal admin keys',
    method: 'GET',
    path: '/portal/admin/keys',
    auth: 'portal-admin',
    body: 'none',
    errors: 'html',
    browser: true,
    query: {
      owner: ['fuzz-portal', 'nobody', ''],
      tier: ['Basic', 'Fuzz', 'nope'],
      status: ['active', 'revoked', 'expired', 'nope'],
      page: PAGES,
    },
  },
  {
    name: 'portal admin key.tier',
    method: 'POST',
    path: '/portal/admin/keys/{id}/tier',
    idKind: 'portal.key',
    auth: 'portal-admin',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({ tier: ['Basic', 'Fuzz', 'nope', ''] }),
  },
  {
    name: 'portal admin users',
    method: 'GET',
    path: '/portal/admin/users',
    auth: 'portal-admin',
    body: 'none',
    errors: 'html',
    browser: true,
    query: { page: PAGES },
  },
  {
    name: 'portal admin users.create',
    method: 'POST',
    path: '/portal/admin/users',
    auth: 'portal-admin',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({
      username: ['fuzz-made', 'fuzz-portal', '-bad', ''],
      password: ['made password', 'short', ''],
      admin: ['', 'yes', 'no'],
    }),
  },
  {
    name: 'portal admin users.disable',
    method: 'POST',
    path: '/portal/admin/users/{id}/disable',
    idKind: 'user',
    auth: 'portal-admin',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({}),
  },
  {
    name: 'portal admin users.enable',
    method: 'POST',
    path: '/portal/admin/users/{id}/enable',
    idKind: 'user',
    auth: 'portal-admin',
    body: 'form',
    errors: 'html',
    browser: true,
    fields: () => ({}),
  },
  {
    name: 'portal asset',
    method: 'GET',
    path: '/portal/assets/{id}',
    idKind: 'portal.asset',
    auth: 'none',
    body: 'none',
    errors: 'html',
    browser: true,
    query: { v: ['1', ''] },
  },
]

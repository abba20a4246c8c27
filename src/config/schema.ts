// The whole configuration file, described once. A file that does not match is refused
// at boot with the path of the bad field; nothing is half-applied.
import { z } from 'zod'
import { HOST_PORT, type RedisTarget } from './redis-target.ts'
import { badRange } from '../webhooks/address-guard.ts'
import { isTimeZone, PERIODS } from '../budgets/period.ts'
import { guardrailsSchema } from '../guardrails/config.ts'

const port = z.number().int().min(0).max(65535)
const positiveInt = z.number().int().positive()
const nonNegativeInt = z.number().int().min(0)
/** An env var name: the config holds the name, never the secret. */
/** host:port of a Redis node or sentinel. */
const hostPort = z.string().regex(HOST_PORT, 'must be host:port')
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')

export const ENDPOINTS = [
  'models.list',
  'models.get',
  'chat.completions',
  'completions',
  'embeddings',
  'responses',
  'audio.transcriptions',
  'audio.translations',
  'audio.models',
  'images.generations',
  'images.edits',
  'fine_tuning.jobs.create',
  'fine_tuning.jobs.list',
  'fine_tuning.jobs.cancel',
  'fine_tuning.jobs.events',
  'files.create',
  'files.list',
  'files.content',
  'files.delete',
  'files.validate',
  // /v1: vector stores (a `.list` scope also reads one object, as files.list does).
  'vector_stores.create',
  'vector_stores.list',
  'vector_stores.update',
  'vector_stores.delete',
  'vector_stores.search',
  'vector_stores.files.create',
  'vector_stores.files.list',
  'vector_stores.files.update',
  'vector_stores.files.delete',
  'vector_stores.file_batches.create',
  'vector_stores.file_batches.list',
  'vector_stores.file_batches.cancel',
] as const
export type Endpoint = (typeof ENDPOINTS)[number]

const openaiBackend = z.strictObject({
  type: z.literal('openai'),
  /** Base URL including the API version path, e.g. http://127.0.0.1:8000/v1 */
  baseUrl: z.url({ protocol: /^https?$/ }),
  /** Name of the env var holding the upstream API key (optional: vLLM and Ollama need none). */
  apiKeyEnv: envName.optional(),
  connectTimeoutMs: positiveInt.default(5_000),
  /** Time allowed until the upstream sends response headers. */
  responseTimeoutMs: positiveInt.default(120_000),
  /** Time allowed between two chunks of a streamed response. */
  idleTimeoutMs: positiveInt.default(120_000),
  // Concurrent connections to one upstream; streams hold theirs for their whole length.
  maxSockets: positiveInt.default(1024),
  /** Extra headers sent upstream (e.g. api-version for Azure). Values are not secret. */
  headers: z.record(z.string(), z.string()).default({}),
})

/** Anthropic's Messages API (api.anthropic.com, or anything that speaks it). */
const anthropicBackend = z.strictObject({
  type: z.literal('anthropic'),
  /** Base URL including the API version path. */
  baseUrl: z.url({ protocol: /^https?$/ }).default('https://api.anthropic.com/v1'),
  /** Name of the env var holding the API key (sent as x-api-key). */
  apiKeyEnv: envName.optional(),
  /** The anthropic-version sent when the caller named none (an Anthropic SDK caller's own is passed on). */
  version: z.string().min(1).default('2023-06-01'),
  /** The Messages API requires max_tokens: sent when the call set no cap (the gateway's tier usually sets one). */
  defaultMaxTokens: positiveInt.default(4096),
  connectTimeoutMs: positiveInt.default(5_000),
  responseTimeoutMs: positiveInt.default(120_000),
  idleTimeoutMs: positiveInt.default(120_000),
  maxSockets: positiveInt.default(1024),
  /** Extra headers sent upstream. Values are not secret. */
  headers: z.record(z.string(), z.string()).default({}),
})

const mockBackend = z.strictObject({
  type: z.literal('mock'),
  /** Streaming pace of generated tokens. */
  tokensPerSecond: positiveInt.default(200),
  /** Most tokens of prose when the request sets no max_tokens (it ends on its last whole sentence within them). */
  defaultCompletionTokens: positiveInt.default(24),
  /** Fine-tuning jobs move queued → running → succeeded, one step per this interval. */
  fineTuneStepMs: positiveInt.default(500),
})

/** Google's Gemini API (generateContent), by API key or on Vertex AI (docs/backends.md). */
const geminiBackend = z
  .strictObject({
    type: z.literal('gemini'),
    /**
     * The API root with its version. Default: https://generativelanguage.googleapis.com/v1beta,
     * or with `vertex` https://{location}-aiplatform.googleapis.com/v1.
     */
    baseUrl: z.url({ protocol: /^https?$/ }).optional(),
    /** Name of the env var holding the Gemini API key (sent as x-goog-api-key). */
    apiKeyEnv: envName.optional(),
    /** Vertex AI instead of the Gemini API: the project's models, with a service account's access token. */
    vertex: z
      .strictObject({
        project: z.string().regex(/^[a-z][a-z0-9-]{4,61}[a-z0-9]$/, 'must be a Google Cloud project id'),
        location: z.string().regex(/^[a-z0-9-]{1,63}$/, 'must be a location such as us-central1 or global'),
        /** Name of the env var holding the service account's key (its JSON). */
        credentialsEnv: envName,
        /** The OAuth token endpoint; default the key's token_uri, else https://oauth2.googleapis.com/token. */
        tokenUrl: z.url({ protocol: /^https?$/ }).optional(),
      })
      .optional(),
    connectTimeoutMs: positiveInt.default(5_000),
    responseTimeoutMs: positiveInt.default(120_000),
    idleTimeoutMs: positiveInt.default(120_000),
    maxSockets: positiveInt.default(1024),
    /** Extra headers sent upstream. Values are not secret. */
    headers: z.record(z.string(), z.string()).default({}),
  })
  .refine((b) => b.vertex === undefined || b.apiKeyEnv === undefined, {
    message: 'a Vertex AI backend authenticates with its service account (vertex.credentialsEnv), not apiKeyEnv',
    path: ['apiKeyEnv'],
  })

/** Amazon Bedrock's Converse API, signed with SigV4 (docs/backends.md). The deployment's `model` is the model id. */
const bedrockBackend = z.strictObject({
  type: z.literal('bedrock'),
  /** The AWS region whose Bedrock Runtime serves the models (and the region requests are signed for). */
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, 'must be an AWS region such as us-east-1'),
  /** The Bedrock Runtime endpoint; default https://bedrock-runtime.{region}.amazonaws.com (a VPC endpoint, or a test's fake). */
  endpoint: z.url({ protocol: /^https?$/ }).optional(),
  /** Names of the env vars holding the credentials: AWS's standard ones unless told otherwise. */
  accessKeyIdEnv: envName.default('AWS_ACCESS_KEY_ID'),
  secretAccessKeyEnv: envName.default('AWS_SECRET_ACCESS_KEY'),
  /** Temporary credentials (an assumed role's) come with a session token; long-lived keys have none. */
  sessionTokenEnv: envName.default('AWS_SESSION_TOKEN'),
  connectTimeoutMs: positiveInt.default(5_000),
  responseTimeoutMs: positiveInt.default(120_000),
  idleTimeoutMs: positiveInt.default(120_000),
  maxSockets: positiveInt.default(1024),
  /** Extra headers sent upstream (signed with the rest). Values are not secret. */
  headers: z.record(z.string(), z.string()).default({}),
})

export const backendSchema = z.discriminatedUnion('type', [
  openaiBackend,
  anthropicBackend,
  mockBackend,
  geminiBackend,
  bedrockBackend,
])
export type BackendConfig = z.infer<typeof backendSchema>
export type OpenAIBackendConfig = z.infer<typeof openaiBackend>
export type MockBackendConfig = z.infer<typeof mockBackend>
export type GeminiBackendConfig = z.infer<typeof geminiBackend>
export type AnthropicBackendConfig = z.infer<typeof anthropicBackend>
export type BedrockBackendConfig = z.infer<typeof bedrockBackend>

export const MODEL_KINDS = ['chat', 'embedding', 'image', 'audio'] as const
export type ModelKind = (typeof MODEL_KINDS)[number]

const deployment = z.strictObject({
  backend: z.string().min(1),
  /** The name the upstream knows the model by; defaults to the public name. */
  model: z.string().min(1).optional(),
  weight: positiveInt.default(1),
  /**
   * What the upstream can take (issue #22): requests and tokens per minute (as the upstream
   * counts them: Azure counts prompt + max_tokens at arrival) and calls in flight at once.
   * Absent: no such limit, only what the upstream's own headers and refusals teach.
   */
  rpm: positiveInt.optional(),
  tpm: positiveInt.optional(),
  maxConcurrent: positiveInt.optional(),
  /**
   * What the upstream's reset header means (capacity/port.ts): 'fixed', the time until its
   * limit is whole again (OpenAI, Azure, Anthropic), so the whole limit is used at the reset;
   * 'sliding' (default), the time until some of it frees, so one call probes at the reset.
   */
  window: z.enum(['fixed', 'sliding']).optional(),
})

/** meta_data.model_type: the provider's names (LLM, EMBEDDING, STT in its docs; image generation its own). */
export const MODEL_TYPES = ['LLM', 'EMBEDDING', 'STT', 'IMAGE_GENERATION'] as const
export const MODALITIES = ['text', 'image', 'audio', 'video', 'embedding'] as const

/**
 * What GET /models shows of a model in `meta_data` (the provider's extra field), beside
 * what the plans' catalogue block says (display name, region). Field names are meta_data's
 * own. Unset fields are derived from the kind and the catalogue (src/inference/model-meta.ts).
 */
export const modelMetaSchema = z.strictObject({
  model_type: z.enum(MODEL_TYPES).optional(),
  source_type: z.enum(['OPEN SOURCE', 'PROPRIETARY']).optional(),
  /** Input + output tokens. */
  max_sequence_length: positiveInt.optional(),
  /** The embedding's dimension (embedding models); the mock's embeddings have it. */
  hidden_size: positiveInt.optional(),
  max_output_length: positiveInt.optional(),
  deployment_region: z.string().min(1).optional(),
  location: z.string().min(1).optional(),
  license: z.string().min(1).optional(),
  display_name: z.string().min(1).optional(),
  deployment_country: z.string().min(1).optional(),
  input_modalities: z.array(z.enum(MODALITIES)).min(1).optional(),
  output_modalities: z.array(z.enum(MODALITIES)).min(1).optional(),
  model_lifecycle_stage: z.enum(['Preview', 'Stable', 'Deprecated']).optional(),
  is_externally_hosted: z.boolean().optional(),
})
export type ModelMeta = z.infer<typeof modelMetaSchema>

const model = z.strictObject({
  name: z.string().min(1),
  kind: z.enum(MODEL_KINDS),
  ownedBy: z.string().default('tollgate'),
  /** The context window in tokens, if known: caps the prompt estimate a call is reserved at. */
  contextTokens: positiveInt.optional(),
  /** Facts about the model for meta_data on GET /models; all optional. */
  meta: modelMetaSchema.optional(),
  deployments: z.array(deployment).min(1),
})
export type ModelConfig = z.infer<typeof model>

/** Limits of one (tier, model). Unset means unlimited on that dimension. */
export const modelLimitsSchema = z.strictObject({
  rpm: positiveInt.optional(),
  tpm: positiveInt.optional(),
  input_tpm: positiveInt.optional(),
  output_tpm: positiveInt.optional(),
  /** Lifetime token quota (input + output) of one key on this model. */
  quota: positiveInt.optional(),
  /** Prices in currency units per million tokens. */
  input_price: z.number().min(0).optional(),
  output_price: z.number().min(0).optional(),
  /**
   * A prompt-cache read's and write's price as a multiple of input_price (0.1: a tenth of
   * it), to four decimals. Unset: what the model's provider publishes (keys/cache-prices.ts).
   */
  cache_read_multiplier: z.number().min(0).max(100).optional(),
  cache_write_multiplier: z.number().min(0).max(100).optional(),
})
export type ModelLimits = z.infer<typeof modelLimitsSchema>

/**
 * What one API key may keep stored on the gateway's side of a tier (docs/security.md, "Storage
 * caps"): the top-level `storageCaps` gives every tier's defaults, a tier's own entry
 * overrides any of them.
 */
const storageCapsFields = {
  /** Stored asynchronous requests (Prefer: respond-async) not yet finished: beyond, 429 queue_full. */
  queuedRequests: positiveInt,
  /** Bytes of their bodies (JSON as stored, plus multipart uploads). */
  queuedBytes: positiveInt,
  /** Files uploaded (/v1/files, /v2/files) and not deleted: beyond, 429 file_quota_exceeded. */
  files: positiveInt,
  /** Bytes of those files. */
  fileBytes: positiveInt,
}
export const storageCapsSchema = z.strictObject(storageCapsFields)
export type StorageCaps = z.infer<typeof storageCapsSchema>

/** An IANA time zone name Intl knows (Europe/Berlin, UTC). */
export const timeZoneSchema = z
  .string()
  .min(1)
  .max(64)
  .refine(isTimeZone, 'must be an IANA time zone such as UTC or Europe/Berlin')
/** Threshold percentages of a budget, ascending, each 1–1000. */
export const thresholdsSchema = z
  .array(z.number().int().min(1).max(1000))
  .max(10)
  .refine((a) => a.every((v, i) => i === 0 || v > (a[i - 1] ?? 0)), 'must be ascending, without repeats')

/**
 * A spend limit in the plans' currency over a period (docs/budgets.md): the same shape in
 * a tier (each key's default) and through the admin API (a key, an owner, a tenant).
 */
export const budgetSchema = z.strictObject({
  amount: z.number().min(0).max(1_000_000),
  period: z.enum(PERIODS),
  /** The zone whose calendar days, weeks and months count; default budgets.timeZone. */
  timeZone: timeZoneSchema.optional(),
  /** Percentages reported as they are crossed; default budgets.thresholds. */
  thresholds: thresholdsSchema.optional(),
})
export type BudgetConfig = z.infer<typeof budgetSchema>

/** What a tier does for a call that names no output cap (the tier's `outputCap`). */
export const OUTPUT_CAPS = ['send', 'ceiling'] as const
export type OutputCapMode = (typeof OUTPUT_CAPS)[number]

/** A call's priority class, as OpenAI's service_tier names it ('auto' is resolved to one of them). */
export const SERVICE_CLASSES = ['priority', 'default', 'flex'] as const
export type ServiceClass = (typeof SERVICE_CLASSES)[number]

/** A tier's priority classes (docs/limits.md, "Priority classes"). Every field has a default. */
export const serviceTiersSchema = z
  .strictObject({
    /** The classes its keys may ask for; default all three. Another is refused with 400. */
    allow: z.array(z.enum(SERVICE_CLASSES)).min(1).optional(),
    /** The class of a call that names none, or 'auto'; default 'default'. Must be allowed. */
    default: z.enum(SERVICE_CLASSES).optional(),
    /** Each class's price as a multiple of the plan's (four decimals); default flex 0.5, default 1, priority 2. */
    prices: z
      .strictObject({
        priority: z.number().min(0).max(100).optional(),
        default: z.number().min(0).max(100).optional(),
        flex: z.number().min(0).max(100).optional(),
      })
      .optional(),
    /** The share of each rate limit, and of each deployment's declared capacity, a flex call may fill; the rest is kept for default and priority. Default 0.8. */
    flexShare: z.number().gt(0).max(1).optional(),
  })
  .refine((t) => (t.allow ?? SERVICE_CLASSES).includes(t.default ?? 'default'), {
    message: 'the default class must be one the tier allows',
    path: ['default'],
  })
export type ServiceTiersConfig = z.infer<typeof serviceTiersSchema>
/** A tier's batches (OpenAI's Batch API, docs/batches.md). Every field has a default. */
export const tierBatchesSchema = z.strictObject({
  /** Requests one batch's input file may hold; default 50,000 (OpenAI's). */
  maxLines: z.number().int().positive().optional(),
  /** Bytes of a batch's input file; default 200 MB (OpenAI's). */
  maxFileBytes: z.number().int().positive().optional(),
  /** Batches one key may have not yet finished; default 20. */
  maxOpen: z.number().int().positive().optional(),
  /** A batch line's price as a multiple of the plan's (four decimals; 0.5 is the providers' usual discount); default 1. */
  priceMultiplier: z.number().min(0).max(100).optional(),
})
export type TierBatchesConfig = z.infer<typeof tierBatchesSchema>
/**
 * What a call that names no output cap reserves against the token-rate limits (tpm,
 * output_tpm; never a budget or the quota, which hold the worst case): `learned` reserves a
 * high quantile of what calls like it produced (key × model, else tier × model, else model,
 * each once it has minSamples decayed observations), `fixed` what outputCap says, as before.
 * docs/limits.md "Learned output reservations".
 */
export const outputReservationSchema = z
  .strictObject({
    /** Default learned (fixed keeps output_tpm a hard bound: docs/limits.md). */
    mode: z.enum(['learned', 'fixed']).optional(),
    /** The quantile of completion tokens per reply reserved; default 0.95. */
    quantile: z.number().gt(0).max(1).optional(),
    /** Least tokens per reply a learned reservation holds; default 16. */
    floor: z.number().int().min(0).optional(),
    /** Most tokens per reply a learned reservation holds (never more than outputCap's); default none. */
    ceiling: positiveInt.optional(),
    /** Decayed observations a sketch needs before it is used; default 100. */
    minSamples: z.number().min(1).optional(),
    /** How fast old observations fade: an observation this old weighs half; default 3600. */
    halfLifeSeconds: z
      .number()
      .min(1)
      .max(30 * 86_400)
      .optional(),
  })
  .refine(
    (r) => r.floor === undefined || r.ceiling === undefined || r.floor <= r.ceiling,
    'floor must not exceed ceiling',
  )
export type OutputReservationConfig = z.infer<typeof outputReservationSchema>
/** Who shares a cached reply (docs/cache.md): the key's tenant, its owner, or the key alone. */
export const CACHE_SCOPES = ['tenant', 'owner', 'key'] as const
const responseCacheRule = {
  /** Replies of this tier (model) are cached and served from the cache. */
  enabled: z.boolean(),
  /** How long a stored reply is served. */
  ttlSeconds: z
    .number()
    .int()
    .min(1)
    .max(30 * 86_400),
  /** Also cache calls that sample (temperature above 0, or unset for the endpoints whose default samples). */
  sampled: z.boolean(),
  /** The share of the reply's price charged for a hit (0: free). */
  chargeShare: z.number().min(0).max(1),
  scope: z.enum(CACHE_SCOPES),
  /** The semantic cache (docs/cache.md): a model's replaces the tier's whole; off when unset. */
  semantic: z
    .strictObject({
      /** Default true once `semantic` is set. */
      enabled: z.boolean().optional(),
      /** The embedding model (one of `models`, kind embedding) prompts are embedded with, through the gateway. */
      embeddingModel: z.string().min(1).optional(),
      /** Cosine similarity at or above which a stored reply answers (default 0.95). */
      threshold: z.number().gt(0).max(1).optional(),
    })
    .refine((s) => s.enabled === false || s.embeddingModel !== undefined, {
      message: 'a semantic cache names its embeddingModel',
      path: ['embeddingModel'],
    }),
}
/** A tier's response cache (docs/cache.md), with per-model overrides; off when unset. */
export const tierCacheSchema = z.strictObject({
  enabled: responseCacheRule.enabled.default(false),
  ttlSeconds: responseCacheRule.ttlSeconds.default(3600),
  sampled: responseCacheRule.sampled.default(false),
  chargeShare: responseCacheRule.chargeShare.default(0),
  scope: responseCacheRule.scope.default('owner'),
  semantic: responseCacheRule.semantic.optional(),
  models: z.record(z.string(), z.strictObject(responseCacheRule).partial()).default({}),
})
export type TierCacheConfig = z.infer<typeof tierCacheSchema>

const tier = z.strictObject({
  description: z.string().optional(),
  /** Every key of the tier spends at most this, unless a budget is set on the key itself. */
  budget: budgetSchema.optional(),
  /** This tier's own storage caps, over the top-level storageCaps. */
  storageCaps: z.strictObject(storageCapsFields).partial().optional(),
  /**
   * A call that names no output cap (max_tokens, max_completion_tokens, max_output_tokens):
   * `send` reserves defaultMaxTokens per reply (or the model's max_output_length when lower)
   * and sends that upstream as the call's cap; `ceiling` sends nothing and holds the model's
   * max_output_length per reply (a model without one is treated as `send`). Unset: `send`.
   * docs/limits.md.
   */
  outputCap: z.enum(OUTPUT_CAPS).optional(),
  /** Priority classes (OpenAI's service_tier) its keys may use, and what each costs (src/priority/classes.ts, docs/limits.md). */
  serviceTiers: serviceTiersSchema.optional(),
  /** What a call without an output cap reserves against the token-rate limits (outputReservationSchema). */
  outputReservation: outputReservationSchema.optional(),
  /** Its keys' weight in fair shares of contended capacity (src/fairness/, docs/limits.md "Fair shares"); default 1. */
  fairShare: z.strictObject({ weight: z.number().gt(0).max(1000).optional() }).optional(),
  /** The guardrail policy (config `guardrails.policies`) this tier's calls are checked under; unset: none (docs/guardrails.md). */
  guardrails: z.string().min(1).optional(),
  /** Applies to models the tier does not list. */
  default: modelLimitsSchema.default({}),
  models: z.record(z.string(), modelLimitsSchema).default({}),
  /** The response cache for this tier's keys (docs/cache.md). */
  cache: tierCacheSchema.optional(),
  /** Caps and price of this tier's batches (docs/batches.md). */
  batches: tierBatchesSchema.optional(),
})
export type TierConfig = z.infer<typeof tier>

/**
 * What the provider's catalogue export says about a model besides its limits, kept by
 * `tollgate plans import` so that GET /models can show it (meta_data). Field names are
 * those of meta_data.
 */
export const catalogueFactsSchema = z.strictObject({
  display_name: z.string().min(1).optional(),
  deployment_region: z.string().min(1).optional(),
  max_sequence_length: positiveInt.optional(),
  license: z.string().min(1).optional(),
})
export type CatalogueFacts = z.infer<typeof catalogueFactsSchema>

export const plansSchema = z
  .strictObject({
    defaultTier: z.string().min(1),
    /**
     * The ISO 4217 code of every price in this file (input_price, output_price) and so of
     * every cost metered from them. Optional: the provider's catalogue exports name none and
     * price in euros, so an unset currency is EUR (src/keys/money.ts, planCurrency).
     */
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR or USD')
      .optional(),
    tiers: z.record(z.string(), tier),
    /** The export this file was generated from, and its per-model facts. */
    catalogue: z
      .strictObject({
        source: z.string().min(1),
        models: z.record(z.string(), catalogueFactsSchema).default({}),
      })
      .optional(),
  })
  .refine((p) => p.defaultTier in p.tiers, { message: 'defaultTier must name one of the tiers', path: ['defaultTier'] })
export type PlansConfig = z.infer<typeof plansSchema>

/** The RAG gateway's services, by the path segment that names them (docs/rag-gateway.md). */
export const RAG_SERVICES = [
  'config-manager',
  'user-manager',
  'file-manager',
  'ingest-master',
  'chat-session-manager',
  'query-pipeline',
] as const
export type RagService = (typeof RAG_SERVICES)[number]
/** Other path segments that reach a service. */
export const RAG_SERVICE_ALIASES: Readonly<Record<string, RagService>> = { 'query-pipelines': 'query-pipeline' }

const ragMethod = z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const ragPath = z.string().regex(/^\/[^?#\\]*$/, 'must be a path starting with /')
const headerName = z.string().regex(/^[a-z0-9-]+$/, 'must be a lower-case header name')

const ragRule = z.strictObject({
  methods: z.array(ragMethod).min(1),
  /** Path prefix inside the service, matched at a segment boundary. */
  prefix: ragPath.default('/'),
  /** The caller needs at least one of these roles. */
  roles: z.array(z.string().min(1)).min(1),
})
export type RagRule = z.infer<typeof ragRule>

const ragService = z.strictObject({
  /** The service's base URL (the service path is stripped, the route appended), or `mock` for the built-in mock. */
  baseUrl: z.union([z.literal('mock'), z.url({ protocol: /^https?$/ })]).default('mock'),
  /** A connection not made within this: 502. */
  connectTimeoutMs: positiveInt.default(5_000),
  /** No response headers within this: 504. */
  responseTimeoutMs: positiveInt.default(60_000),
  /** A reply (a stream) that sends nothing for this long is cut. */
  idleTimeoutMs: positiveInt.default(300_000),
  /** Largest request body passed on (uploads stream through, counted as they go): 413 beyond it. */
  maxBodyBytes: positiveInt.default(512 * 1024 * 1024),
  /** Who may use which methods and path prefixes; every rule matching a request must be met. */
  rules: z.array(ragRule).default([]),
  /** Routes anyone may call without a token. */
  publicRoutes: z.array(z.strictObject({ method: ragMethod, path: ragPath })).default([
    { method: 'GET', path: '/redoc' },
    { method: 'GET', path: '/openapi.json' },
    { method: 'GET', path: '/docs' },
  ]),
})
export type RagServiceConfig = z.infer<typeof ragService>

const ragRpm = z.strictObject({ userRpm: nonNegativeInt.optional(), tenantRpm: nonNegativeInt.optional() })

const ragSchema = z.strictObject({
  services: z
    .strictObject({
      'config-manager': ragService.prefault({
        rules: [{ methods: ['POST', 'PUT', 'PATCH', 'DELETE'], roles: ['admin'] }],
      }),
      'user-manager': ragService.prefault({}),
      'file-manager': ragService.prefault({}),
      'ingest-master': ragService.prefault({}),
      'chat-session-manager': ragService.prefault({}),
      'query-pipeline': ragService.prefault({}),
    })
    .prefault({}),
  /** Headers the gateway sets for the backends (and strips when a client sends them). */
  identityHeaders: z
    .strictObject({
      userId: headerName.default('x-tollgate-user-id'),
      username: headerName.default('x-tollgate-user-name'),
      roles: headerName.default('x-tollgate-user-roles'),
      groups: headerName.default('x-tollgate-user-groups'),
      tenant: headerName.default('x-tollgate-tenant'),
    })
    .prefault({}),
  /** More client headers never passed on (as is any x-tollgate-* or x-forwarded-* one; matched without case, `_` as `-`). */
  stripHeaders: z
    .array(headerName)
    .default([
      'x-forwarded-user',
      'x-forwarded-email',
      'x-forwarded-groups',
      'x-forwarded-preferred-username',
      'x-remote-user',
      'remote-user',
      'x-user',
      'x-user-id',
      'x-auth-request-user',
      'x-auth-request-email',
      'x-auth-request-groups',
      'x-auth-request-access-token',
      'x-userinfo',
      'x-id-token',
    ]),
  /** Send the verified access token on as Authorization: Bearer. */
  forwardToken: z.boolean().default(false),
  /** Pass the client's cookies on (off: a refresh token may travel in one). */
  forwardCookies: z.boolean().default(false),
  /** Requests per minute per user and per tenant (limits.windowMs long); per-tenant overrides below. */
  limits: z
    .strictObject({
      /** 0: no limit per user. */
      userRpm: nonNegativeInt.default(600),
      /** 0: no limit per tenant. */
      tenantRpm: nonNegativeInt.default(6000),
      /** Calls to public routes (no token: redoc, openapi.json, docs) per client address; 0: no limit. */
      publicRpm: nonNegativeInt.default(300),
      /** Per tenant: other figures for its users and for the tenant as a whole. */
      tenants: z.record(z.string(), ragRpm).default({}),
    })
    .prefault({}),
  /** The built-in mock backend (baseUrl: mock). */
  mock: z
    .strictObject({
      /** Pause between streamed answer tokens. */
      tokenDelayMs: nonNegativeInt.default(20),
      /** Time between the states of an upload and of an ingestion task; 0: the final state at once. */
      statusStepMs: nonNegativeInt.default(250),
    })
    .prefault({}),
})
export type RagConfig = z.infer<typeof ragSchema>

/** A claim of an external issuer's token, by name or dotted path (`realm_access.roles`). */
const claimPath = z.string().regex(/^[\w:/.-]{1,200}$/, 'a claim name or a dotted path')

const oidcSchema = z.strictObject({
  /** The issuer's `iss`, exactly (Keycloak: https://host/realms/<realm>). */
  issuer: z.string().min(1),
  /** The `aud` its tokens must carry for this gateway. */
  audience: z.string().min(1),
  jwksUrl: z.url({ protocol: /^https?$/ }),
  algorithms: z
    .array(z.enum(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']))
    .min(1)
    .default(['RS256', 'ES256', 'EdDSA']),
  /** Least time between two fetches of the key set (a token with an unknown kid refetches it). */
  jwksCooldownMs: nonNegativeInt.default(30_000),
  /** A fetched key set is kept at most this long. */
  jwksCacheMaxAgeMs: positiveInt.default(600_000),
  claims: z
    .strictObject({
      userId: claimPath.default('sub'),
      username: claimPath.default('preferred_username'),
      roles: claimPath.default('roles'),
      groups: claimPath.default('groups'),
      tenant: claimPath.default('tenant'),
    })
    .prefault({}),
  /** Tenant of a token without the tenant claim. */
  defaultTenant: z.string().min(1).default('default'),
})

const ragAuthSchema = z
  .strictObject({
    /** `iss` of the gateway's own access tokens. */
    issuer: z.string().min(1).default('tollgate'),
    /** `aud` of the gateway's own access tokens. */
    audience: z.string().min(1).default('tollgate-rag'),
    accessTokenTtlSeconds: positiveInt.max(86_400).default(900),
    /** A session (and its chain of refresh tokens) ends this long after the login. */
    refreshTokenTtlSeconds: positiveInt.default(7 * 86_400),
    /**
     * A refresh token used again this soon after its first use (and before its successor is
     * used) gets the same new pair: two tabs refreshing at once. Later, a reuse is a theft and
     * ends the session. 0: every reuse is a theft. Short on purpose: within it, a stolen copy
     * is not told from the real one.
     */
    refreshReuseSeconds: nonNegativeInt.max(60).default(5),
    /** A new signing key this often; the previous ones are published until their tokens have expired. */
    signingKeyRotationSeconds: positiveInt.default(86_400),
    /**
     * How long an instance trusts what it read about a session or user: a logout, a disabled
     * or deleted user on another instance is refused by this one within it.
     */
    revocationCacheMs: nonNegativeInt.max(1000).default(500),
    /**
     * Failed logins, RAG and portal alike (rate-limiter-flexible; in Redis when the store is):
     * an address is refused, a username only slowed, so nobody can lock another user out
     * (src/jwt/login-throttle.ts).
     */
    loginThrottle: z
      .strictObject({
        /** Failures on one username from one address; past it that address is refused (429) for that username. */
        maxFailuresPerUserAddress: positiveInt.default(5),
        /** Failures from one address on any usernames; past it the address is refused (429). */
        maxFailuresPerAddress: positiveInt.default(20),
        /** Failures on one username from anywhere; past it each attempt on it waits (never refused). */
        maxFailuresPerUsername: positiveInt.default(5),
        /** The first wait past maxFailuresPerUsername, doubling with each further failure; 0: no slowdown. */
        slowdownMs: nonNegativeInt.max(60_000).default(250),
        maxSlowdownMs: nonNegativeInt.max(60_000).default(3000),
        windowSeconds: positiveInt.default(900),
        blockSeconds: positiveInt.default(900),
      })
      .prefault({}),
    /** Also accept access tokens of an external OpenID Connect issuer (Keycloak, Entra ID, ...). */
    oidc: oidcSchema.optional(),
  })
  .superRefine((auth, ctx) => {
    // A token is sent to one verifier or the other by its `iss`: the two must differ.
    if (auth.oidc !== undefined && auth.oidc.issuer === auth.issuer) {
      ctx.addIssue({
        code: 'custom',
        message: "must differ from ragAuth.issuer (the gateway's own tokens)",
        path: ['oidc', 'issuer'],
      })
    }
  })

/** Events and the webhooks that deliver them (docs/webhooks.md). */
const webhooksSchema = z
  .strictObject({
    /** Deliveries this instance sends at once; 0: it stores events and leaves sending to other instances. */
    concurrency: nonNegativeInt.max(1000).default(8),
    /** Connecting to an endpoint, at most. */
    connectTimeoutMs: positiveInt.default(5000),
    /** One attempt, connect to the end of the answer, at most. */
    timeoutMs: positiveInt.default(15_000),
    /** Bytes of an endpoint's answer read at most (only its status counts). */
    maxResponseBytes: positiveInt.default(64 * 1024),
    /** Retries: baseDelayMs after the first failure, doubling, at most maxDelayMs apart, maxAttempts in all. */
    retry: z
      .strictObject({
        baseDelayMs: positiveInt.default(5000),
        maxDelayMs: positiveInt.default(4 * 3_600_000),
        maxAttempts: positiveInt.max(100).default(14),
      })
      .prefault({}),
    /**
     * Addresses or CIDR ranges a webhook may reach although they are loopback, private,
     * link-local, multicast or otherwise refused (e.g. ["10.1.2.0/24"] for a receiver
     * on the private network). Empty: only public addresses.
     */
    allowAddresses: z.array(z.string().min(1)).default([]),
    /** key.expiring is said once this many days before a key's expiry. */
    keyExpiringWithinDays: positiveInt.max(365).default(7),
    /** How often keys are looked at for key.expiring and key.expired. */
    expiryScanIntervalMs: positiveInt.default(60_000),
    /** How often pending deliveries are looked for (after a restart, or another instance's death). */
    sweepIntervalMs: positiveInt.default(10_000),
    /** Events and finished deliveries are kept this long (the delivery history). */
    retentionDays: positiveInt.max(3650).default(30),
  })
  .refine((w) => w.keyExpiringWithinDays < w.retentionDays, {
    message: 'keyExpiringWithinDays must be less than retentionDays (an expiring event must outlive its window)',
    path: ['keyExpiringWithinDays'],
  })
  .refine((w) => badRange(w.allowAddresses) === null, {
    message: 'allowAddresses: each entry must be an IP address or a CIDR range',
    path: ['allowAddresses'],
  })

/** The key portal in a browser (/portal): its sessions and pages. */
const portalSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** A session not used for this long ends. */
  sessionIdleSeconds: positiveInt.default(1800),
  /** A session ends this long after sign-in, however busy. */
  sessionAbsoluteSeconds: positiveInt.default(43_200),
  /**
   * The cookie's Secure flag: auto sets it when the request came over TLS (or, with
   * server.trustProxyHops > 0, X-Forwarded-Proto says https); always/never force it.
   */
  secureCookie: z.enum(['auto', 'always', 'never']).default('auto'),
  /** Rows per page of the key and user lists. */
  pageSize: positiveInt.max(500).default(50),
})

export const configSchema = z
  .strictObject({
    server: z
      .strictObject({
        /** Loopback by default: the admin API must not face the network by accident. HOST overrides it (0.0.0.0 in containers). */
        host: z.string().min(1).default('127.0.0.1'),
        port: port.default(8080),
        /** The metrics listener's own interface; METRICS_HOST overrides it. */
        metricsHost: z.string().min(1).default('127.0.0.1'),
        metricsPort: port.default(9464),
        /** Largest JSON body accepted. */
        jsonBodyLimitBytes: positiveInt.default(4 * 1024 * 1024),
        /** Largest multipart upload accepted (audio, image edits, files). */
        uploadLimitBytes: positiveInt.default(100 * 1024 * 1024),
        /** Largest upstream JSON response read to take its usage. */
        upstreamJsonLimitBytes: positiveInt.default(64 * 1024 * 1024),
        /** How long SIGTERM waits for in-flight requests before closing them. */
        shutdownGraceMs: nonNegativeInt.default(30_000),
        /** Accept a client's x-request-id (when well-formed) instead of generating one. */
        trustRequestId: z.boolean().default(true),
        /** The request line and headers must have arrived within this (slowloris). */
        headersTimeoutMs: positiveInt.default(30_000),
        /**
         * A request body the gateway is reading must bring at least this many bytes a second,
         * averaged over each bodyRateWindowMs, or it is cut with 408. There is no total time:
         * a large upload at a steady pace takes as long as it needs.
         */
        bodyMinBytesPerSecond: nonNegativeInt.default(1024),
        bodyRateWindowMs: positiveInt.default(30_000),
        /** A streamed reply whose client has taken nothing for this long is ended (nginx's send_timeout). */
        idleReaderTimeoutMs: positiveInt.default(60_000),
        /** Open connections per client address (an IPv6 address counts by its /64); 0 is no cap. */
        maxConnectionsPerAddress: nonNegativeInt.default(1000),
        /** Proxies in front that append to X-Forwarded-For; 0 means the peer address is the client's. */
        trustProxyHops: nonNegativeInt.max(10).default(0),
        /**
         * With --expose-gc (npm start, the Dockerfile): once no request has been in flight for
         * quietMs, one compacting collection hands back the memory a burst grew, if the resident
         * memory grew by minGrowthBytes since the last. quietMs 0 turns it off.
         */
        heapCompaction: z
          .strictObject({
            quietMs: nonNegativeInt.default(10_000),
            minGrowthBytes: positiveInt.default(32 * 1024 * 1024),
          })
          .prefault({}),
      })
      .prefault({}),
    /** Failed authentication (API key or admin token), counted per client address. */
    auth: z
      .strictObject({
        /** Failures allowed per address in a window; past it the address is refused with 429. 0 turns it off. */
        maxFailures: nonNegativeInt.default(30),
        windowSeconds: positiveInt.default(60),
        /** How long an address over the limit is refused, without any key lookup. */
        blockSeconds: positiveInt.default(60),
      })
      .prefault({}),
    /** RAG gateway logins and access tokens (docs/rag-gateway.md, "RAG gateway: accounts and tokens"). */
    ragAuth: ragAuthSchema.prefault({}),
    /** The key portal (docs/portal.md). */
    portal: portalSchema.prefault({}),
    /** The audit log of changes (docs/audit.md). */
    audit: z
      .strictObject({
        /** Records older than this are removed by the sweep. */
        retentionDays: positiveInt.default(365),
        /** How often the sweep runs (and once at start). */
        sweepIntervalSeconds: positiveInt.default(3600),
      })
      .prefault({}),
    store: z
      .strictObject({
        /**
         * One Redis server: a redis:// or rediss:// URL. At most one of redisUrl, redisCluster
         * and redisSentinel; none means the embedded single-instance store.
         */
        redisUrl: z
          .string()
          .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
          .optional(),
        /** A Redis Cluster: some of its nodes (the client learns the rest). REDIS_CLUSTER_NODES. */
        redisCluster: z
          .strictObject({
            nodes: z.array(hostPort).min(1),
            tls: z.boolean().default(false),
          })
          .optional(),
        /** A master watched by Sentinel: the sentinels and the master's name. REDIS_SENTINELS, REDIS_SENTINEL_NAME. */
        redisSentinel: z
          .strictObject({
            sentinels: z.array(hostPort).min(1),
            masterName: z.string().min(1),
            /** TLS to the master and replicas. */
            tls: z.boolean().default(false),
            /** TLS to the sentinels. */
            sentinelTls: z.boolean().default(false),
          })
          .optional(),
        /** Prefix of every Redis key this gateway writes. */
        keyPrefix: z.string().default('tollgate:'),
        /** Where the embedded store keeps its data between restarts. */
        dataDir: z.string().default('./data'),
        commandTimeoutMs: positiveInt.default(500),
        /**
         * A running stream's delivered tokens are written to the store at most this often, so
         * a gateway that dies mid-stream still charges them (docs/usage.md).
         */
        streamCheckpointMs: positiveInt.default(1000),
      })
      .refine((s) => [s.redisUrl, s.redisCluster, s.redisSentinel].filter((x) => x !== undefined).length <= 1, {
        message: 'set at most one of redisUrl, redisCluster and redisSentinel',
      })
      .prefault({}),
    limits: z
      .strictObject({
        /** While Redis is unreachable: enforce per instance in memory, admit everything, or refuse (503). */
        onRedisDown: z.enum(['insurance', 'fail-open', 'fail-closed']).default('insurance'),
        /** A (single) Redis for the rate-limit counters, if not the store's Redis. */
        redisUrl: z
          .string()
          .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
          .optional(),
        /** Longest wait for Redis on the admission path; past it the request is decided as onRedisDown says. */
        redisTimeoutMs: positiveInt.default(200),
        /** How often to look for Redis again during an outage. */
        probeIntervalMs: positiveInt.default(1000),
        /** Length of the fixed rate-limit window. rpm and tpm are per minute: change it only for tests and demos. */
        windowMs: positiveInt.default(60_000),
        /** Instances behind the load balancer: during an outage each enforces 1/n of the windowed limits. */
        insuranceInstances: positiveInt.default(1),
      })
      .prefault({}),
    /** The /queue endpoints: wait for capacity instead of a 429 (docs/queue.md). */
    queue: z
      .strictObject({
        /** Drop-in mode: the longest a call waits in line before it is answered queue_timeout. */
        maxWaitMs: positiveInt.default(600_000),
        /**
         * Drop-in mode: `predict` answers 429 queue_deadline at once when a call's predicted wait
         * is beyond its deadline (x-tollgate-max-wait-ms, within maxWaitMs); `wait` lets it wait
         * until queue_timeout, as before deadlines (src/queue/deadline.ts, docs/queue.md).
         */
        deadlines: z.enum(['predict', 'wait']).default('predict'),
        /** Asynchronous results are kept this long; then the request reads as expired. */
        resultTtlSeconds: positiveInt.default(86_400),
        /** Largest body of an asynchronous request, kept in Redis or on disk until it runs. */
        maxBodyBytes: positiveInt.default(25 * 1024 * 1024),
        /** Largest reply kept as an asynchronous result; a larger one fails the request. */
        maxResultBytes: positiveInt.default(32 * 1024 * 1024),
        /** Asynchronous requests this instance runs at once; 0: it accepts them and leaves running them to others. */
        concurrency: nonNegativeInt.default(64),
        /** Times an upstream 429 or 5xx is put back in line (with backoff) before it is answered. */
        upstreamRetries: nonNegativeInt.default(3),
        /** Backoff after the first upstream 429/5xx; it doubles with each retry. */
        retryBackoffMs: positiveInt.default(1000),
        /** Optional priority by tier when workers are busy: lower runs first; unlisted tiers after every listed one. */
        tierPriority: z.record(z.string(), z.number().int().min(1).max(1000)).default({}),
        /** How often lines are checked for calls of gateways that stopped and for heads nobody scheduled. */
        sweepIntervalMs: positiveInt.default(10_000),
        /**
         * A request whose gateway died while running it (SIGKILL, power loss) runs again on
         * another instance within about this long (BullMQ's job lock, renewed at half of it
         * while the request runs; for a request leased to the gateway that accepted it, that
         * gateway's heartbeat, which lasts half of it). An event loop stalled for longer would
         * run it twice.
         */
        recoverAfterMs: z.number().int().min(1000).default(30_000),
        /**
         * With Redis: the shards the stored queue is split into, each on a hash tag of its
         * own (a cluster spreads them over its masters). Default: 8 on a cluster, else 1.
         * Lowering it strands the requests queued on the shards dropped (docs/queue.md).
         */
        shards: z.number().int().min(1).max(256).optional(),
        /**
         * Fair shares between parties in the capacity line (src/fairness/, docs/limits.md
         * "Fair shares"); false: no counters are charged and the line is first come first served.
         */
        fairShares: z.boolean().default(true),
        /** /v2: the share of a contended deployment's declared capacity kept for parties below their fair share (src/fairness/capacity-share.ts); 0: none, /v2 first come first served. */
        fairShareReserve: z.number().min(0).max(0.9).default(0.1),
      })
      .prefault({}),
    /** Events and their webhooks (docs/webhooks.md). */
    webhooks: webhooksSchema.prefault({}),
    /** What one API key may keep stored, unless its tier says otherwise (plans: `storageCaps`). */
    storageCaps: z
      .strictObject({
        queuedRequests: positiveInt.default(1000),
        queuedBytes: positiveInt.default(64 * 1024 * 1024),
        files: positiveInt.default(1000),
        fileBytes: positiveInt.default(1024 * 1024 * 1024),
      })
      .prefault({}),
    /** Spend limits (docs/budgets.md): what a budget that names none uses. */
    budgets: z
      .strictObject({
        timeZone: timeZoneSchema.default('UTC'),
        thresholds: thresholdsSchema.default([50, 80, 100]),
        /** How often each instance reads the budgets set through the admin API again (another instance's change). */
        refreshMs: z.number().int().min(100).max(60_000).default(1000),
      })
      .prefault({}),
    logging: z
      .strictObject({
        level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      })
      .prefault({}),
    /**
     * OpenTelemetry traces (docs/operating.md): off by default, and then the SDK is not even
     * loaded. Where they go, the sampling and the service name come from the standard
     * OTEL_* variables, which the SDK reads.
     */
    tracing: z
      .strictObject({
        enabled: z.boolean().default(false),
        /** Prompts and completions (gen_ai.input/output.messages) go in the call's span; off: no content ever does. */
        captureContent: z.boolean().default(false),
      })
      .prefault({}),
    /** The RAG gateway: /<service>/<route> to the seven services (docs/rag-gateway.md). */
    rag: ragSchema.prefault({}),
    backends: z.record(z.string(), backendSchema),
    models: z.array(model).min(1),
    /** Backend that serves files, fine-tuning jobs and vector stores (endpoints without a model). */
    resourceBackend: z.string().min(1),
    /** Tokens reserved for the completion when a request sets no max_tokens. */
    defaultMaxTokens: positiveInt.default(1024),
    /**
     * Base models a fine-tuning job may name besides the chat models served: the resource
     * backend trains them, nothing serves them for inference (the provider's fine-tuning guide).
     */
    fineTuning: z
      .strictObject({
        baseModels: z.array(z.string().min(1).max(256)).default([]),
      })
      .prefault({}),
    /** Checks on what calls send: policies of detectors, patterns and deny-lists (docs/guardrails.md). */
    guardrails: guardrailsSchema.prefault({}),
    /** Path of the plans file, relative to this file; or the plans inline. */
    plans: z.union([z.string().min(1), plansSchema]),
    /** Where the response cache keeps replies, and how much (docs/cache.md); what is cached is a tier's `cache`. */
    responseCache: z
      .strictObject({
        /** The embedded store's bound on all cached replies (least recently used go first). */
        maxBytes: positiveInt.default(64 * 1024 * 1024),
        /** The bound per scope (tenant, owner or key), on either store. */
        scopeMaxBytes: positiveInt.default(8 * 1024 * 1024),
        /** A reply larger than this is not cached. */
        maxEntryBytes: positiveInt.default(1024 * 1024),
        /** The semantic cache's vectors (docs/cache.md): per scope at most scopeMaxVectors and scopeMaxBytes; all of them (embedded), or those an instance keeps opened (Redis), maxBytes. */
        semantic: z
          .strictObject({
            scopeMaxVectors: positiveInt.max(100_000).default(2000),
            scopeMaxBytes: positiveInt.default(16 * 1024 * 1024),
            maxBytes: positiveInt.default(64 * 1024 * 1024),
          })
          .prefault({}),
      })
      .prefault({}),
  })
  .superRefine((cfg, ctx) => {
    const seen = new Set<string>()
    cfg.models.forEach((m, i) => {
      if (seen.has(m.name))
        ctx.addIssue({ code: 'custom', message: `duplicate model name "${m.name}"`, path: ['models', i, 'name'] })
      seen.add(m.name)
      m.deployments.forEach((d, j) => {
        if (!(d.backend in cfg.backends)) {
          ctx.addIssue({
            code: 'custom',
            message: `unknown backend "${d.backend}"`,
            path: ['models', i, 'deployments', j, 'backend'],
          })
        }
      })
    })
    if (!(cfg.resourceBackend in cfg.backends)) {
      ctx.addIssue({ code: 'custom', message: `unknown backend "${cfg.resourceBackend}"`, path: ['resourceBackend'] })
    }
  })

export type RawConfig = z.infer<typeof configSchema>

/** The configuration after loading: plans resolved, secrets from the environment. */
export interface Config extends Omit<RawConfig, 'plans'> {
  readonly plans: PlansConfig
  /** The shared store's Redis (store.redisUrl, redisCluster or redisSentinel); undefined: embedded. */
  readonly redis: RedisTarget | undefined
  readonly secrets: Secrets
  /** Where the file came from, for messages. */
  readonly source: string
}

export interface Secrets {
  /** TOLLGATE_ADMIN_TOKEN, if set. */
  readonly adminToken: string | undefined
  /** TOLLGATE_KEY_SECRET: the HMAC secret for API key hashes, if set. */
  readonly keyHashSecret: string | undefined
  /** Seals the RAG gateway's JWT signing keys in the store (TOLLGATE_JWT_SECRET); else the key-hash secret does. */
  readonly jwtSecret: string | undefined
  /** Upstream API keys by env var name, read once at boot. */
  readonly backendKeys: Readonly<Record<string, string>>
  /**
   * The secrets above that are shorter than MIN_SECRET_LENGTH and were let through only
   * because TOLLGATE_ALLOW_WEAK_SECRETS is set (their env var names): warned at start.
   */
  readonly weak: readonly string[]
  /** Signing secrets of guardrail webhook checks by env var name (`secretEnv`), read with the file. */
  readonly guardrailSecrets?: Readonly<Record<string, string>>
}

/** The shortest TOLLGATE_ADMIN_TOKEN, TOLLGATE_KEY_SECRET or TOLLGATE_JWT_SECRET accepted (characters). */
export const MIN_SECRET_LENGTH = 32

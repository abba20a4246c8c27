// The whole configuration file, described once. A file that does not match is refused
// at boot with the path of the bad field; nothing is half-applied.
import { z } from 'zod'

const port = z.number().int().min(0).max(65535)
const positiveInt = z.number().int().positive()
const nonNegativeInt = z.number().int().min(0)
/** An env var name: the config holds the name, never the secret. */
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')

export const ENDPOINTS = [
  'models.list', 'models.get',
  'chat.completions', 'completions', 'embeddings', 'responses',
  'audio.transcriptions', 'audio.translations', 'audio.models',
  'images.generations', 'images.edits',
  'fine_tuning.jobs.create', 'fine_tuning.jobs.list', 'fine_tuning.jobs.cancel', 'fine_tuning.jobs.events',
  'files.create', 'files.list', 'files.delete',
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

const mockBackend = z.strictObject({
  type: z.literal('mock'),
  /** Streaming pace of generated tokens. */
  tokensPerSecond: positiveInt.default(200),
  /** Completion length when the request sets no max_tokens. */
  defaultCompletionTokens: positiveInt.default(24),
  /** Fine-tuning jobs move queued → running → succeeded, one step per this interval. */
  fineTuneStepMs: positiveInt.default(500),
})

export const backendSchema = z.discriminatedUnion('type', [openaiBackend, mockBackend])
export type BackendConfig = z.infer<typeof backendSchema>
export type OpenAIBackendConfig = z.infer<typeof openaiBackend>
export type MockBackendConfig = z.infer<typeof mockBackend>

export const MODEL_KINDS = ['chat', 'embedding', 'image', 'audio'] as const
export type ModelKind = (typeof MODEL_KINDS)[number]

const deployment = z.strictObject({
  backend: z.string().min(1),
  /** The name the upstream knows the model by; defaults to the public name. */
  model: z.string().min(1).optional(),
  weight: positiveInt.default(1),
})

const model = z.strictObject({
  name: z.string().min(1),
  kind: z.enum(MODEL_KINDS),
  ownedBy: z.string().default('tollgate'),
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
})
export type ModelLimits = z.infer<typeof modelLimitsSchema>

const tier = z.strictObject({
  description: z.string().optional(),
  /** Applies to models the tier does not list. */
  default: modelLimitsSchema.default({}),
  models: z.record(z.string(), modelLimitsSchema).default({}),
})
export type TierConfig = z.infer<typeof tier>

export const plansSchema = z.strictObject({
  defaultTier: z.string().min(1),
  tiers: z.record(z.string(), tier),
}).refine((p) => p.defaultTier in p.tiers, { message: 'defaultTier must name one of the tiers', path: ['defaultTier'] })
export type PlansConfig = z.infer<typeof plansSchema>

export const configSchema = z.strictObject({
  server: z.strictObject({
    host: z.string().default('0.0.0.0'),
    port: port.default(8080),
    metricsHost: z.string().default('0.0.0.0'),
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
  }).prefault({}),
  store: z.strictObject({
    /** redis:// or rediss:// URL; unset means the embedded single-instance store. */
    redisUrl: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
    /** Prefix of every Redis key this gateway writes. */
    keyPrefix: z.string().default('tollgate:'),
    /** Where the embedded store keeps its data between restarts. */
    dataDir: z.string().default('./data'),
    commandTimeoutMs: positiveInt.default(500),
  }).prefault({}),
  limits: z.strictObject({
    /** While Redis is unreachable: enforce per instance in memory, admit everything, or refuse (503). */
    onRedisDown: z.enum(['insurance', 'fail-open', 'fail-closed']).default('insurance'),
    /** Redis for the rate-limit counters, if not the store's (store.redisUrl). */
    redisUrl: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
    /** Longest wait for Redis on the admission path; past it the request is decided as onRedisDown says. */
    redisTimeoutMs: positiveInt.default(200),
    /** How often to look for Redis again during an outage. */
    probeIntervalMs: positiveInt.default(1000),
    /** Length of the fixed rate-limit window. rpm and tpm are per minute: change it only for tests and demos. */
    windowMs: positiveInt.default(60_000),
    /** Instances behind the load balancer: during an outage each enforces 1/n of the windowed limits. */
    insuranceInstances: positiveInt.default(1),
  }).prefault({}),
  logging: z.strictObject({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  }).prefault({}),
  backends: z.record(z.string(), backendSchema),
  models: z.array(model).min(1),
  /** Backend that serves files and fine-tuning jobs (endpoints without a model). */
  resourceBackend: z.string().min(1),
  /** Tokens reserved for the completion when a request sets no max_tokens. */
  defaultMaxTokens: positiveInt.default(1024),
  /** Path of the plans file, relative to this file; or the plans inline. */
  plans: z.union([z.string().min(1), plansSchema]),
}).superRefine((cfg, ctx) => {
  const seen = new Set<string>()
  cfg.models.forEach((m, i) => {
    if (seen.has(m.name)) ctx.addIssue({ code: 'custom', message: `duplicate model name "${m.name}"`, path: ['models', i, 'name'] })
    seen.add(m.name)
    m.deployments.forEach((d, j) => {
      if (!(d.backend in cfg.backends)) {
        ctx.addIssue({ code: 'custom', message: `unknown backend "${d.backend}"`, path: ['models', i, 'deployments', j, 'backend'] })
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
  readonly secrets: Secrets
  /** Where the file came from, for messages. */
  readonly source: string
}

export interface Secrets {
  /** TOLLGATE_ADMIN_TOKEN, if set. */
  readonly adminToken: string | undefined
  /** TOLLGATE_KEY_SECRET: the HMAC secret for API key hashes, if set. */
  readonly keyHashSecret: string | undefined
  /** JWT signing secret for the RAG gateway (TOLLGATE_JWT_SECRET), if set. */
  readonly jwtSecret: string | undefined
  /** Upstream API keys by env var name, read once at boot. */
  readonly backendKeys: Readonly<Record<string, string>>
}

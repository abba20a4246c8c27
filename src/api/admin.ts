// The admin API's replies (the key portal). Its requests are validated by the schemas
// beside the routes (keys/service.ts, admin/keys.ts, admin/usage.ts); these describe what
// comes back, for the reference.
import { z } from 'zod'
import { modelLimitsSchema, OUTPUT_CAPS, SERVICE_CLASSES, storageCapsSchema } from '../config/schema.ts'

export const ApiKey = z
  .object({
    id: z.string(),
    object: z.literal('api_key'),
    prefix: z.string().meta({ description: 'The first characters of the secret, to recognise it by.' }),
    name: z.string().nullable(),
    owner: z.string().nullable().meta({ description: 'Keys of one owner share files, jobs and vector stores.' }),
    tier: z.string().nullable(),
    models: z.array(z.string()).nullable().meta({ description: 'Models the key may use; null: all.' }),
    endpoints: z.array(z.string()).nullable().meta({ description: 'Endpoints (scopes) the key may use; null: all.' }),
    limits: z.record(z.string(), modelLimitsSchema).nullable(),
    service_tier: z.enum(SERVICE_CLASSES).optional().meta({
      description: "The class of its calls that name none (service_tier), when its tier allows it; absent: the tier's.",
    }),
    status: z.enum(['active', 'revoked', 'expired']),
    created_at: z.string(),
    updated_at: z.string(),
    expires_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    rotation_grace_until: z.string().nullable(),
  })
  .meta({ description: 'An API key. Never its secret, never its hash.' })

export const ApiKeyWithSecret = ApiKey.extend({
  key: z.string().meta({ description: 'The secret: shown in this reply only.' }),
})

export const ApiKeyList = z.object({ object: z.literal('list'), data: z.array(ApiKey) })

const totals = {
  requests: z.int(),
  input_tokens: z.int(),
  output_tokens: z.int(),
  cost: z.number().meta({ description: "In units of the reply's `currency`, exact to the nano-unit." }),
  cache_read_tokens: z.int().meta({ description: "Of input_tokens, read from the upstream's prompt cache." }),
  cache_write_tokens: z.int().meta({ description: "Of input_tokens, written to the upstream's prompt cache." }),
  cache_read_cost: z.number().meta({ description: 'Of cost, what the cache reads cost (at cache_read_multiplier).' }),
  cache_write_cost: z
    .number()
    .meta({ description: 'Of cost, what the cache writes cost (at cache_write_multiplier).' }),
  cached_requests: z
    .int()
    .meta({ description: "Of requests, those the gateway's response cache answered (docs/cache.md)." }),
}

export const BudgetStatus = z
  .object({
    object: z.literal('budget'),
    scope: z.enum(['key', 'owner', 'tenant']),
    id: z.string(),
    origin: z.enum(['set', 'plan']).meta({ description: "`plan`: the key's tier's default; `set`: through this API." }),
    period: z.enum(['day', 'week', 'month', 'lifetime']),
    time_zone: z
      .string()
      .meta({ description: 'The IANA zone whose calendar days, weeks (Monday first) and months count.' }),
    amount: z.number(),
    spent: z.number().meta({ description: 'The real cost of the calls settled in the current period.' }),
    reserved: z.number().meta({ description: 'Held by calls in flight at their estimated cost.' }),
    remaining: z.number().meta({ description: 'amount − spent − reserved, at least 0.' }),
    currency: z.string(),
    period_start: z.string().nullable(),
    resets_at: z.string().nullable().meta({ description: 'When the next period begins; null for a lifetime budget.' }),
    thresholds: z
      .array(z.int())
      .meta({ description: 'Percentages reported (once each per period) as they are reached.' }),
  })
  .meta({ description: "A budget and where it stands in its current period; money in the plans' currency." })

export const BudgetList = z.object({ object: z.literal('list'), data: z.array(BudgetStatus) })

export const KeyUsage = z.object({
  object: z.literal('usage'),
  key_id: z.string(),
  from: z.string(),
  to: z.string(),
  currency: z.string().meta({
    description: "The ISO 4217 code of every cost in this reply: the plans' currency (plans `currency`, default EUR).",
  }),
  data: z.array(z.object({ day: z.string(), model: z.string(), ...totals })),
  by_model: z.array(z.object({ model: z.string(), ...totals })),
  totals: z.object(totals),
  budgets: z.array(BudgetStatus).meta({ description: "The budgets the key's calls are charged against, now." }),
})

export const Usage = z.object({
  object: z.literal('usage'),
  group_by: z.enum(['key', 'owner', 'tier', 'model']),
  granularity: z.enum(['total', 'day']),
  from: z.string(),
  to: z.string(),
  currency: z.string().meta({
    description: "The ISO 4217 code of every cost in this reply: the plans' currency (plans `currency`, default EUR).",
  }),
  data: z.array(
    z
      .object(totals)
      .loose()
      .meta({ description: 'One group: its key_id, owner, tier or model (and day), with its totals.' }),
  ),
  totals: z.object(totals),
  budgets: z.array(BudgetStatus).meta({
    description:
      'Every budget set through /admin/budgets (filtered by `owner` when given), now; tier defaults are on each key.',
  }),
})

export const TierList = z.object({
  object: z.literal('list'),
  default_tier: z.string(),
  data: z.array(
    z.object({
      object: z.literal('tier'),
      name: z.string(),
      description: z.string().nullable(),
      is_default: z.boolean(),
      default: modelLimitsSchema,
      models: z.record(z.string(), modelLimitsSchema),
      storage_caps: storageCapsSchema.meta({
        description:
          'What one key of the tier may keep stored: pending asynchronous requests (queue_full past them) and files (file_quota_exceeded).',
      }),
      output_cap: z.enum(OUTPUT_CAPS).meta({
        description:
          "A call that names no output cap: 'send' holds defaultMaxTokens per reply and sends it upstream as the cap; 'ceiling' holds the model's max_output_length and sends nothing.",
      }),
    }),
  ),
})

const iso = z.string().meta({ description: 'An ISO 8601 time.' })

export const DeploymentCapacityState = z
  .object({
    in_flight: z
      .int()
      .meta({ description: 'Calls in flight on it, across every instance (counted when it declares maxConcurrent).' }),
    requests: z.int().meta({ description: 'Requests counted in the current window (when it declares rpm).' }),
    tokens: z.int().meta({ description: 'Tokens counted in the current window (when it declares tpm).' }),
    remaining_requests: z.int().nullable().meta({
      description:
        'Requests left: the tighter of rpm minus `requests` and what the upstream last said; null when neither says.',
    }),
    remaining_tokens: z.int().nullable().meta({ description: 'Tokens left, the same way.' }),
    learned: z
      .object({
        remaining_requests: z.int().nullable(),
        requests_reset_at: iso.nullable(),
        remaining_tokens: z.int().nullable(),
        tokens_reset_at: iso.nullable(),
      })
      .meta({
        description:
          "What the upstream's x-ratelimit-* headers last said is left, and until when that holds; null once it no longer does.",
      }),
    cooling_down: z.boolean().meta({ description: 'True while no call is sent to it after a 429 or a 503.' }),
    cooling_until: iso.nullable(),
  })
  .meta({ description: "A deployment's capacity as the gateway's store (shared by every instance) sees it now." })

export const BackendList = z.object({
  object: z.literal('list'),
  store: z.enum(['memory', 'redis']).nullable().meta({
    description: 'Where the capacity counters live (redis: shared by every instance); null: capacity is not tracked.',
  }),
  state_available: z.boolean().meta({ description: 'False when the store did not answer: every `state` is null.' }),
  data: z.array(
    z.object({
      object: z.literal('model'),
      name: z.string(),
      kind: z.string(),
      deployments: z.array(
        z.object({
          object: z.literal('deployment'),
          id: z.string().meta({
            description:
              'The capacity id, `<backend>/<upstream model>`: deployments of two models on the same upstream deployment share it, and its counters.',
          }),
          backend: z.string(),
          upstream_model: z.string(),
          weight: z.int(),
          limits: z
            .object({ rpm: z.int().nullable(), tpm: z.int().nullable(), max_concurrent: z.int().nullable() })
            .meta({ description: 'What the config declares (rpm, tpm, maxConcurrent); null: no such limit.' }),
          state: DeploymentCapacityState.nullable(),
          circuit: z
            .object({
              open: z.boolean().meta({ description: 'True while this backend is tried last, after every closed one.' }),
              failures: z.int().meta({ description: 'Connect failures in a row (3 open the circuit).' }),
              open_until: iso.nullable(),
            })
            .nullable()
            .meta({
              description:
                "The circuit breaker of the deployment's backend on the instance that answered (each instance keeps its own); null when the gateway has none.",
            }),
        }),
      ),
    }),
  ),
})

/** What one instance says of a reload (runtime/reload.ts): what it runs now, and why not the file when refused. */
export const ConfigReload = z
  .object({
    object: z.literal('config.reload'),
    instance: z.string().meta({ description: "The instance's id (random per process), as in its log lines." }),
    host: z.string(),
    pid: z.int(),
    outcome: z.enum(['applied', 'unchanged', 'invalid', 'restart_required', 'failed']).meta({
      description:
        'applied: the file is in force for every call that starts from now on; unchanged: it already was; invalid, restart_required, failed: refused, the previous configuration stays in force.',
    }),
    hash: z.string().meta({ description: 'sha256 of the configuration file in force now (as `sha256sum` prints it).' }),
    plans_hash: z
      .string()
      .nullable()
      .meta({ description: 'sha256 of the plans file in force, when `plans:` names one.' }),
    loaded_at: iso.meta({ description: 'When the configuration in force was loaded.' }),
    file_hash: z
      .string()
      .nullable()
      .meta({ description: 'sha256 of the file read this time, a refused one too; null when it could not be read.' }),
    changed: z.array(z.string()).meta({ description: 'The sections whose content changed (applied).' }),
    problems: z.array(z.string()).meta({
      description:
        'Why it was refused: each bad field as `path: message`, or each setting that only a restart applies.',
    }),
  })
  .meta({ description: 'One instance after a reload of its configuration file.' })

export const ConfigReloadList = z.object({
  object: z.literal('list'),
  asked: z.int().nullable().meta({
    description:
      'How many instances the request reached, as Redis counted them (null on a Redis Cluster, where only the whole wait tells).',
  }),
  data: z
    .array(ConfigReload)
    .meta({ description: 'The answers that came within the wait, in their order of arrival.' }),
})

export const ConfigInForce = z.object({
  object: z.literal('config'),
  instance: z.string(),
  file: z.string().meta({ description: 'The configuration file this instance reads (and reloads).' }),
  hash: z.string(),
  plans_hash: z.string().nullable(),
  loaded_at: iso,
})

export const OutputReservationList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      object: z.literal('output_reservation'),
      model: z.string(),
      tier: z.string(),
      mode: z.enum(['learned', 'fixed']),
      reserved_per_reply: z.int().nullable().meta({
        description:
          "Output tokens per reply a call naming no output cap reserves now against tpm and output_tpm; null: the fixed reservation (the tier's output_cap).",
      }),
      source: z.enum(['key', 'tier', 'model']).nullable().meta({
        description:
          "Whose calls it was learned from: the key's to the model, its tier's, or the model's; null: none has min_samples yet.",
      }),
      samples: z
        .object({ key: z.number(), tier: z.number(), model: z.number() })
        .meta({ description: 'Decayed observations in each sketch.' }),
      quantile: z.number(),
      floor: z.int(),
      ceiling: z.int().nullable(),
      min_samples: z.number(),
      half_life_seconds: z.number(),
    }),
  ),
})
/** DELETE /admin/cache (docs/cache.md). */
export const CachePurge = z
  .object({ object: z.literal('response_cache.purge'), deleted: z.int() })
  .meta({ description: 'How many cached replies were removed.' })

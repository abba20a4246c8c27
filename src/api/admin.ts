// The admin API's replies (the key portal). Its requests are validated by the schemas
// beside the routes (keys/service.ts, admin/keys.ts, admin/usage.ts); these describe what
// comes back, for the reference.
import { z } from 'zod'
import { modelLimitsSchema, storageCapsSchema } from '../config/schema.ts'

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
}

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
    }),
  ),
})

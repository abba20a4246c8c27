// Key lifecycle: create (and, in the key portal, rotate, revoke, update). The secret is
// returned once, to the caller of create; only its keyed hash is stored.
import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { ENDPOINTS, modelLimitsSchema, type PlansConfig } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { KeyStore } from '../store/ports.ts'
import { displayPrefix, generateKey, type KeyHasher } from './format.ts'
import type { KeyRecord } from './record.ts'

const isoTime = z.iso.datetime({ offset: true })

export const createKeySchema = z.strictObject({
  name: z.string().trim().min(1).max(200).nullish(),
  owner: z.string().trim().min(1).max(200).nullish(),
  tier: z.string().min(1).nullish(),
  models: z.array(z.string().min(1)).max(1000).nullish(),
  endpoints: z.array(z.enum(ENDPOINTS)).nullish(),
  expires_at: isoTime.nullish(),
  limits: z.record(z.string(), modelLimitsSchema).nullish(),
})
export type CreateKeyInput = z.infer<typeof createKeySchema>

export interface KeyServiceOptions {
  readonly store: KeyStore
  readonly hash: KeyHasher
  readonly plans: PlansConfig
  readonly now?: () => Date
}

export interface CreatedKey {
  readonly record: KeyRecord
  /** The secret: shown once, never stored. */
  readonly key: string
}

export class KeyService {
  readonly #store: KeyStore
  readonly #hash: KeyHasher
  readonly #plans: PlansConfig
  readonly #now: () => Date

  constructor(options: KeyServiceOptions) {
    this.#store = options.store
    this.#hash = options.hash
    this.#plans = options.plans
    this.#now = options.now ?? (() => new Date())
  }

  async create(input: unknown): Promise<CreatedKey> {
    const body = parseBody(createKeySchema, input)
    if (body.tier && !(body.tier in this.#plans.tiers)) {
      throw gatewayError('invalid_body', { message: 'Unknown tier.', param: 'tier' })
    }
    const now = this.#now()
    if (body.expires_at && Date.parse(body.expires_at) <= now.getTime()) {
      throw gatewayError('invalid_body', { message: 'expires_at must be in the future.', param: 'expires_at' })
    }
    const key = generateKey()
    const record: KeyRecord = {
      id: `key_${randomBytes(12).toString('hex')}`,
      hash: this.#hash(key),
      previousHash: null,
      previousHashValidUntil: null,
      prefix: displayPrefix(key),
      name: body.name ?? null,
      owner: body.owner ?? null,
      tier: body.tier ?? null,
      models: body.models ?? null,
      endpoints: body.endpoints ?? null,
      limits: body.limits ?? null,
      status: 'active',
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
      expiresAt: body.expires_at ? new Date(body.expires_at).toISOString() : null,
      revokedAt: null,
    }
    await this.#store.insert(record)
    return { record, key }
  }

  get(id: string): Promise<KeyRecord | null> {
    return this.#store.get(id)
  }
}

/** Validates an admin body; the first problem becomes a 400 naming the field. */
export function parseBody<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  const param = issue?.path.map(String).join('.') || null
  const message = issue?.code === 'unrecognized_keys'
    ? `Unknown field(s): ${issue.keys.filter((k) => /^[\w.-]{1,64}$/.test(k)).join(', ') || '(unprintable)'}.`
    : `Invalid ${param ?? 'body'}: ${issue?.message ?? 'invalid value'}.`
  throw gatewayError('invalid_body', { message, param })
}

/** The public view of a key record: never a hash, never a secret. */
export function publicKeyView(record: KeyRecord): Record<string, unknown> {
  return {
    id: record.id,
    object: 'api_key',
    prefix: record.prefix,
    name: record.name,
    owner: record.owner,
    tier: record.tier,
    models: record.models,
    endpoints: record.endpoints,
    limits: record.limits,
    status: record.status,
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    expires_at: record.expiresAt,
    revoked_at: record.revokedAt,
    rotation_grace_until: record.previousHashValidUntil,
  }
}

// Key lifecycle: create, update, rotate, revoke. The secret is returned once, to the
// caller of create or rotate; only its keyed hash is stored. Every change is announced
// (onChange) so that every instance's key cache drops the key at once.
import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { ENDPOINTS, modelLimitsSchema, SERVICE_CLASSES, type PlansConfig, type ServiceClass } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { Events } from '../events/types.ts'
import { StoreConflictError } from '../store/errors.ts'
import type { KeyStore } from '../store/ports.ts'
import { displayPrefix, generateKey, type KeyHasher } from './format.ts'
import type { KeyRecord } from './record.ts'

/** Longest rotation grace: a month. A longer overlap is a second key, not a rotation. */
export const MAX_GRACE_SECONDS = 30 * 24 * 60 * 60
/** Default rotation grace: none. A rotation is often a response to a leak. */
export const DEFAULT_GRACE_SECONDS = 0
/** Rounds of read, apply, compare-and-set before a change to a busy key gives up. */
const CHANGE_ATTEMPTS = 8

const KEY_ID = /^key_[0-9a-f]{24}$/

const isoTime = z.iso.datetime({ offset: true })
const label = z.string().trim().min(1).max(200)
const modelList = z.array(z.string().min(1).max(256)).max(1000)
const endpointList = z.array(z.enum(ENDPOINTS)).max(ENDPOINTS.length)
const limitOverrides = z.record(z.string().min(1).max(256), modelLimitsSchema)

export const createKeySchema = z.strictObject({
  name: label.nullish(),
  owner: label.nullish(),
  tier: z.string().min(1).max(200).nullish(),
  models: modelList.nullish(),
  endpoints: endpointList.nullish(),
  expires_at: isoTime.nullish(),
  limits: limitOverrides.nullish(),
  /** The class of its calls that name none (service_tier); null: its tier's default. */
  service_tier: z.enum(SERVICE_CLASSES).nullish(),
})
export type CreateKeyInput = z.infer<typeof createKeySchema>

/** What PATCH may change. A field left out stays as it is; null resets it. The owner stays: files and jobs belong to it. */
export const updateKeySchema = createKeySchema.omit({ owner: true })
export type UpdateKeyInput = z.infer<typeof updateKeySchema>

export const rotateKeySchema = z.strictObject({
  grace_seconds: z.number().int().min(0).max(MAX_GRACE_SECONDS).optional(),
})

/** What a key looks like from outside: revoked, expired (by its expiry) or active. */
export type EffectiveKeyStatus = 'active' | 'revoked' | 'expired'
export const KEY_STATUSES: readonly EffectiveKeyStatus[] = ['active', 'revoked', 'expired']

export interface KeyListFilter {
  readonly owner?: string
  /** Matches the effective tier: a key without one is on the default tier. */
  readonly tier?: string
  readonly status?: EffectiveKeyStatus
}

export interface KeyServiceOptions {
  readonly store: KeyStore
  readonly hash: KeyHasher
  /** The plans in force; a function when a reload may change them (read at each use). */
  readonly plans: PlansConfig | (() => PlansConfig)
  /** The configured model names; when given, scopes and overrides may only name these. A function when a reload may change them. */
  readonly models?: readonly string[] | (() => ReadonlySet<string>)
  /** Called after every change is stored, with the key id; it tells every instance. Should not throw. */
  readonly onChange?: (id: string) => Promise<void>
  /** Where key.created, key.rotated and key.revoked are published (before the caller is answered). */
  readonly events?: Events
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
  readonly #plansOf: () => PlansConfig
  readonly #modelsOf: () => ReadonlySet<string> | null
  readonly #onChange: (id: string) => Promise<void>
  readonly #events: Events | undefined
  readonly #now: () => Date
  /** Read-modify-write of one key runs one at a time on this instance. */
  readonly #locks = new Map<string, Promise<unknown>>()

  constructor(options: KeyServiceOptions) {
    this.#store = options.store
    this.#hash = options.hash
    const { plans, models } = options
    this.#plansOf = typeof plans === 'function' ? plans : () => plans
    if (typeof models === 'function') this.#modelsOf = models
    else {
      const fixed = models ? new Set(models) : null
      this.#modelsOf = () => fixed
    }
    this.#onChange = options.onChange ?? (async () => undefined)
    this.#events = options.events
    this.#now = options.now ?? (() => new Date())
  }

  get plans(): PlansConfig {
    return this.#plansOf()
  }

  get #plans(): PlansConfig {
    return this.#plansOf()
  }

  async create(input: unknown): Promise<CreatedKey> {
    const body = parseBody(createKeySchema, input)
    const now = this.#now()
    this.#checkScopes(body, now)
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
      models: body.models ? unique(body.models) : null,
      endpoints: body.endpoints ? unique(body.endpoints) : null,
      limits: body.limits ?? null,
      ...(body.service_tier ? { serviceTier: body.service_tier } : {}),
      status: 'active',
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
      expiresAt: body.expires_at ? new Date(body.expires_at).toISOString() : null,
      revokedAt: null,
    }
    // No cache anywhere can hold this key yet: nothing to announce.
    await this.#store.insert(record)
    await this.#announce('key.created', record)
    return { record, key }
  }

  /** null for an unknown id (and for anything that is not an id, without a store read). */
  get(id: string): Promise<KeyRecord | null> {
    if (!KEY_ID.test(id)) return Promise.resolve(null)
    return this.#store.get(id)
  }

  async list(filter: KeyListFilter = {}): Promise<KeyRecord[]> {
    const storeStatus = filter.status === undefined ? undefined : filter.status === 'revoked' ? 'revoked' : 'active'
    const records = await this.#store.list({
      ...(filter.owner === undefined ? {} : { owner: filter.owner }),
      ...(storeStatus === undefined ? {} : { status: storeStatus }),
    })
    const at = this.#now().getTime()
    const { defaultTier } = this.#plans
    return records.filter(
      (r) =>
        (filter.tier === undefined || (r.tier ?? defaultTier) === filter.tier) &&
        (filter.status === undefined || effectiveStatus(r, at) === filter.status),
    )
  }

  async update(id: string, input: unknown): Promise<KeyRecord> {
    const body = parseBody(updateKeySchema, input)
    const { record } = await this.#change(id, (current, now) => {
      if (current.status === 'revoked')
        throw gatewayError('invalid_body', { message: 'This key is revoked; it can no longer be changed.' })
      this.#checkScopes(body, now)
      const next: KeyRecord = {
        ...current,
        ...(body.name === undefined ? {} : { name: body.name }),
        ...(body.tier === undefined ? {} : { tier: body.tier }),
        ...(body.models === undefined ? {} : { models: body.models === null ? null : unique(body.models) }),
        ...(body.endpoints === undefined ? {} : { endpoints: body.endpoints === null ? null : unique(body.endpoints) }),
        ...(body.limits === undefined ? {} : { limits: body.limits }),
        ...(body.service_tier === undefined ? {} : { serviceTier: body.service_tier }),
        ...(body.expires_at === undefined
          ? {}
          : { expiresAt: body.expires_at === null ? null : new Date(body.expires_at).toISOString() }),
        updatedAt: now.toISOString(),
      }
      return { record: withoutSpentGrace(next, now), result: null }
    })
    return record
  }

  /**
   * A new secret. The old one keeps working for grace_seconds (default 0: at once it
   * does not). Only one previous secret is kept: rotating again ends the last grace.
   */
  async rotate(id: string, input: unknown): Promise<CreatedKey> {
    const body = parseBody(rotateKeySchema, input ?? {})
    const grace = body.grace_seconds ?? DEFAULT_GRACE_SECONDS
    const { record, result } = await this.#change(id, (current, now) => {
      if (current.status === 'revoked')
        throw gatewayError('invalid_body', { message: 'This key is revoked; it cannot be rotated. Create a new key.' })
      const key = generateKey()
      const next: KeyRecord = {
        ...current,
        hash: this.#hash(key),
        previousHash: grace > 0 ? current.hash : null,
        previousHashValidUntil: grace > 0 ? new Date(now.getTime() + grace * 1000).toISOString() : null,
        prefix: displayPrefix(key),
        updatedAt: now.toISOString(),
      }
      return { record: next, result: key }
    })
    await this.#announce('key.rotated', record)
    return { record, key: result }
  }

  /** Revokes the key; revoking a revoked key changes nothing. */
  async revoke(id: string): Promise<KeyRecord> {
    let changed = true
    const { record } = await this.#change(id, (current, now) => {
      changed = current.status !== 'revoked'
      if (current.status === 'revoked') return { record: current, result: null, unchanged: true }
      // The previous secret of a rotation stays indexed until its grace would have ended,
      // so it is refused as revoked, as the current one is (not as an unknown key).
      const next: KeyRecord = {
        ...current,
        status: 'revoked',
        revokedAt: now.toISOString(),
        updatedAt: now.toISOString(),
      }
      return { record: next, result: null }
    })
    if (changed) await this.#announce('key.revoked', record)
    return record
  }

  /**
   * The event of a change, committed before the caller is answered. A store that cannot
   * take it does not undo the change: the publisher logs the event as lost.
   */
  async #announce(type: 'key.created' | 'key.rotated' | 'key.revoked', record: KeyRecord): Promise<void> {
    if (this.#events === undefined) return
    const base = { key_id: record.id, name: record.name, owner: record.owner, tier: record.tier, prefix: record.prefix }
    const published =
      type === 'key.created'
        ? this.#events.publish(type, base)
        : type === 'key.rotated'
          ? this.#events.publish(type, { ...base, rotation_grace_until: record.previousHashValidUntil })
          : this.#events.publish(type, { ...base, revoked_at: record.revokedAt })
    await published.catch(() => null)
  }

  /** The reply view of a record, with the effective tier and status. */
  view(record: KeyRecord): KeyView {
    return publicKeyView(record, { defaultTier: this.#plans.defaultTier, now: this.#now().getTime() })
  }

  /**
   * Read-modify-write of one key. Serial per key on this instance; across instances the
   * write is a compare-and-set against the record read, so a change made elsewhere in
   * between is never overwritten: the change is re-applied to the record as it is now
   * (where `apply` may refuse it: an update or rotation refuses a key revoked meanwhile,
   * so a revoke always wins). Gives up with StoreConflictError (a 409) after
   * CHANGE_ATTEMPTS rounds of losing the race.
   */
  async #change<T>(
    id: string,
    apply: (current: KeyRecord, now: Date) => { record: KeyRecord; result: T; unchanged?: boolean },
  ): Promise<{ record: KeyRecord; result: T }> {
    return this.#serial(id, async () => {
      for (let attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
        const current = await this.get(id)
        if (current === null) throw unknownKey()
        const outcome = apply(current, this.#now())
        if (outcome.unchanged === true) return outcome
        const written = await this.#store.replace(outcome.record, current)
        if (written === 'missing') throw unknownKey()
        if (written === 'replaced') {
          await this.#onChange(id)
          return outcome
        }
      }
      throw new StoreConflictError(
        `key ${id} kept changing on other instances; gave up after ${CHANGE_ATTEMPTS} attempts`,
      )
    })
  }

  async #serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(id) ?? Promise.resolve()
    const run = previous.then(fn, fn)
    const tail = run.catch(() => undefined)
    this.#locks.set(id, tail)
    try {
      return await run
    } finally {
      if (this.#locks.get(id) === tail) this.#locks.delete(id)
    }
  }

  #checkScopes(body: UpdateKeyInput, now: Date): void {
    const plans = this.#plans
    if (body.tier && !Object.hasOwn(plans.tiers, body.tier)) {
      throw gatewayError('invalid_body', {
        message: `Unknown tier. Tiers: ${Object.keys(plans.tiers).join(', ')}.`,
        param: 'tier',
      })
    }
    if (body.expires_at && Date.parse(body.expires_at) <= now.getTime()) {
      throw gatewayError('invalid_body', { message: 'expires_at must be in the future.', param: 'expires_at' })
    }
    const known = this.#modelsOf()
    if (known === null) return
    const unknownModel = body.models?.findIndex((m) => !known.has(m)) ?? -1
    if (unknownModel !== -1)
      throw gatewayError('invalid_body', { message: 'Unknown model in models.', param: `models.${unknownModel}` })
    const unknownOverride = Object.keys(body.limits ?? {}).find((m) => m !== '*' && !known.has(m))
    if (unknownOverride !== undefined)
      throw gatewayError('invalid_body', { message: 'limits may only name configured models or "*".', param: 'limits' })
  }
}

function unknownKey() {
  return gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
}

function unique<T>(items: readonly T[]): T[] {
  return [...new Set(items)]
}

/** Drops a rotation's previous hash once its grace is over, so it stops being indexed. */
function withoutSpentGrace(record: KeyRecord, now: Date): KeyRecord {
  if (record.previousHashValidUntil === null || Date.parse(record.previousHashValidUntil) > now.getTime()) return record
  return { ...record, previousHash: null, previousHashValidUntil: null }
}

export function effectiveStatus(record: KeyRecord, now: number): EffectiveKeyStatus {
  if (record.status === 'revoked') return 'revoked'
  if (record.expiresAt !== null && Date.parse(record.expiresAt) <= now) return 'expired'
  return 'active'
}

/** Validates an admin body; the first problem becomes a 400 naming the field. */
export function parseBody<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  const param = issue?.path.map(String).join('.') || null
  const message =
    issue?.code === 'unrecognized_keys'
      ? `Unknown field(s): ${issue.keys.filter((k) => /^[\w.-]{1,64}$/.test(k)).join(', ') || '(unprintable)'}.`
      : `Invalid ${param ?? 'body'}: ${issue?.message ?? 'invalid value'}.`
  throw gatewayError('invalid_body', { message, param })
}

export interface KeyView {
  readonly id: string
  readonly object: 'api_key'
  readonly prefix: string
  readonly name: string | null
  readonly owner: string | null
  readonly tier: string | null
  readonly models: readonly string[] | null
  readonly endpoints: readonly string[] | null
  readonly limits: KeyRecord['limits']
  /** Only when the key sets one. */
  readonly service_tier?: ServiceClass
  readonly status: EffectiveKeyStatus
  readonly created_at: string
  readonly updated_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  /** Until when the secret before the last rotation still works; null when it does not. */
  readonly rotation_grace_until: string | null
}

/**
 * The public view of a key record: never a hash, never a secret. With the plans' default
 * tier it shows the tier the key is really on.
 */
export function publicKeyView(record: KeyRecord, options: { defaultTier?: string; now?: number } = {}): KeyView {
  const now = options.now ?? Date.now()
  const grace = record.previousHashValidUntil
  return {
    id: record.id,
    object: 'api_key',
    prefix: record.prefix,
    name: record.name,
    owner: record.owner,
    tier: record.tier ?? options.defaultTier ?? null,
    models: record.models,
    endpoints: record.endpoints,
    limits: record.limits,
    ...(record.serviceTier ? { service_tier: record.serviceTier } : {}),
    status: effectiveStatus(record, now),
    created_at: record.createdAt,
    updated_at: record.updatedAt,
    expires_at: record.expiresAt,
    revoked_at: record.revokedAt,
    rotation_grace_until: record.status === 'active' && grace !== null && Date.parse(grace) > now ? grace : null,
  }
}

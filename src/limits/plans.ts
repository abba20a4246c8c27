// Which limits apply to a (key, model): the key's tier (or the default tier), the tier's
// entry for the model (or the tier's default), then the key's own overrides on top.
import type { ModelLimits, PlansConfig, StorageCaps } from '../config/schema.ts'
import type { KeyRecord } from '../keys/record.ts'

export interface ResolvedLimits {
  readonly tier: string
  readonly model: string
  readonly limits: ModelLimits
}

export function tierOf(key: Pick<KeyRecord, 'tier'>, plans: PlansConfig): string {
  return key.tier ?? plans.defaultTier
}

export function resolveLimits(plans: PlansConfig, key: Pick<KeyRecord, 'tier' | 'limits'>, model: string): ResolvedLimits {
  const tier = tierOf(key, plans)
  const plan = plans.tiers[tier] ?? plans.tiers[plans.defaultTier]
  const base = plan?.models[model] ?? plan?.default ?? {}
  const overrides = { ...key.limits?.['*'], ...key.limits?.[model] }
  return { tier, model, limits: { ...base, ...overrides } }
}

/** What a key of `tier` may keep stored: the tier's own caps over the defaults. */
export function storageCapsOf(plans: PlansConfig, defaults: StorageCaps, tier: string): StorageCaps {
  return { ...defaults, ...plans.tiers[tier]?.storageCaps }
}

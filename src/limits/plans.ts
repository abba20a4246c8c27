// Which limits apply to a (key, model): the key's tier (or the default tier), the tier's
// entry for the model (or the tier's default), then the key's own overrides on top.
import type { ModelLimits, PlansConfig, StorageCaps } from '../config/schema.ts'
import type { KeyRecord } from '../keys/record.ts'

export interface ResolvedLimits {
  readonly tier: string
  readonly model: string
  readonly limits: ModelLimits
  /** A batch's line: admitted in its key's batch pool (limits/pools.ts). */
  readonly batch?: true
}

/**
 * The tier a key is on. A key may name a tier the plans no longer have: the plans were
 * switched to another catalogue (Standard1000 → Professional) while it was assigned. Such
 * a key is on the default tier, and the gateway says so at boot (tier-check.ts) with the
 * keys' count per missing tier, until an admin moves them (PATCH /admin/keys/{id}). It
 * is not refused, nor is the boot: a switch of catalogue must not take every such key
 * (or the gateway) down, and the admin API only accepts tiers the running plans have,
 * so keys cannot be moved before the switch.
 */
export function tierOf(key: Pick<KeyRecord, 'tier'>, plans: PlansConfig): string {
  const tier = key.tier ?? plans.defaultTier
  return Object.hasOwn(plans.tiers, tier) ? tier : plans.defaultTier
}

export function resolveLimits(
  plans: PlansConfig,
  key: Pick<KeyRecord, 'tier' | 'limits'>,
  model: string,
): ResolvedLimits {
  const tier = tierOf(key, plans)
  const plan = plans.tiers[tier]
  const base = plan?.models[model] ?? plan?.default ?? {}
  const overrides = { ...key.limits?.['*'], ...key.limits?.[model] }
  return { tier, model, limits: { ...base, ...overrides } }
}

/** What a key of `tier` may keep stored: the tier's own caps over the defaults. */
export function storageCapsOf(plans: PlansConfig, defaults: StorageCaps, tier: string): StorageCaps {
  return { ...defaults, ...plans.tiers[tier]?.storageCaps }
}

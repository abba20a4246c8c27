// At boot: keys that name a tier the plans do not have (the plans were switched to another
// catalogue, e.g. the legacy Standard1000 to the next catalogue's Professional). They are
// on the default tier (plans.ts, tierOf); this says so once, with the count per missing
// tier, so that an admin can move them (PATCH /admin/keys/{id} {"tier": ...}).
import type { PlansConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { KeyStore } from '../store/ports.ts'

/** Active keys per tier name that the plans lack; empty when every key's tier exists. */
export async function keysOnMissingTiers(
  keys: Pick<KeyStore, 'list'>,
  plans: PlansConfig,
): Promise<Map<string, number>> {
  const missing = new Map<string, number>()
  for (const record of await keys.list({ status: 'active' })) {
    if (record.tier === null || Object.hasOwn(plans.tiers, record.tier)) continue
    missing.set(record.tier, (missing.get(record.tier) ?? 0) + 1)
  }
  return missing
}

/**
 * Logs the warning; never throws and waits at most `timeoutMs` (with the store down the
 * gateway still starts, and the keys are checked by no one: the limits apply all the same).
 */
export async function warnKeysOnMissingTiers(
  keys: Pick<KeyStore, 'list'>,
  plans: PlansConfig,
  log: Logger,
  timeoutMs: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((done) => {
    timer = setTimeout(() => done('timeout'), timeoutMs)
  })
  try {
    const missing = await Promise.race([keysOnMissingTiers(keys, plans), timeout])
    if (missing === 'timeout') {
      log.warn({ timeoutMs }, "could not check the keys' tiers against the plans in time")
      return
    }
    for (const [tier, count] of missing) {
      log.warn(
        { tier, keys: count, defaultTier: plans.defaultTier, tiers: Object.keys(plans.tiers) },
        `${count} active key(s) are on tier "${tier}", which the plans do not have: they get the default tier "${plans.defaultTier}" until moved to another tier (PATCH /admin/keys/{id})`,
      )
    }
  } catch (err) {
    // The message is enough: with the store down this is expected, and the outage is logged on its own.
    log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      "could not check the keys' tiers against the plans",
    )
  } finally {
    clearTimeout(timer)
  }
}

// /admin/tiers: the plans in force (the boot's file, or the last one reloaded).
import { storageCapsOf } from '../limits/plans.ts'
import type { Router } from '../http/router.ts'
import { sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

export function registerTierRoutes(router: Router, deps: AdminDeps): void {
  router.on('GET', '/admin/tiers', async (ctx) => {
    ctx.route = 'admin.tiers'
    deps.authenticateAdmin(ctx.req)
    const { plans, storageCaps } = deps.runtime.current.config
    sendAdmin(ctx, 200, {
      object: 'list',
      default_tier: plans.defaultTier,
      data: Object.entries(plans.tiers).map(([name, tier]) => ({
        object: 'tier',
        name,
        description: tier.description ?? null,
        is_default: name === plans.defaultTier,
        default: tier.default,
        models: tier.models,
        // What each key of the tier may keep stored: the tier's own caps over storageCaps.
        storage_caps: storageCapsOf(plans, storageCaps, name),
        output_cap: tier.outputCap ?? 'send',
      })),
    })
  })
}

// DELETE /admin/cache: empties the response cache (docs/cache.md), of one tenant, one key or
// one model, or of all of them (every filter given must match). Entries are keyed by HMAC and
// sealed, so the store itself cannot be searched by prompt: the labels kept beside each
// entry (who stored it, for which model) are what a purge matches.
import { z } from 'zod'
import type { CachePurge } from '../api/admin.ts'
import type { ResponseCache } from '../cache/index.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { Router } from '../http/router.ts'
import { parseQuery } from '../http/query.ts'
import { sendAdmin } from './http.ts'

export const purgeCacheQuery = z.strictObject({
  tenant: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "A tenant's entries (an owner in no tenant is its own)." }),
  key_id: z.string().min(1).max(200).optional().meta({ description: 'The entries stored by one key.' }),
  model: z.string().min(1).max(256).optional().meta({ description: "One model's entries." }),
})

export interface CacheAdminDeps {
  readonly authenticateAdmin: AdminAuthenticator
  /** Absent: the gateway caches nothing, and there is nothing to delete. */
  readonly responseCache?: Pick<ResponseCache, 'purge'>
}

export function registerCacheRoutes(router: Router, deps: CacheAdminDeps): void {
  router.on('DELETE', '/admin/cache', async (ctx, _params, query) => {
    ctx.route = 'admin.cache.purge'
    deps.authenticateAdmin(ctx.req)
    const q = parseQuery(purgeCacheQuery, query)
    const deleted =
      deps.responseCache === undefined
        ? 0
        : await deps.responseCache.purge({
            ...(q.tenant === undefined ? {} : { tenant: q.tenant }),
            ...(q.key_id === undefined ? {} : { keyId: q.key_id }),
            ...(q.model === undefined ? {} : { model: q.model }),
          })
    sendAdmin(ctx, 200, { object: 'response_cache.purge', deleted } satisfies z.infer<typeof CachePurge>)
  })
}

// The admin API (INTERFACE.md §5), registered on the public router by app.ts. Every route
// checks the admin credential before it reads anything else.
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { Config } from '../config/schema.ts'
import type { Meter } from '../keys/meter.ts'
import type { KeyService } from '../keys/service.ts'
import type { Stores } from '../store/ports.ts'
import type { AdminRouter } from './http.ts'
import { registerKeyRoutes } from './keys.ts'
import { registerTierRoutes } from './tiers.ts'
import { registerUsageRoutes } from './usage.ts'

export interface AdminDeps {
  readonly config: Pick<Config, 'server' | 'plans'>
  readonly keys: KeyService
  readonly stores: Pick<Stores, 'usage'>
  readonly meter: Pick<Meter, 'flush'>
  readonly authenticateAdmin: AdminAuthenticator
}

export function registerAdminRoutes(router: AdminRouter, deps: AdminDeps): void {
  registerKeyRoutes(router, deps)
  registerUsageRoutes(router, deps)
  registerTierRoutes(router, deps)
}

// The admin API (INTERFACE.md §5), registered by app.ts through the audit's seam
// (audit/audited-routes.ts: a route that changes state must be declared in
// audit/declarations.ts). Every route checks the admin credential before it reads anything else.
import type { AccountService } from '../accounts/service.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import { registerAuditRoute } from '../audit/admin-route.ts'
import type { AuditLog } from '../audit/log.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { Config } from '../config/schema.ts'
import type { Meter } from '../keys/meter.ts'
import type { KeyService } from '../keys/service.ts'
import type { QueueService } from '../queue/service.ts'
import type { Stores } from '../store/ports.ts'
import type { Router } from '../http/router.ts'
import { registerBackendRoutes } from './backends.ts'
import { registerKeyRoutes } from './keys.ts'
import { registerQueueAdminRoutes } from './queue.ts'
import { registerTierRoutes } from './tiers.ts'
import { registerUsageRoutes } from './usage.ts'
import { registerUserRoutes } from './users.ts'

export interface AdminDeps {
  readonly config: Pick<Config, 'server' | 'plans' | 'storageCaps' | 'models'>
  readonly keys: KeyService
  readonly stores: Pick<Stores, 'usage'>
  readonly meter: Pick<Meter, 'flush'>
  readonly authenticateAdmin: AdminAuthenticator
  /** The /queue lines and stored requests (absent: /admin/queue answers 404). */
  readonly queue?: QueueService
  /** RAG gateway accounts (/admin/users). */
  readonly accounts: AccountService
  /** The deployments' capacity (/admin/backends shows its state; absent: the declared limits only). */
  readonly capacity?: DeploymentCapacity
  /** The audit log (/admin/audit reads it; the routes that change state are recorded by the seam app.ts registers them through). */
  readonly audit: AuditLog
}

export function registerAdminRoutes(router: Router, deps: AdminDeps): void {
  registerKeyRoutes(router, deps)
  registerUsageRoutes(router, deps)
  registerTierRoutes(router, deps)
  registerQueueAdminRoutes(router, deps)
  registerUserRoutes(router, deps)
  registerBackendRoutes(router, deps)
  registerAuditRoute(router, deps)
}

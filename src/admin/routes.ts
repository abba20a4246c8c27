// The admin API (INTERFACE.md §5), registered by app.ts through the audit's seam
// (audit/audited-routes.ts: a route that changes state must be declared in
// audit/declarations.ts). Every route checks the admin credential before it reads anything else.
import type { AccountService } from '../accounts/service.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import { registerAuditRoute } from '../audit/admin-route.ts'
import type { AuditLog } from '../audit/log.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import type { Config } from '../config/schema.ts'
import type { FleetReload } from '../runtime/fleet.ts'
import type { Reloader } from '../runtime/reload.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { Meter } from '../keys/meter.ts'
import type { KeyService } from '../keys/service.ts'
import type { QueueService } from '../queue/service.ts'
import type { Stores } from '../store/ports.ts'
import type { Router } from '../http/router.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { Limiter } from '../limits/port.ts'
import type { ResponseCache } from '../cache/index.ts'
import { registerBackendRoutes } from './backends.ts'
import { registerBudgetRoutes } from './budgets.ts'
import { registerCacheRoutes } from './cache.ts'
import { registerKeyRoutes } from './keys.ts'
import { registerQueueAdminRoutes } from './queue.ts'
import { registerReloadRoutes } from './reload.ts'
import { registerReservationRoutes } from './reservations.ts'
import { registerTierRoutes } from './tiers.ts'
import { registerUsageRoutes } from './usage.ts'
import { registerUserRoutes } from './users.ts'
import { registerWebhookRoutes } from './webhooks.ts'

/** What the admin API reads of the runtime snapshot in force, once per request. */
export interface AdminRuntime {
  readonly config: Pick<Config, 'plans' | 'storageCaps' | 'models' | 'source'>
  readonly hash: string
  readonly plansHash: string | null
  readonly loadedAt: number
  /** The deployments' capacity (/admin/backends shows its state; absent: the declared limits only). */
  readonly capacity?: DeploymentCapacity
}

export interface AdminDeps {
  /** The boot's configuration: server.* (body limits). */
  readonly config: Pick<Config, 'server'>
  readonly runtime: RuntimeSource<AdminRuntime>
  /** This instance's reload and the fleet's (POST /admin/reload). */
  readonly reloader: Reloader
  readonly fleet: FleetReload
  /** This instance's id (as in its reload reports). */
  readonly instance: string
  readonly keys: KeyService
  readonly stores: Pick<Stores, 'usage'>
  readonly meter: Pick<Meter, 'flush'>
  readonly authenticateAdmin: AdminAuthenticator
  /** The /queue lines and stored requests (absent: /admin/queue answers 404). */
  readonly queue?: QueueService
  /** RAG gateway accounts (/admin/users). */
  readonly accounts: AccountService
  /** This instance's circuit breaker (/admin/backends shows each backend's circuit; absent: not shown). */
  readonly breaker?: Pick<CircuitBreaker, 'inspect'>
  /** The budgets set and in force (/admin/budgets; absent: the gateway keeps none). */
  readonly budgets?: BudgetBook
  /** Where budgets stand (/admin/budgets, the usage replies). */
  readonly limiter?: Pick<Limiter, 'budgetStatus' | 'budgetStatusOf' | 'outputReservation'>
  /** The audit log (/admin/audit reads it; the routes that change state are recorded by the seam app.ts registers them through). */
  readonly audit: AuditLog
  /** The response cache (DELETE /admin/cache empties it; absent: nothing to empty). */
  readonly responseCache?: Pick<ResponseCache, 'purge'>
}

export function registerAdminRoutes(router: Router, deps: AdminDeps): void {
  registerKeyRoutes(router, deps)
  registerUsageRoutes(router, deps)
  registerTierRoutes(router, deps)
  registerQueueAdminRoutes(router, deps)
  registerUserRoutes(router, deps)
  registerBackendRoutes(router, deps)
  registerWebhookRoutes(router, deps)
  registerReloadRoutes(router, deps)
  registerBudgetRoutes(router, deps)
  registerAuditRoute(router, deps)
  registerReservationRoutes(router, deps)
  registerCacheRoutes(router, deps)
}

// The admin API (INTERFACE.md §5), registered on the public router by app.ts. Every route
// checks the admin credential before it reads anything else.
import type { AccountService } from '../accounts/service.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { Config } from '../config/schema.ts'
import type { Meter } from '../keys/meter.ts'
import type { KeyService } from '../keys/service.ts'
import type { QueueService } from '../queue/service.ts'
import type { Stores } from '../store/ports.ts'
import type { Router } from '../http/router.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { Limiter } from '../limits/port.ts'
import { registerBackendRoutes } from './backends.ts'
import { registerBudgetRoutes } from './budgets.ts'
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
  /** The budgets set and in force (/admin/budgets; absent: the gateway keeps none). */
  readonly budgets?: BudgetBook
  /** Where budgets stand (/admin/budgets, the usage replies). */
  readonly limiter?: Pick<Limiter, 'budgetStatus' | 'budgetStatusOf'>
}

export function registerAdminRoutes(router: Router, deps: AdminDeps): void {
  registerKeyRoutes(router, deps)
  registerUsageRoutes(router, deps)
  registerTierRoutes(router, deps)
  registerQueueAdminRoutes(router, deps)
  registerUserRoutes(router, deps)
  registerBackendRoutes(router, deps)
  registerBudgetRoutes(router, deps)
}

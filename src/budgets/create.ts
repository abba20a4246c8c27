// The budget book as main.ts builds it: its store on Redis when the store is (a connection
// of its own), otherwise budgets.db in the data directory; tenants from the accounts.
import { resolve } from 'node:path'
import type { Config, PlansConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import type { AccountStore } from '../store/ports.ts'
import { createRedisClient } from '../store/redis-client.ts'
import { createBudgetBook, type BudgetBook } from './book.ts'
import { openEmbeddedBudgetStore } from './embedded-store.ts'
import type { BudgetStore } from './port.ts'
import { createRedisBudgetStore } from './redis-store.ts'

export function createBudgetStoreFromConfig(config: Config, log: Logger): BudgetStore {
  if (config.redis === undefined) return openEmbeddedBudgetStore(resolve(config.store.dataDir))
  const redis = createRedisClient(config.redis, {
    commandTimeoutMs: config.store.commandTimeoutMs,
    name: 'tollgate-budgets',
    onError: (error) => log.debug({ err: error.message }, 'budgets redis error'),
  })
  return createRedisBudgetStore(redis, config.store.keyPrefix, true)
}

/** The book, read once before it is returned (a store that does not answer yet is read on the next refresh). */
export async function createBudgetBookFromConfig(
  config: Config,
  deps: {
    readonly log: Logger
    readonly accounts: AccountStore
    /** The plans in force (a reload replaces them); default the boot configuration's. */
    readonly plans?: () => PlansConfig
  },
): Promise<BudgetBook> {
  const book = createBudgetBook({
    store: createBudgetStoreFromConfig(config, deps.log),
    plans: deps.plans ?? (() => config.plans),
    defaults: config.budgets,
    refreshMs: config.budgets.refreshMs,
    members: async () =>
      (await deps.accounts.list()).map((a) => ({ id: a.id, username: a.username, tenant: a.tenant })),
    log: deps.log,
  })
  await book
    .refresh()
    .catch((error: unknown) =>
      deps.log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        'budgets could not be read at start',
      ),
    )
  return book
}

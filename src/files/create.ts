// The file quota as main.ts builds it: on Redis when the store is, otherwise
// file-quota.db in the data directory.
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import { createRedisClient, whenReady } from '../store/redis-client.ts'
import { openEmbeddedFileQuotaStore } from './embedded-quota-store.ts'
import { migrateFileQuota } from './quota-migration.ts'
import type { FileQuotaStore } from './quota-port.ts'
import { createRedisFileQuotaStore } from './redis-quota-store.ts'

export async function createFileQuotaStoreFromConfig(config: Config, log: Logger): Promise<FileQuotaStore> {
  if (config.redis === undefined) return openEmbeddedFileQuotaStore(resolve(config.store.dataDir))
  const redis = createRedisClient(config.redis, {
    commandTimeoutMs: config.store.commandTimeoutMs,
    name: 'tollgate-file-quota',
    onError: (error) => log.debug({ err: error.message }, 'file quota redis error'),
  })
  // Before the first upload: files counted in the old place count on. A failure (Redis not
  // up yet) is logged, not fatal: the next start tries again (what moved stays moved).
  await whenReady(redis)
    .then(() => migrateFileQuota(redis, config.store.keyPrefix, log))
    .catch((error: unknown) =>
      log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        'file quota: files counted under {tg} not carried over yet',
      ),
    )
  return createRedisFileQuotaStore(redis, config.store.keyPrefix)
}

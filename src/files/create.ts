// The file quota as main.ts builds it: on Redis when the store is, otherwise
// file-quota.db in the data directory.
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import { createRedisClient } from '../store/redis-client.ts'
import { openEmbeddedFileQuotaStore } from './embedded-quota-store.ts'
import type { FileQuotaStore } from './quota-port.ts'
import { createRedisFileQuotaStore } from './redis-quota-store.ts'

export function createFileQuotaStoreFromConfig(config: Config, log: Logger): FileQuotaStore {
  if (config.redis === undefined) return openEmbeddedFileQuotaStore(resolve(config.store.dataDir))
  const redis = createRedisClient(config.redis, {
    commandTimeoutMs: config.store.commandTimeoutMs,
    name: 'tollgate-file-quota',
    onError: (error) => log.debug({ err: error.message }, 'file quota redis error'),
  })
  return createRedisFileQuotaStore(redis, config.store.keyPrefix)
}

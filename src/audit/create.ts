// The audit log as main.ts builds it: on Redis when the store is (on the stores'
// connection), otherwise audit.db in the data directory.
import { resolve } from 'node:path'
import type { Config } from '../config/schema.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { openEmbeddedAuditStore } from './embedded-store.ts'
import { createAuditLog, type AuditLog } from './log.ts'
import { createRedisAuditStore } from './redis-store.ts'

export function createAuditLogFromConfig(config: Pick<Config, 'audit' | 'store'>, redis?: RedisConnection): AuditLog {
  const store =
    redis === undefined
      ? openEmbeddedAuditStore(resolve(config.store.dataDir))
      : createRedisAuditStore(redis, config.store.keyPrefix)
  return createAuditLog({ store, retentionDays: config.audit.retentionDays })
}

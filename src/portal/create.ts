// The key portal's sessions, put together from the configuration: in the embedded data
// directory, or in Redis (own connection) when the store is. main.ts calls this once and
// closes it on shutdown.
import type { AccountService } from '../accounts/service.ts'
import type { Config } from '../config/schema.ts'
import { embeddedPortalSessions, redisPortalSessions, type PortalSessionStore } from '../store/portal-sessions.ts'
import { closeRedis, createRedisClient } from '../store/redis-client.ts'
import type { LoginThrottle } from '../jwt/login-throttle.ts'
import { PortalSessions } from './sessions.ts'

export interface Portal {
  readonly sessions: PortalSessions
  close(): Promise<void>
}

export function createPortal(options: {
  config: Pick<Config, 'portal' | 'store' | 'redis'>
  accounts: AccountService
  throttle: LoginThrottle
}): Portal {
  const { store, redis: target } = options.config
  const redis =
    target === undefined
      ? undefined
      : createRedisClient(target, { commandTimeoutMs: store.commandTimeoutMs, name: 'tollgate-portal' })
  const sessionStore: PortalSessionStore =
    redis === undefined ? embeddedPortalSessions(store.dataDir) : redisPortalSessions(redis, store.keyPrefix)
  return {
    sessions: new PortalSessions({
      config: options.config.portal,
      store: sessionStore,
      accounts: options.accounts,
      throttle: options.throttle,
    }),
    async close() {
      await sessionStore.close()
      if (redis !== undefined) await closeRedis(redis)
    },
  }
}

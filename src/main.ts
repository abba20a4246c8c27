// The composition root: load config, build stores and adapters, listen, drain on SIGTERM.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import { buildApp, type App } from './app.ts'
import { trackConnections } from './http/drain.ts'
import { createAdminAuthenticator } from './auth/admin.ts'
import { createApiKeyAuthenticator } from './auth/api-key.ts'
import { createAdapter } from './backends/create.ts'
import { createRegistry, type BackendRegistry } from './backends/registry.ts'
import type { Config } from './config/schema.ts'
import { createKeyCache } from './keys/cache.ts'
import { createKeyEvents } from './keys/events.ts'
import { createKeyHasher } from './keys/format.ts'
import { createMeter, type Meter } from './keys/meter.ts'
import { KeyService } from './keys/service.ts'
import { createLimiterFromConfig } from './limits/index.ts'
import type { Limiter } from './limits/port.ts'
import { createLogger, type Logger } from './observability/logger.ts'
import { createMetrics, type Metrics } from './observability/metrics.ts'
import { openEmbeddedStores } from './store/embedded.ts'
import type { Stores } from './store/ports.ts'
import { createRedisClient } from './store/redis-client.ts'
import { createRedisStores } from './store/redis.ts'

export interface Gateway {
  readonly url: string
  readonly metricsUrl: string
  readonly app: App
  readonly stores: Stores
  readonly metrics: Metrics
  /** Stops accepting, lets in-flight requests finish up to the grace period, then closes. */
  shutdown(): Promise<void>
}

export class StartupError extends Error {
  override readonly name = 'StartupError'
}

export async function startGateway(config: Config, log: Logger = createLogger(config.logging.level)): Promise<Gateway> {
  const metrics = createMetrics()
  const stores = openStores(config, log)
  const secrets = resolveRuntimeSecrets(config, stores.kind, log)
  const registry: BackendRegistry = createRegistry(config, (name, backend) => createAdapter(name, backend, config.secrets))
  const limiter: Limiter = await createLimiterFromConfig(config, { log, metrics })
  const meter: Meter = createMeter({ store: stores.usage, log })
  const hash = createKeyHasher(secrets.keyHashSecret)
  // Key lookups go through an in-process cache that key changes on any instance invalidate.
  const keyCache = createKeyCache({ store: stores.keys })
  const keyEvents = createKeyEvents(config.store, keyCache, log)
  const keys = new KeyService({ store: stores.keys, hash, plans: config.plans, models: config.models.map((m) => m.name), onChange: keyEvents.changed })
  const app = buildApp({
    config, log, metrics, stores, registry, limiter, meter, keys,
    authenticate: createApiKeyAuthenticator({ lookup: keyCache, hash }),
    authenticateAdmin: createAdminAuthenticator(secrets.adminToken),
    spoolDir: join(resolve(config.store.dataDir), 'spool'),
    startedAt: Math.floor(Date.now() / 1000),
  })

  const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 30_000 }, app.handle)
  const metricsServer = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      metrics.registry.metrics().then((text) => {
        res.setHeader('content-type', metrics.registry.contentType)
        res.end(text)
      }, () => { res.statusCode = 500; res.end() })
    } else {
      res.statusCode = 404
      res.end('not found\n')
    }
  })
  // Bounded: with Redis down the gateway still starts, reading keys from the store uncached.
  await keyEvents.ready(2000)
  const connections = trackConnections(server)
  await listen(server, config.server.port, config.server.host)
  await listen(metricsServer, config.server.metricsPort, config.server.metricsHost)
  metrics.storeUp.set((await stores.ping()) ? 1 : 0)
  const url = addressOf(server)
  const metricsUrl = addressOf(metricsServer)
  log.info({ url, metricsUrl, port: (server.address() as AddressInfo).port, metricsPort: (metricsServer.address() as AddressInfo).port, store: stores.kind, models: config.models.length }, 'tollgate listening')

  let closing: Promise<void> | null = null
  const shutdown = (): Promise<void> => {
    closing ??= (async () => {
      log.info({ graceMs: config.server.shutdownGraceMs }, 'draining: no new requests; waiting for in-flight ones')
      app.beginShutdown()
      const closed = new Promise<void>((done) => server.close(() => done()))
      connections.closeUnused()
      const sweeper = setInterval(() => connections.closeUnused(), 100)
      void closed.finally(() => clearInterval(sweeper))
      const grace = new Promise<'timeout'>((done) => setTimeout(() => done('timeout'), config.server.shutdownGraceMs).unref())
      if ((await Promise.race([closed, grace])) === 'timeout') {
        log.warn('grace period over: closing the connections still open')
        server.closeAllConnections()
        await closed
      }
      metricsServer.closeAllConnections()
      await new Promise<void>((done) => metricsServer.close(() => done()))
      await meter.close()
      await keyEvents.close()
      await limiter.close()
      await registry.close()
      await stores.close()
      log.info('stopped')
    })()
    return closing
  }
  return { url, metricsUrl, app, stores, metrics, shutdown }
}

function openStores(config: Config, log: Logger): Stores {
  if (config.store.redisUrl) {
    const redis = createRedisClient(config.store.redisUrl, { commandTimeoutMs: config.store.commandTimeoutMs, name: 'tollgate' })
    redis.on('error', (err: Error) => log.debug({ err: err.message }, 'redis error'))
    return createRedisStores(redis, config.store.keyPrefix)
  }
  return openEmbeddedStores(resolve(config.store.dataDir))
}

interface RuntimeSecrets {
  readonly adminToken: string | undefined
  readonly keyHashSecret: string
}

/**
 * Embedded mode works with nothing set: a key-hash secret is made once and kept in the
 * data directory, and an admin token is made for this run and printed once. With Redis,
 * every instance must share the same secret, so it has to come from the environment.
 */
function resolveRuntimeSecrets(config: Config, kind: Stores['kind'], log: Logger): RuntimeSecrets {
  let keyHashSecret = config.secrets.keyHashSecret
  if (!keyHashSecret) {
    if (kind === 'redis') throw new StartupError('REDIS_URL is set but TOLLGATE_KEY_SECRET is not: every instance must hash keys with the same secret. Set TOLLGATE_KEY_SECRET (32+ random characters).')
    keyHashSecret = embeddedSecret(resolve(config.store.dataDir))
  }
  let adminToken = config.secrets.adminToken
  if (!adminToken) {
    if (kind === 'redis') {
      log.warn('TOLLGATE_ADMIN_TOKEN is not set: the admin API is disabled (with Redis, set it on every instance)')
    } else {
      adminToken = `tgadm_${randomBytes(24).toString('base64url')}`
      // Printed once, on stderr, for the operator; never logged.
      process.stderr.write(`\nTOLLGATE_ADMIN_TOKEN was not set. Admin token for this run:\n\n  ${adminToken}\n\nSet TOLLGATE_ADMIN_TOKEN to choose your own.\n\n`)
    }
  }
  return { adminToken, keyHashSecret }
}

function embeddedSecret(dataDir: string): string {
  const path = join(dataDir, 'key-hash.secret')
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    mkdirSync(dataDir, { recursive: true })
    const secret = randomBytes(32).toString('base64url')
    writeFileSync(path, secret, { mode: 0o600, flag: 'wx' })
    return secret
  }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((done, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => {
      server.off('error', fail)
      done()
    })
  })
}

function addressOf(server: Server): string {
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address === '::' ? '::1' : address.address}]` : address.address === '0.0.0.0' ? '127.0.0.1' : address.address
  return `http://${host}:${address.port}`
}

// The composition root: load config, build stores and adapters, listen, drain on SIGTERM.
import { randomBytes } from 'node:crypto'
import {
  adminTokenPath,
  ensureStoredAdminToken,
  readStoredAdminToken,
  watchStoredAdminToken,
} from './auth/admin-token.ts'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, Server } from 'node:http'
import { http } from './http/node-http.ts'
import type { AddressInfo } from 'node:net'
import { join, resolve } from 'node:path'
import packageJson from '../package.json' with { type: 'json' }
import { buildApp, type App } from './app.ts'
import { trackConnections } from './http/drain.ts'
import { removeStaleSpoolFiles } from './http/spool.ts'
import {
  addressOf,
  checkListenable,
  listenFailure,
  metricsListener,
  publicListener,
  type ListenerSpec,
} from './http/listen-check.ts'
import { createAdminAuthenticator, type AdminAuthenticator } from './auth/admin.ts'
import { createApiKeyAuthenticator, type ApiKeyAuthenticator } from './auth/api-key.ts'
import { createAuthThrottle, throttleAdmin, throttleApiKeys } from './auth/throttle.ts'
import { clientAddress } from './http/client-address.ts'
import { answerClientErrors } from './http/client-error.ts'
import { capConnectionsPerAddress } from './http/connection-cap.ts'
import { createCorridor } from './inference/corridor.ts'
import { createResponseCacheFromConfig } from './cache/index.ts'
import { createGuardrailsFromConfig } from './guardrails/create.ts'
import { createQueueFromConfig } from './queue/create.ts'
import { createBatchesFromConfig } from './batches/create.ts'
import { clientCalls } from './priority/client-calls.ts'
import { NO_TRACING, type Tracing } from './observability/tracing.ts'
import { createFileQuotaStoreFromConfig } from './files/create.ts'
import { createAuditLogFromConfig } from './audit/create.ts'
import { startAuditSweep } from './audit/log.ts'
import { createFileQuota } from './files/quota.ts'
import type { AccessTokenVerifier } from './auth/identity.ts'
import { createAdapter } from './backends/create.ts'
import { createCapacityFromConfig } from './capacity/create.ts'
import { CircuitBreaker } from './proxy/circuit-breaker.ts'
import { capacityReadings } from './capacity/view.ts'
import { readConfigFile, type LoadedConfig } from './config/load.ts'
import { describeRedisTarget } from './config/redis-target.ts'
import { MIN_SECRET_LENGTH, type Config } from './config/schema.ts'
import { createKeyCache } from './keys/cache.ts'
import { createKeyEvents } from './keys/events.ts'
import { createKeyHasher } from './keys/format.ts'
import { warnKeysOnMissingTiers } from './limits/tier-check.ts'
import { createMeter, type Meter } from './keys/meter.ts'
import { createStreamJournal } from './keys/stream-journal.ts'
import { KeyService } from './keys/service.ts'
import { createLimiterFromConfig } from './limits/index.ts'
import { createOutputReservationsFromConfig, withLearnedReservations } from './reservations/index.ts'
import { createFairSharesFromConfig, fairCapacityOf, withFairShares } from './fairness/index.ts'
import { createBudgetBookFromConfig } from './budgets/create.ts'
import type { OnBudgetThreshold } from './budgets/port.ts'
import type { Limiter } from './limits/port.ts'
import { createLogger, type Logger } from './observability/logger.ts'
import { createMetrics, type Metrics } from './observability/metrics.ts'
import { createConnectionOutage } from './observability/outage-log.ts'
import { openEmbeddedStores } from './store/embedded.ts'
import { securePrivateDataDir } from './store/data-dir.ts'
import { DataDirInUseError, lockDataDir, type DataDirLock } from './store/data-dir-lock.ts'
import type { Stores } from './store/ports.ts'
import { closeRedis, createRedisClient, type RedisConnection } from './store/redis-client.ts'
import { createRagAuth } from './jwt/create.ts'
import { createRedisStores } from './store/redis.ts'
import { createPortal } from './portal/create.ts'
import { saturationEvents, startKeyExpiryScan, withRateLimitEvents } from './events/sources.ts'
import { createWebhooksFromConfig } from './webhooks/create.ts'
import { budgetThresholdEvent, type Events } from './events/types.ts'
import { buildRuntime, retireRuntime } from './runtime/build.ts'
import { localFleet, redisFleet, type FleetReload } from './runtime/fleet.ts'
import { reloadMetrics } from './runtime/metrics.ts'
import { createReloader, type Reloader, type ReloadReport } from './runtime/reload.ts'
import { holdRuntime, type RuntimeSource } from './runtime/snapshot.ts'
import { estimateWaiting } from './tokenizer/counter.ts'
import { compactAfterBursts, compactHeap } from './compact-heap.ts'

/**
 * How long a shutdown waits, once the connections are closed, for calls still settling,
 * before their waiting token counts are estimated; then how long their writes get after that.
 */
const SETTLE_AT_SHUTDOWN_MS = 10_000
const LAST_WRITES_MS = 5_000

function settledWithin(app: App, ms: number): Promise<'settled' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((done) => {
    timer = setTimeout(() => done('timeout'), ms)
  })
  return Promise.race([app.settled().then(() => 'settled' as const), timeout]).finally(() => clearTimeout(timer))
}

export interface Gateway {
  readonly url: string
  readonly metricsUrl: string
  readonly app: App
  readonly stores: Stores
  readonly metrics: Metrics
  /** Publishes an event (the webhooks' outbox): what the budgets call on a threshold (events/types.ts). */
  readonly events: Events
  /** The runtime configuration in force (runtime/snapshot.ts). */
  readonly runtime: RuntimeSource
  /** Reads the configuration file again and puts it in force (SIGHUP, POST /admin/reload). */
  reload(): Promise<ReloadReport>
  /** Stops accepting, lets in-flight requests finish up to the grace period, then closes. */
  shutdown(): Promise<void>
}

export class StartupError extends Error {
  override readonly name = 'StartupError'
}

/** What a test (or an embedder) may supply instead of what main.ts would build. */
export interface GatewayOverrides {
  /** The RAG gateway's access-token verifier. */
  readonly accessTokens?: AccessTokenVerifier
  /**
   * How a reload reads the configuration file (`tollgate serve` passes its flags' overrides);
   * default: the file `config` came from, with this process's environment.
   */
  readonly load?: () => LoadedConfig
  /** `config` as loaded, with its files' hashes (default: the file is read again for them). */
  readonly loaded?: LoadedConfig
  /** Told once per budget threshold crossed in a period (the events outbox); default: nothing. */
  readonly onBudgetThreshold?: OnBudgetThreshold
  /**
   * A worker of `serve --workers N` (runtime/workers.ts): the primary checked the public port
   * and serves METRICS_PORT for every worker (this one opens none); the admin API's reloads
   * go through `adminReloader`, which tells the other workers.
   */
  readonly worker?: { readonly adminReloader: (reloader: Reloader) => Reloader }
}

export async function startGateway(
  config: Config,
  log: Logger = createLogger(config.logging.level),
  overrides: GatewayOverrides = {},
): Promise<Gateway> {
  // Before anything is opened or made: a port in use or a data directory another gateway
  // holds is said at once, and a fresh data directory gets no admin token printed by a
  // gateway that then fails.
  const listeners = {
    public: publicListener(config.server.host, config.server.port),
    metrics: metricsListener(config.server.metricsHost, config.server.metricsPort),
  }
  for (const spec of overrides.worker ? [] : [listeners.public, listeners.metrics]) {
    await checkListenable(spec).catch((err: unknown) => {
      throw new StartupError((err as Error).message)
    })
  }
  const dataLock = takeDataDir(config, log)
  const metrics = createMetrics()
  const tracing = await startTracing(config, log, metrics)
  const { stores, redis, settlements } = openStores(config, log, metrics)
  const secrets = resolveRuntimeSecrets(config, stores.kind, log)
  // Events and the webhooks that deliver them: publishing commits to their outbox, workers deliver.
  const webhooks = createWebhooksFromConfig(config, log)
  const events = webhooks.dispatcher
  // This gateway's name in the queue's lines and heartbeats, on the streams it journals, in its reload reports.
  const instance = randomBytes(6).toString('hex')
  // The configuration a call reads (plans, models and deployments, backends and their
  // capacity, the RAG services): one snapshot, swapped whole by a reload.
  const load = overrides.load ?? ((): LoadedConfig => readConfigFile({ path: config.source }))
  const runtimeParts = {
    adapterOf: (name: string, backend: Config['backends'][string], next: Config) =>
      createAdapter(name, backend, config.secrets, resolve(config.store.dataDir), next.models),
    // What each deployment can take, shared by the instances on the same Redis.
    capacityOf: createCapacityFromConfig(config, redis, log, saturationEvents(events)),
    startedAt: Math.floor(Date.now() / 1000),
  }
  const runtime = holdRuntime(await buildRuntime(overrides.loaded ?? bootFile(config, load), runtimeParts))
  const configMetrics = reloadMetrics(metrics.registry)
  configMetrics.inForce(runtime.current.hash, runtime.current.plansHash, runtime.current.loadedAt)
  // Budgets are one more dimension of the limiter's admission; a threshold crossed is an event.
  const budgets = await createBudgetBookFromConfig(config, {
    log,
    accounts: stores.accounts,
    plans: () => runtime.current.config.plans,
  })
  // A key's rate limit refusing a call is an event (sampled: once per key per window).
  const rateLimiter: Limiter = withRateLimitEvents(
    await createLimiterFromConfig(config, {
      log,
      metrics,
      budgets,
      ...(settlements === undefined ? {} : { settlements }),
      ownerOf: async (keyId) => (await stores.keys.get(keyId))?.owner ?? null,
      ...(stores.turnCommit === undefined ? {} : { budgetLedgerOn: stores.turnCommit }),
      plans: () => runtime.current.config.plans,
      onBudgetThreshold:
        overrides.onBudgetThreshold ??
        (async (event) => {
          await budgetThresholdEvent(events, event)
        }),
    }),
    events,
    config.limits.windowMs,
  )
  // Fair shares between parties under contention (fairness/): the limiter charges, the queue's capacity line reads.
  const fairShares = createFairSharesFromConfig(config, redis, log, () => runtime.current.config.plans, metrics)
  // A call without an output cap reserves what calls like it produced (reservations/).
  const limiter = withLearnedReservations(
    fairShares === undefined
      ? rateLimiter
      : withFairShares(rateLimiter, fairShares, () => runtime.current.config.plans, metrics),
    createOutputReservationsFromConfig(config, redis, log),
    () => runtime.current.config.plans,
    metrics,
  )
  // Uploads a crashed gateway was forwarding are of no use to anyone now.
  const spoolDir = join(resolve(config.store.dataDir), 'spool')
  const stale = await removeStaleSpoolFiles(spoolDir)
  if (stale > 0)
    log.info(
      { files: stale, dir: spoolDir },
      'removed uploads left in the spool by a gateway that stopped without cleaning up',
    )
  const meter: Meter = createMeter({ store: stores.usage, log })
  const streams = createStreamJournal({
    journal: stores.streams,
    instance,
    log,
    checkpointMs: config.store.streamCheckpointMs,
    onRecovered: () => metrics.usageRecovered.inc(),
  })
  const hash = createKeyHasher(secrets.keyHashSecret)
  // Key lookups go through an in-process cache that key changes on any instance invalidate.
  const keyCache = createKeyCache({ store: stores.keys })
  const keyEvents = createKeyEvents(config.redis, config.store, keyCache, log)
  const keys = new KeyService({
    store: stores.keys,
    hash,
    plans: () => runtime.current.config.plans,
    models: () => new Set(runtime.current.registry.models().map((m) => m.name)),
    onChange: keyEvents.changed,
    events,
  })
  let authenticate: ApiKeyAuthenticator = createApiKeyAuthenticator({ lookup: keyCache, hash })
  let authenticateAdmin: AdminAuthenticator = createAdminAuthenticator(secrets.adminToken)
  if (config.auth.maxFailures > 0) {
    const addressOf = (req: IncomingMessage): string => clientAddress(req, config.server.trustProxyHops)
    // One throttle per kind of credential: API-key failures never lock the admin out.
    authenticate = throttleApiKeys(authenticate, createAuthThrottle({ ...config.auth, name: 'api-keys' }), addressOf)
    authenticateAdmin = throttleAdmin(
      authenticateAdmin,
      createAuthThrottle({ ...config.auth, name: 'admin-token' }),
      addressOf,
    )
  }
  const fileQuotaStore = await createFileQuotaStoreFromConfig(config, log)
  // The per-deployment gauges read the configuration in force at scrape time.
  metrics.setCapacitySource(() => capacityReadings(runtime.current.capacity, runtime.current.config.models)())
  // Backends that keep refusing connections are tried last; the corridor and /admin/backends share it.
  const breaker = new CircuitBreaker()
  const responseCache = createResponseCacheFromConfig(config, { redis, log, metrics, budgets, secrets })
  // Changes made through the admin API, the CLI and the portal (and guardrail decisions), kept audit.retentionDays.
  const audit = createAuditLogFromConfig(config, redis)
  const auditSweep = startAuditSweep(audit, config.audit.sweepIntervalSeconds * 1000, log)
  const guardrails = createGuardrailsFromConfig(config, { metrics, audit, events })
  const corridor = createCorridor({
    config,
    runtime,
    authenticate,
    limiter,
    breaker,
    meter,
    metrics,
    ownership: stores.ownership,
    fileQuota: createFileQuota(fileQuotaStore),
    spoolDir,
    streams,
    cache: responseCache,
    guardrails,
    ...fairCapacityOf(fairShares, config.queue.fairShareReserve),
  })
  // Stored requests re-read their key by id when they run: a key revoked meanwhile fails them.
  const queue = createQueueFromConfig({
    config,
    log,
    metrics,
    limiter,
    corridor,
    keys: stores.keys,
    instance,
    // Room coming back and limits learned elsewhere reach every capacity a reload builds (they share their listeners).
    capacity: runtime.current.capacity,
    tracing,
    ...(fairShares === undefined ? {} : { fairness: fairShares }),
  })
  // Client requests in flight here: the batch runner yields to them (priority/client-calls.ts).
  const calls = clientCalls()
  const batches = createBatchesFromConfig({
    clientCalls: calls,
    config,
    log,
    runtime,
    corridor,
    queue,
    ownership: stores.ownership,
    keys: stores.keys,
    instance,
    events,
    guardrails,
  })
  // RAG gateway: accounts, signing keys, access-token verification, logins.
  const ragAuth = createRagAuth({ config, stores, keyHashSecret: secrets.keyHashSecret, metrics, log, events })
  await ragAuth.start()
  const { accounts, accessTokens, tokens } = ragAuth
  // The key portal's sessions; its sign-in counts failures with the RAG login's.
  const portal = createPortal({ config, accounts, throttle: ragAuth.loginThrottle })
  // A reload: the file read and validated as at boot, the next snapshot built beside the
  // running one and swapped in; what only the previous one used is closed once the calls
  // that started on it (live requests and running stored requests) are done.
  const reloader = createReloader({
    holder: runtime,
    load,
    build: (loaded, previous) => buildRuntime(loaded, runtimeParts, previous),
    retire: async (previous, next) => {
      // (Reloads come once the gateway listens: `app` is built by then.)
      await Promise.all([app.settledNow(), queue.settledNow()])
      await retireRuntime(previous, next)
    },
    // New plans: keys on a tier they no longer have are said, as at boot.
    applied: async (next, changed) => {
      if (changed.includes('plans')) await warnKeysOnMissingTiers(stores.keys, next.config.plans, log, 2000)
    },
    metrics: configMetrics,
    log,
    instance,
  })
  // reload --all: every instance on the same Redis, over pub/sub.
  const fleet: FleetReload =
    redis === undefined || config.redis === undefined
      ? localFleet(reloader)
      : redisFleet(
          { publisher: redis, redis: config.redis, keyPrefix: config.store.keyPrefix, instance, log },
          reloader,
        )
  const app = buildApp({
    clientCalls: calls,
    responseCache,
    guardrails,
    config,
    runtime,
    reloader: overrides.worker?.adminReloader(reloader) ?? reloader,
    fleet,
    instance,
    log,
    metrics,
    stores,
    limiter,
    breaker,
    budgets,
    meter,
    keys,
    authenticate,
    authenticateAdmin,
    corridor,
    queue,
    accounts,
    tokens,
    portalSessions: portal.sessions,
    // The portal's pages and routes: not even loaded when it is off.
    ...(config.portal.enabled ? { portalRoutes: await import('./portal/routes.ts') } : {}),
    audit,
    accessTokens: overrides.accessTokens ?? accessTokens,
    webhooks,
    tracing,
    batches,
  })

  const { headersTimeoutMs } = config.server
  const server = http.createServer(
    {
      keepAliveTimeout: 65_000,
      // No total: streams and large uploads are long. Slow bodies are bounded by their pace
      // (server.bodyMinBytesPerSecond), readers that stop by server.idleReaderTimeoutMs.
      requestTimeout: 0,
      headersTimeout: headersTimeoutMs,
      // How often Node looks for connections past headersTimeout (its default, 30 s, would
      // let a slowloris connection live up to twice the timeout).
      connectionsCheckingInterval: Math.min(1000, headersTimeoutMs),
      // The app refuses a missing Host itself, with a body in the contract's shape.
      requireHostHeader: false,
    },
    app.handle,
  )
  // An Expect other than 100-continue: the app answers it (417) like any other request.
  server.on('checkExpectation', app.handle)
  answerClientErrors(server)
  capConnectionsPerAddress(server, config.server.maxConnectionsPerAddress)
  const metricsServer = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      metrics.registry.metrics().then(
        (text) => {
          res.setHeader('content-type', metrics.registry.contentType)
          res.end(text)
        },
        () => {
          res.statusCode = 500
          res.end()
        },
      )
    } else {
      res.statusCode = 404
      res.end('not found\n')
    }
  })
  // Bounded: with Redis down the gateway still starts, reading keys from the store uncached.
  await keyEvents.ready(2000)
  await fleet.ready(2000)
  await queue.start()
  batches.start()
  // Deliveries left pending by an earlier process (or another instance) are scheduled now.
  await webhooks.dispatcher.start()
  const expiryScan = startKeyExpiryScan({
    keys: stores.keys,
    events,
    withinDays: config.webhooks.keyExpiringWithinDays,
    intervalMs: config.webhooks.expiryScanIntervalMs,
    lookbackMs: Math.min(7 * 86_400_000, (config.webhooks.retentionDays * 86_400_000) / 2),
    log,
  })
  void expiryScan
    .scan()
    .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'events: first key expiry scan failed'))
  // Streams a gateway that stopped left unsettled are charged now (on the embedded store,
  // all of them: they are an earlier process's), and then as often as the queue looks for
  // leases of gateways that stopped, by the same heartbeat.
  let recoveryFailing = false
  const recoverStreams = (): Promise<void> =>
    streams
      .recover((other) => queue.isAlive(other))
      .then(
        () => {
          recoveryFailing = false
        },
        (error: unknown) => {
          // Once per outage: the next pass tries again.
          if (!recoveryFailing)
            log.warn(
              { err: (error as Error).message },
              'stream journal: could not recover the streams of gateways that stopped; trying again later',
            )
          recoveryFailing = true
        },
      )
  await recoverStreams()
  const recoveryTimer = setInterval(() => void recoverStreams(), Math.ceil(config.queue.recoverAfterMs / 2))
  recoveryTimer.unref()
  // Keys assigned a tier the plans no longer have (another catalogue): said before listening.
  await warnKeysOnMissingTiers(stores.keys, config.plans, log, 2000)
  const ragMock = runtime.current.rag.mockUrl
  const connections = trackConnections(server)
  const compacted = compactHeap()
  const stopCompactions = compactAfterBursts(() => connections.idleForMs(), config.server.heapCompaction, log, metrics)
  await listen(server, listeners.public)
  if (!overrides.worker) await listen(metricsServer, listeners.metrics)
  metrics.storeUp.set((await stores.ping()) ? 1 : 0)
  const url = addressOf(server)
  dataLock?.announce(url) // the CLI calls this gateway there (cli/gateway-target.ts)
  const metricsUrl = overrides.worker ? '' : addressOf(metricsServer)
  const bound = server.address() as AddressInfo
  // (A worker of `serve --workers` has none: the primary serves /metrics.)
  const metricsBound = metricsServer.address() as AddressInfo | null
  log.info(
    {
      // The process to signal (SIGTERM drains, SIGHUP reloads), not the npm or npx above it.
      pid: process.pid,
      url,
      metricsUrl: metricsUrl || undefined,
      // What the sockets are bound to: 127.0.0.1 answers this machine only; 0.0.0.0 (HOST) the network.
      address: boundAddress(bound),
      metricsAddress: metricsBound ? boundAddress(metricsBound) : undefined,
      port: bound.port,
      metricsPort: metricsBound?.port,
      store: stores.kind,
      models: config.models.length,
      ragMock,
      configHash: runtime.current.hash,
      heapCompacted: compacted,
    },
    overrides.worker ? 'tollgate worker listening' : 'tollgate listening',
  )

  let closing: Promise<void> | null = null
  const shutdown = (): Promise<void> => {
    closing ??= (async () => {
      log.info({ graceMs: config.server.shutdownGraceMs }, 'draining: no new requests; waiting for in-flight ones')
      app.beginShutdown()
      // Calls still waiting in line are answered 503 now: they may go to another instance.
      // Stored requests stop starting here; those running may finish within the grace.
      queue.beginShutdown(config.server.shutdownGraceMs)
      const closed = new Promise<void>((done) => server.close(() => done()))
      connections.closeUnused()
      const sweeper = setInterval(() => connections.closeUnused(), 100)
      void closed.finally(() => clearInterval(sweeper))
      const grace = new Promise<'timeout'>((done) =>
        setTimeout(() => done('timeout'), config.server.shutdownGraceMs).unref(),
      )
      if ((await Promise.race([closed, grace])) === 'timeout') {
        log.warn('grace period over: closing the connections still open')
        server.closeAllConnections()
        await closed
      }
      // Calls whose clients left may still be settling (a cut-off stream's output being
      // counted, its usage written): their usage is metered before exit, however short the
      // grace. That work is bounded: after SETTLE_AT_SHUTDOWN_MS the token counts still
      // waiting (a tokenizer worker slow to start) are estimated, and the writes get a little longer.
      if ((await settledWithin(app, SETTLE_AT_SHUTDOWN_MS)) === 'timeout') {
        const estimated = estimateWaiting()
        if (estimated > 0) log.warn({ counts: estimated }, 'token counts still waiting at shutdown are estimated')
        if ((await settledWithin(app, LAST_WRITES_MS)) === 'timeout')
          log.warn('some calls were still settling at shutdown; their usage is lost')
      }
      metricsServer.closeAllConnections()
      await new Promise<void>((done) => metricsServer.close(() => done()))
      clearInterval(recoveryTimer)
      stopCompactions()
      // Stored requests still running after the grace are aborted; they run again elsewhere.
      await batches.close()
      await queue.close()
      expiryScan.close()
      // Deliveries still running after the grace are sent again by whoever runs next.
      await webhooks.close(Math.min(config.server.shutdownGraceMs, 5000))
      await meter.close()
      await keyEvents.close()
      await portal.close()
      auditSweep.stop()
      await audit.close()
      await ragAuth.close()
      await limiter.close()
      await fleet.close()
      await budgets.close()
      await runtime.current.registry.close()
      await runtime.current.rag.close()
      await fileQuotaStore.close()
      await stores.close()
      if (settlements !== undefined) await closeRedis(settlements)
      secrets.close()
      // The spans of the last calls are exported before exit (bounded by OTEL_EXPORTER_OTLP_TIMEOUT).
      await tracing.shutdown().catch((err: unknown) => log.warn({ err }, 'traces: the last spans were not exported'))
      dataLock?.release()
      log.info('stopped')
    })()
    return closing
  }
  return { url, metricsUrl, app, stores, metrics, events, runtime, reload: () => reloader.reload(), shutdown }
}

/** The boot's file as loaded again for its hashes; a configuration built without a readable file has none. */
function bootFile(config: Config, load: () => LoadedConfig): LoadedConfig {
  try {
    return { ...load(), config }
  } catch {
    return { config, hash: '', plansHash: null }
  }
}

/**
 * The stores, the Redis connection they use (when they do) for the rest that counts there,
 * and the settlements connection: what every call writes when it ends (its usage row, the
 * limiter's settle), sent together per turn of the event loop (redis-client.ts autoPipelining).
 */
function openStores(
  config: Config,
  log: Logger,
  metrics: Pick<Metrics, 'storeUp'>,
): { stores: Stores; redis?: RedisConnection; settlements?: RedisConnection } {
  if (config.redis !== undefined) {
    const redis = createRedisClient(config.redis, { commandTimeoutMs: config.store.commandTimeoutMs, name: 'tollgate' })
    const settlements = createRedisClient(config.redis, {
      commandTimeoutMs: config.store.commandTimeoutMs,
      name: 'tollgate-settlements',
      autoPipelining: true,
      onError: (err) => log.debug({ err: err.message }, 'redis settlements connection error'),
    })
    // The store's connection speaks for the gateway's Redis: its outage is logged once when
    // it starts (the client retries about twice a second) and once when it ends, and
    // tollgate_store_up follows it (TollgateStoreDown must not wait for a /readyz call).
    const outage = createConnectionOutage(log, 'Redis', describeRedisTarget(config.redis))
    redis.on('error', (err: Error) => {
      log.debug({ err: err.message }, 'redis error')
      outage.down(err)
      metrics.storeUp.set(0)
    })
    redis.on('ready', () => {
      outage.up()
      metrics.storeUp.set(1)
    })
    return { stores: createRedisStores(redis, config.store.keyPrefix, settlements), redis, settlements }
  }
  return { stores: openEmbeddedStores(resolve(config.store.dataDir)) }
}

interface RuntimeSecrets {
  /** Asked on every admin call: a stored token may be replaced while the gateway runs. */
  readonly adminToken: () => string | undefined
  readonly keyHashSecret: string
  /** Stops watching the stored admin token. */
  close(): void
}

/**
 * Embedded mode works with nothing set: a key-hash secret and an admin token are made on
 * the first start and kept in the data directory; the token is printed that once, and
 * `tollgate admin-token` shows or replaces it later. With Redis, every instance must share
 * them, so they have to come from the environment.
 */
function resolveRuntimeSecrets(config: Config, kind: Stores['kind'], log: Logger): RuntimeSecrets {
  const dataDir = resolve(config.store.dataDir)
  if (config.secrets.weak.length > 0) {
    log.warn(
      { secrets: config.secrets.weak },
      `TOLLGATE_ALLOW_WEAK_SECRETS is set and these secrets are shorter than ${MIN_SECRET_LENGTH} characters: fine on a development machine, never in production`,
    )
  }
  let keyHashSecret = config.secrets.keyHashSecret
  if (!keyHashSecret) {
    if (kind === 'redis')
      throw new StartupError(
        'the store is on Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS) but TOLLGATE_KEY_SECRET is not set: every instance must hash keys with the same secret. Set TOLLGATE_KEY_SECRET (32+ random characters).',
      )
    keyHashSecret = embeddedSecret(dataDir)
  }
  const fromEnv = config.secrets.adminToken
  // TOLLGATE_ADMIN_TOKEN equal to the stored token is the README's `export
  // TOLLGATE_ADMIN_TOKEN=$(npx tollgate admin-token)` in the shell that starts the gateway:
  // the stored token, so `tollgate admin-token --reset` still replaces it (a leaked token
  // must stop working, whatever shell the gateway was started from).
  if (fromEnv && !(kind === 'embedded' && readStoredAdminToken(dataDir) === fromEnv))
    return { adminToken: () => fromEnv, keyHashSecret, close: () => undefined }
  if (kind === 'redis') {
    log.warn('TOLLGATE_ADMIN_TOKEN is not set: the admin API is disabled (with Redis, set it on every instance)')
    return { adminToken: () => undefined, keyHashSecret, close: () => undefined }
  }
  const stored = ensureStoredAdminToken(dataDir)
  let token: string | undefined = stored.token
  if (stored.created) {
    // Printed this once, on stderr, for the operator; never logged.
    process.stderr.write(
      `\nTOLLGATE_ADMIN_TOKEN is not set, so an admin token was made and kept in ${adminTokenPath(dataDir)}:\n\n  ${token}\n\n` +
        `\`${adminTokenCommand()}\` shows it again (--reset replaces it); set TOLLGATE_ADMIN_TOKEN to choose your own.\n\n`,
    )
  } else {
    log.info(
      { file: adminTokenPath(dataDir) },
      `admin token: the one kept in the data directory (\`${adminTokenCommand()}\` shows it)`,
    )
  }
  const stop = watchStoredAdminToken(dataDir, (next) => {
    if (next === null || next === token) return
    token = next
    log.info('admin token replaced (tollgate admin-token --reset): the previous one no longer works')
  })
  return { adminToken: () => token, keyHashSecret, close: stop }
}

/** The command that shows the stored admin token from another shell: it names a data directory that is not the default. */
function adminTokenCommand(): string {
  const dir = process.env.TOLLGATE_DATA_DIR
  return dir ? `TOLLGATE_DATA_DIR=${JSON.stringify(resolve(dir))} npx tollgate admin-token` : 'npx tollgate admin-token'
}

function embeddedSecret(dataDir: string): string {
  const path = join(dataDir, 'key-hash.secret')
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    const secret = randomBytes(32).toString('base64url')
    writeFileSync(path, secret, { mode: 0o600, flag: 'wx' })
    return secret
  }
}

/**
 * The data directory for this process alone (embedded mode: its SQLite files are this
 * gateway's), its modes made owner-only first. With Redis, instances may share one.
 */
function takeDataDir(config: Config, log: Logger): DataDirLock | undefined {
  const dataDir = resolve(config.store.dataDir)
  const changes = securePrivateDataDir(dataDir)
  if (changes.length > 0)
    log.warn(
      { dir: dataDir, changes },
      'data directory: modes tightened to owner-only (0700 directories, 0600 files), where allowed: it holds password and session hashes and secrets',
    )
  if (config.redis !== undefined) return undefined
  try {
    return lockDataDir(dataDir)
  } catch (err) {
    if (err instanceof DataDirInUseError) throw new StartupError(err.message)
    throw err
  }
}

function listen(server: Server, spec: ListenerSpec): Promise<void> {
  return new Promise((done, fail) => {
    // Taken between the check and now (rare): the same message.
    const failed = (err: NodeJS.ErrnoException): void => fail(new StartupError(listenFailure(spec, err)))
    server.once('error', failed)
    server.listen(spec.port, spec.host, () => {
      server.off('error', failed)
      done()
    })
  })
}

function boundAddress(address: AddressInfo): string {
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
}

/**
 * Traces on: the OpenTelemetry SDK is imported now, and only now (off, not a module of it
 * is loaded). Where spans go and how they are sampled come from the OTEL_* variables.
 */
async function startTracing(config: Config, log: Logger, metrics: Metrics): Promise<Tracing> {
  if (!config.tracing.enabled) return NO_TRACING
  const { createOtelTracing } = await import('./observability/otel.ts')
  return createOtelTracing({
    captureContent: config.tracing.captureContent,
    serviceName: 'tollgate',
    serviceVersion: packageJson.version,
    log,
    metrics,
  })
}

// `tollgate serve --workers N|auto`: one gateway process per core, behind one port.
//
// The primary (this process, as started) runs no gateway. It checks the ports, forks N
// workers with node:cluster, and from then on only:
//   - shares the public listener: each worker's listen() goes through the primary, which
//     hands connections out in turn (cluster's round-robin), so calls spread over the cores;
//   - serves METRICS_PORT itself: one /metrics page, the workers' registries asked over IPC
//     and added up (counters and histograms summed; the gauges below as their table says);
//   - passes SIGHUP to every worker, and a reload one worker took through the admin API to
//     the others, so that every worker runs the same file;
//   - on SIGTERM or SIGINT, passes it on, waits for every worker to drain and exit, and
//     exits after the last one (1 if one of them failed to stop cleanly);
//   - replaces a worker that dies on its own (not during a shutdown), after a second; one
//     that cannot even start (a bad port, a refused configuration) stops them all.
//
// Each worker is a whole gateway: an instance of a fleet on one Redis (docs/fleet.md),
// with its own instance id, queue workers, heartbeats and sweeps, all of which already
// run safely side by side on many hosts. Limits are exact across workers exactly as they
// are across instances: the counters are in Redis, moved by one script per call.
//
// The embedded store is refused for N > 1, with a message naming REDIS_URL. Its SQLite
// files are one process's (store/data-dir-lock.ts), and it keeps its rate-limit windows in
// that process's memory: N processes would each count a key's limit for themselves (N
// times the limit), and putting the store behind the primary would add an IPC round trip
// to every call's admission and settlement, the very wait a single call cannot afford
// (issue 40, item 1), to gain cores that a single embedded gateway rarely needs.
import cluster, { type Worker } from 'node:cluster'
import { createServer, type Server } from 'node:http'
import { availableParallelism } from 'node:os'
import {
  AggregatorRegistry,
  Gauge,
  type MetricObjectWithValues,
  type MetricValue,
  type Registry,
  type RegistryContentType,
} from 'prom-client'
import type { Config } from '../config/schema.ts'
import { addressOf, checkListenable, listenFailure, metricsListener, publicListener } from '../http/listen-check.ts'
import type { Logger } from '../observability/logger.ts'
import type { Reloader } from './reload.ts'

/** The messages between the primary and its workers (over cluster's IPC channel). */
type ToWorker = { readonly tollgate: 'metrics'; readonly id: number }
type ToPrimary =
  | { readonly tollgate: 'ready'; readonly url: string }
  | {
      readonly tollgate: 'metrics'
      readonly id: number
      readonly metrics: MetricObjectWithValues<MetricValue<string>>[]
    }
  | { readonly tollgate: 'reloaded' }

/** How long a scrape waits for the workers' registries; a worker later than that is left out of the page. */
const SCRAPE_WAIT_MS = 2_000
/** A worker that died on its own is replaced after this; more than RESTARTS_ALLOWED in RESTART_WINDOW_MS stops the gateway. */
const RESTART_DELAY_MS = 1_000
const RESTARTS_ALLOWED = 5
const RESTART_WINDOW_MS = 60_000

/**
 * How a gauge's samples from N workers become one, where summing them would lie. Every
 * other gauge (calls in flight, open streams, queue workers running) and every counter and
 * histogram is summed: each worker counts its own share of the same gateway.
 */
export const GAUGE_AGGREGATION: Readonly<Record<string, 'min' | 'max'>> = {
  // Up only when every worker reaches the store: one worker cut off is an outage for its calls.
  tollgate_store_up: 'min',
  // 1 for a mode any worker is in: an alert on fail_open must fire when one worker is.
  tollgate_limiter_mode: 'max',
  // Read from the shared lines and the shared capacity: every worker reads the same value.
  tollgate_queue_depth: 'max',
  tollgate_queue_oldest_wait_seconds: 'max',
  tollgate_deployment_remaining_requests: 'max',
  tollgate_deployment_remaining_tokens: 'max',
  tollgate_deployment_inflight: 'max',
  tollgate_deployment_cooling_down: 'max',
  tollgate_deployment_cooldown_seconds: 'max',
  tollgate_jwt_signing_key_expiry_timestamp_seconds: 'max',
  // 1 per configuration in force; two hashes at once show workers out of step.
  tollgate_config_info: 'max',
  // 0 when any worker refused its last reload; the oldest configuration still in force.
  tollgate_config_last_reload_successful: 'min',
  tollgate_config_last_reload_success_timestamp_seconds: 'min',
}

/** `--workers`: a whole number 1 to 256, or `auto` (one per core this process may use); absent is 1. */
export function workerCount(flag: string | undefined, cores: () => number = availableParallelism): number {
  if (flag === undefined) return 1
  if (flag === 'auto') return Math.max(1, cores())
  if (!/^\d{1,3}$/.test(flag) || Number(flag) < 1 || Number(flag) > 256)
    throw new Error(
      `--workers must be a number of processes, 1 to 256, or auto (one per core), got "${flag.slice(0, 20)}"`,
    )
  return Number(flag)
}

/** Why this configuration cannot run `count` workers, or undefined when it can. */
export function workersRefusal(
  count: number,
  config: Pick<Config, 'redis'>,
  flag: string | undefined,
): string | undefined {
  if (count <= 1 || config.redis !== undefined) return undefined
  return (
    `--workers ${flag ?? count} runs ${count} gateway processes, which share their keys, usage and rate-limit counters only through Redis: ` +
    'the embedded store belongs to one process (its limits would be counted once per worker). ' +
    'Set REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS) and TOLLGATE_KEY_SECRET, or run one process (no --workers); docs/operating.md, "Every core".'
  )
}

/** Whether this process is a worker forked by runPrimary (it then runs one gateway as usual, with workerSide()). */
export const isWorker = (): boolean => cluster.isWorker

export interface PrimaryOptions {
  readonly count: number
  readonly config: Config
  readonly log: Logger
}

export interface Primary {
  /** Drains every worker, as SIGTERM does, then exits. */
  stop(signal: NodeJS.Signals): void
}

/** Runs the primary until the workers are gone; resolves once every worker listens. */
export async function runPrimary({ count, config, log }: PrimaryOptions): Promise<Primary> {
  const ready = new Map<number, { worker: Worker; url: string }>()
  let stopping = false
  let started = false
  const restarts: number[] = []
  let scrapes = 0
  const pendingScrapes = new Map<number, { add: (worker: number, m: ToPrimaryMetrics) => void }>()
  type ToPrimaryMetrics = Extract<ToPrimary, { tollgate: 'metrics' }>['metrics']
  let exitCode = 0
  let finished = false
  const metricsServer = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.statusCode = 404
      res.end('not found\n')
      return
    }
    scrape().then(
      (registry) =>
        registry.metrics().then((text) => {
          res.setHeader('content-type', registry.contentType)
          res.end(text)
        }),
      () => {
        res.statusCode = 500
        res.end()
      },
    )
  })
  // Signals before the workers listen are handled too: none ends the primary without them.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => stopAll(signal))
  process.on('SIGHUP', () => {
    // Workers still starting read the file as they start; only the ready ones are told.
    for (const { worker } of ready.values()) worker.process.kill('SIGHUP')
  })
  const publicSpec = publicListener(config.server.host, config.server.port)
  const metricsSpec = metricsListener(config.server.metricsHost, config.server.metricsPort)
  // Said once, here, rather than by every worker (which skip the check: the port is the primary's).
  await checkListenable(publicSpec).catch((err: unknown) => {
    throw startupError((err as Error).message)
  })
  if (config.limits.insuranceInstances < count)
    log.warn(
      { workers: count, insuranceInstances: config.limits.insuranceInstances },
      'limits.insuranceInstances is below the number of workers: each worker is an instance; while Redis is down each enforces 1/insuranceInstances of a limit in memory (docs/fleet.md)',
    )
  await listenOn(metricsServer, metricsSpec.host, metricsSpec.port).catch((err: NodeJS.ErrnoException) => {
    throw startupError(listenFailure(metricsSpec, err))
  })

  // The workers run the same command (process.argv), with the primary's Node flags.
  const fork = (): Worker => cluster.fork()
  let resolveStarted!: (url: string) => void
  let failStart!: (err: Error) => void
  const allStarted = new Promise<string>((done, fail) => {
    resolveStarted = done
    failStart = fail
  })

  function stopAll(signal: NodeJS.Signals): void {
    if (stopping) return
    stopping = true
    const workers = Object.values(cluster.workers ?? {})
    log.info({ signal, workers: workers.length }, 'shutting down: every worker drains')
    for (const worker of workers) worker?.process.kill(signal)
    if (workers.length === 0) finish()
  }

  cluster.on('message', (worker: Worker, message: unknown) => {
    const m = message as Partial<ToPrimary> | null
    if (m?.tollgate === 'ready' && typeof m.url === 'string') {
      ready.set(worker.id, { worker, url: m.url })
      if (!started && ready.size === count) {
        started = true
        resolveStarted(m.url)
      }
    } else if (m?.tollgate === 'metrics' && typeof m.id === 'number' && Array.isArray(m.metrics)) {
      pendingScrapes.get(m.id)?.add(worker.id, m.metrics)
    } else if (m?.tollgate === 'reloaded') {
      // The admin API reached one worker; the others read the file too (SIGHUP, as an operator would send).
      for (const other of ready.values()) if (other.worker.id !== worker.id) other.worker.process.kill('SIGHUP')
    }
  })
  cluster.on('exit', (worker, code, signal) => {
    ready.delete(worker.id)
    const left = Object.keys(cluster.workers ?? {}).length
    if (stopping) {
      if (code !== 0) exitCode = 1
      if (left === 0) finish()
      return
    }
    if (!started) {
      // It said why on stderr (a port, the configuration, Redis): the others go too.
      stopAll('SIGTERM')
      exitCode = code === 0 || code === null ? 1 : code
      failStart(
        startupError(`a worker (pid ${worker.process.pid}) stopped while starting (exit ${code ?? signal}); see above`),
      )
      if (left === 0) finish()
      return
    }
    const now = Date.now()
    restarts.push(now)
    while (restarts.length > 0 && (restarts[0] ?? now) < now - RESTART_WINDOW_MS) restarts.shift()
    if (restarts.length > RESTARTS_ALLOWED) {
      log.error(
        { pid: worker.process.pid, code, signal, restarts: restarts.length },
        'workers keep dying: stopping the gateway',
      )
      exitCode = 1
      stopAll('SIGTERM')
      if (left === 0) finish()
      return
    }
    log.error({ pid: worker.process.pid, code, signal }, 'a worker stopped on its own: starting another in a second')
    setTimeout(() => {
      if (!stopping) fork()
    }, RESTART_DELAY_MS).unref()
  })

  function finish(): void {
    if (finished) return
    finished = true
    metricsServer.closeAllConnections()
    metricsServer.close(() => {
      log.info({ exitCode }, 'stopped: every worker has exited')
      process.exit(exitCode)
    })
  }

  /** Every ready worker's registry, added up (workers that do not answer within SCRAPE_WAIT_MS are left out). */
  const scrape = (): Promise<Registry<RegistryContentType>> => {
    const id = ++scrapes
    const asked = [...ready.values()].map((r) => r.worker)
    const answers = new Map<number, ToPrimaryMetrics>()
    return new Promise<Registry<RegistryContentType>>((done) => {
      const settle = (): void => {
        clearTimeout(timer)
        pendingScrapes.delete(id)
        done(aggregate([...answers.values()], { running: ready.size, answered: answers.size }))
      }
      const timer = setTimeout(settle, SCRAPE_WAIT_MS)
      pendingScrapes.set(id, {
        add: (worker, metrics) => {
          answers.set(worker, metrics)
          if (answers.size === asked.length) settle()
        },
      })
      if (asked.length === 0) settle()
      for (const worker of asked) worker.send({ tollgate: 'metrics', id } satisfies ToWorker)
    })
  }

  for (let i = 0; i < count && !stopping; i++) fork()
  const url = await allStarted
  log.info(
    {
      // The process to signal: SIGTERM drains every worker, SIGHUP reloads every worker.
      pid: process.pid,
      url,
      metricsUrl: addressOf(metricsServer),
      workers: count,
      workerPids: [...ready.values()].map((r) => r.worker.process.pid),
    },
    'tollgate listening',
  )
  return { stop: stopAll }
}

/**
 * A worker's side: answers the primary's scrapes from its registry and says when it
 * listens. Called once its gateway listens.
 */
export function workerSide(gateway: { readonly url: string; readonly metrics: { readonly registry: Registry } }): void {
  process.on('message', (message: unknown) => {
    const m = message as Partial<ToWorker> | null
    if (m?.tollgate !== 'metrics' || typeof m.id !== 'number') return
    const id = m.id
    gateway.metrics.registry.getMetricsAsJSON().then(
      (metrics) => send({ tollgate: 'metrics', id, metrics }),
      () => send({ tollgate: 'metrics', id, metrics: [] }),
    )
  })
  send({ tollgate: 'ready', url: gateway.url })
}

/**
 * The admin API's reloader in a worker: a reload it takes (POST /admin/reload, `tollgate
 * reload`) is passed on to the other workers, which read the same file. A refused file is
 * not: they would refuse it too. (SIGHUP and a fleet's reload reach every worker already.)
 */
export function reloadingSiblings(reloader: Reloader): Reloader {
  return {
    async reload() {
      const report = await reloader.reload()
      if (report.outcome === 'applied' || report.outcome === 'unchanged') send({ tollgate: 'reloaded' })
      return report
    },
  }
}

function send(message: ToPrimary): void {
  // The channel is gone once the primary is: the worker is about to exit (cluster's own rule).
  if (process.connected) process.send?.(message)
}

function aggregate(
  perWorker: ReadonlyArray<MetricObjectWithValues<MetricValue<string>>[]>,
  workers: { running: number; answered: number },
): Registry<RegistryContentType> {
  const patched = perWorker.map((metrics) =>
    metrics.map((metric) => {
      const how = GAUGE_AGGREGATION[metric.name]
      return how === undefined ? metric : { ...metric, aggregator: how }
    }),
  )
  const registry = AggregatorRegistry.aggregate(patched)
  const gauge = new Gauge({
    name: 'tollgate_workers',
    help: 'Gateway processes (serve --workers): running now, and scraped (those whose registries this page adds up)',
    labelNames: ['state'],
    registers: [registry],
  })
  gauge.set({ state: 'running' }, workers.running)
  gauge.set({ state: 'scraped' }, workers.answered)
  return registry
}

function listenOn(server: Server, host: string, port: number): Promise<void> {
  return new Promise((done, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => {
      server.off('error', fail)
      done()
    })
  })
}

function startupError(message: string): Error {
  const error = new Error(message)
  error.name = 'StartupError'
  return error
}

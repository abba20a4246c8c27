// The job runner on Redis: BullMQ. A stored request whose turn has come is a BullMQ job
// (its id is the request's id; the request itself lives in the queue store); workers on
// every instance take jobs from one queue, so a request accepted by one instance runs on
// whichever has a free worker. BullMQ brings what a queue must get right and that is
// hard to hand-roll: blocking waits instead of polling, locks renewed while a job runs,
// jobs of a gateway that died given to another worker (stalled-job recovery), and
// delayed jobs that wake when due. Only heads of lines are ever jobs (see service.ts),
// which is what keeps one key's thousand waiting requests from taking every worker.
//
// A request accepted by an instance with a free worker, and at the head of its line at
// once, does not go through BullMQ: it is leased to that instance (QueueStore.submit) and
// runs there (claim), saving the job's add, the wake-up of a worker and the second read of
// the record. Jobs and such runs share the instance's `concurrency` workers.
//
// Sharded (issue #25, `shards`): one BullMQ queue per shard of the queue store, each under
// its shard's hash tag (`<prefix>{q<n>}:bull:`), so a cluster spreads their scripts over
// its masters. A request's job goes to the queue of the shard its id names. Every
// instance runs a BullMQ worker on every queue; they share the instance's `concurrency`
// workers, and a job that waits for one waits in priority order (lower first, then in the
// order it came), so a tier's priority holds across shards among the jobs an instance
// holds. The unsharded queue (`{tg}`) is served too: the jobs a gateway of an earlier
// version left there, or adds during an upgrade, run; it costs an idle worker's blocking
// wait, and can go once no such gateway and no request of that layout are left.
import { createRequire } from 'node:module'
import type * as BullMQ from 'bullmq'
import type { ConnectionOptions, Job, Worker } from 'bullmq'
import type { Cluster } from 'ioredis'
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import { clusterOptions, ioredis, reconnectDelay, sentinelOptions } from '../store/redis-client.ts'
import { queueShardNamespace, redisNamespace } from '../store/redis-kit.ts'
import type { Held, JobRunner, Processor, RequestRef } from './ports.ts'
import { shardOfId } from './shards.ts'

export interface BullmqRunnerOptions {
  /** The store's Redis: a URL, or any of the three topologies. */
  readonly redis: RedisTarget | string
  /** The gateway's store.keyPrefix: BullMQ's keys go under `<prefix>{tg}:bull:` (sharded: `<prefix>{q<n>}:bull:`). */
  readonly keyPrefix: string
  /** The queue store's shards (queue.shards): one BullMQ queue each. Without: one queue under `{tg}`. */
  readonly shards?: number
  readonly log: Logger
  /** Longest wait for Redis when adding a job. */
  readonly commandTimeoutMs: number
  /** The queue's name; tests and benches may use their own. */
  readonly name?: string
  /**
   * How long a running job's lock lasts without renewal (BullMQ lockDuration): a job of a
   * gateway that died is run again by another worker within about 1.5 times this.
   */
  readonly recoverAfterMs?: number
}

const NEVER = new AbortController().signal
const requireCjs = createRequire(import.meta.url)
/** How long a close waits on Redis before it gives up on it. */
const CLOSE_MS = 2000
/** How long a forced close waits for BullMQ to let go of its connections. */
const DISCONNECT_MS = 500

/**
 * Whether a worker error is its connection failing (refused, reset, closed, reconnecting):
 * repeated about twice a second while Redis is away, and said once by the store's own
 * connection (main.ts), so only at debug level here.
 */
function isConnectionError(error: Error): boolean {
  return (
    typeof (error as NodeJS.ErrnoException).code === 'string' ||
    /\b(connect|connection|closed|reconnecting)\b/i.test(error.message)
  )
}

/** Whether `work` settled within `ms` (its failure counts as settled). */
async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), ms)
  })
  const settled = work.then(
    () => true,
    () => true,
  )
  const outcome = await Promise.race([settled, late])
  clearTimeout(timer)
  return outcome
}

/**
 * BullMQ's connection for the queue (adds jobs: fails fast) or the worker (blocks on
 * purpose, retries for ever). One server and Sentinel: options BullMQ connects with
 * itself. A cluster: a client made here (BullMQ takes a cluster only as one), which
 * `owned` lists for close(), shared by every queue (or every worker) of the runner.
 * BullMQ's keys of one queue are all under one hash tag, so each of its scripts stays on
 * one slot.
 */
function connectionFor(
  target: RedisTarget,
  role: 'queue' | 'worker',
  commandTimeoutMs: number,
  log: Logger,
  owned: Cluster[],
): ConnectionOptions {
  const per =
    role === 'queue'
      ? { commandTimeout: commandTimeoutMs, connectionName: 'tollgate-queue' }
      : { maxRetriesPerRequest: null, connectionName: 'tollgate-queue-worker' }
  const offline = { enableOfflineQueue: role === 'worker' }
  if (target.kind === 'standalone') return { url: target.url, ...per, ...(role === 'queue' ? offline : {}) }
  if (target.kind === 'sentinel')
    return {
      ...sentinelOptions(target, { ...per, ...(role === 'queue' ? offline : {}) }),
      retryStrategy: (attempt: number) => reconnectDelay(attempt, 2000),
    }
  const cluster = new (ioredis().Cluster)(
    target.nodes.map((n) => ({ host: n.host, port: n.port })),
    clusterOptions(target, per, {
      lazyConnect: false,
      retryStrategy: (attempt) => reconnectDelay(attempt, 2000),
      connectTimeout: Math.max(commandTimeoutMs, 1000),
      enableOfflineQueue: role === 'worker',
    }),
  )
  cluster.on('error', (err: Error) => log.debug({ err: err.message, role }, 'queue redis cluster error'))
  owned.push(cluster)
  return cluster
}

export function createBullmqRunner(options: BullmqRunnerOptions): JobRunner {
  // Loaded here, not at import: a gateway on the embedded store never pays for it (about 11 MB of RSS).
  const { DelayedError, Queue, Worker } = requireCjs('bullmq') as typeof BullMQ
  const name = options.name ?? 'requests'
  const unsharded = `${redisNamespace(options.keyPrefix)}bull`
  const { shards } = options
  const shardPrefix = (n: number): string => `${queueShardNamespace(options.keyPrefix, n)}bull`
  /**
   * The queues this instance's workers serve: every shard's, and (sharded) the unsharded
   * one, where a gateway of an earlier version may still add jobs during an upgrade and
   * where a request of that layout is scheduled again (one id, one queue: BullMQ then
   * ignores a second job for it).
   */
  const served =
    shards === undefined ? [unsharded] : [...Array.from({ length: shards }, (_, n) => shardPrefix(n)), unsharded]
  const { log } = options
  const target: RedisTarget =
    typeof options.redis === 'string' ? { kind: 'standalone', url: options.redis } : options.redis
  const owned: Cluster[] = []
  // Adding a job is on a client's request path: fail fast rather than queue commands
  // while Redis is away. The worker's connections block on purpose and retry for ever.
  const queueConnection = connectionFor(target, 'queue', options.commandTimeoutMs, log, owned)
  const queues = new Map<string, BullMQ.Queue>()
  /** Set as close() closes the queues: none is opened after (its connection would outlive the runner). */
  let queuesClosed = false
  const queueAt = (prefix: string): BullMQ.Queue => {
    const known = queues.get(prefix)
    if (known !== undefined) return known
    if (queuesClosed) throw new StoreUnavailableError("the queue's runner is closed")
    const opened = new Queue(name, {
      prefix,
      connection: queueConnection,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: true, attempts: 1 },
    })
    opened.on('error', (err: Error) => log.debug({ err: err.message }, 'queue redis error'))
    queues.set(prefix, opened)
    return opened
  }
  /**
   * The queue of request `id`: the shard its id names (whatever queue.shards is now, so
   * every instance agrees), or the unsharded queue for an id without one.
   */
  const queueOf = (id: string): BullMQ.Queue => {
    const n = shards === undefined ? null : shardOfId(id)
    return queueAt(n === null ? unsharded : shardPrefix(n))
  }
  const workers: Worker[] = []
  let started = false
  let processor: Processor | null = null
  let closing = false
  const timers = new Set<NodeJS.Timeout>()
  /** Runs on a claimed worker, with how to stop them. */
  const claimedRuns = new Map<Promise<void>, AbortController>()
  /** BullMQ jobs running here: what a close waits for, within its grace. */
  const jobRuns = new Set<Promise<unknown>>()
  /** The workers whose connection to Redis is up now (their backend's ready/close/error events). */
  const reachable = new Set<Worker>()

  // The instance's workers, shared by BullMQ's jobs (which wait for one) and claimed runs
  // (which only take one that is free).
  let free = 0
  /** Jobs waiting for a worker, lower priority first, then in the order they came. */
  const waiting: Array<{ readonly priority: number; readonly take: () => void }> = []
  const giveBack = (): void => {
    const next = waiting.shift()
    if (next === undefined) free++
    else next.take()
  }
  /** A worker for a job; false when the job was stopped while it waited. */
  const workerFor = (signal: AbortSignal, priority: number): Promise<boolean> => {
    if (free > 0) {
      free--
      return Promise.resolve(true)
    }
    return new Promise((done) => {
      const entry = {
        priority,
        take: (): void => {
          signal.removeEventListener('abort', stop)
          done(true)
        },
      }
      const stop = (): void => {
        const at = waiting.indexOf(entry)
        if (at !== -1) waiting.splice(at, 1)
        done(false)
      }
      let at = waiting.length
      while (at > 0 && (waiting[at - 1]?.priority ?? 0) > priority) at--
      waiting.splice(at, 0, entry)
      signal.addEventListener('abort', stop, { once: true })
    })
  }

  /** Wakes a delayed job when due (see start); BullMQ's own delay does once this instance closes. */
  function promoteAt(at: number, job: Pick<Job, 'promote'> | string): void {
    if (closing) return
    const timer = setTimeout(
      () => {
        timers.delete(timer)
        const found =
          typeof job === 'string' ? Promise.resolve(job).then((id) => queueOf(id).getJob(id)) : Promise.resolve(job)
        found.then((j) => j?.promote()).catch(() => undefined)
      },
      Math.max(0, at - Date.now()),
    )
    timer.unref()
    timers.add(timer)
  }

  async function schedule(
    request: RequestRef,
    opts: { readonly delayMs?: number; readonly priority?: number } = {},
  ): Promise<unknown> {
    // An id already waiting, delayed or running is left as it is (BullMQ ignores a
    // second job with the same id).
    return bounded(
      queueOf(request.id).add(
        'run',
        { line: request.line, createdAt: request.createdAt },
        {
          jobId: request.id,
          ...(opts.delayMs !== undefined && opts.delayMs > 0 ? { delay: Math.ceil(opts.delayMs) } : {}),
          ...(opts.priority !== undefined && opts.priority > 0 ? { priority: opts.priority } : {}),
        },
      ),
    )
  }

  /** Runs a leased request on a claimed worker; a 'later' is handed back (the coordinator makes it a job). */
  function runClaimed(
    request: RequestRef,
    held: Held,
    process: Processor,
    handBack: (at: number) => Promise<void>,
  ): void {
    const controller = new AbortController()
    const done = process(request, controller.signal, held)
      .then(async (outcome) => {
        if (outcome.kind === 'later') await handBack(outcome.at)
      })
      .catch((error: unknown) =>
        log.warn(
          { queueId: request.id, err: error instanceof Error ? error.message : String(error) },
          'queue: a request run here ended with an error',
        ),
      )
      .finally(() => {
        claimedRuns.delete(done)
        giveBack()
      })
    claimedRuns.set(done, controller)
  }

  /** BullMQ waits for its connection before a command; a Redis that is away must not hold a client's request. */
  function bounded<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(new StoreUnavailableError(`the queue's Redis did not answer within ${options.commandTimeoutMs} ms`)),
        options.commandTimeoutMs,
      )
    })
    return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
  }

  const allReachable = (): boolean => workers.every((worker) => reachable.has(worker))

  return {
    async schedule(request, opts = {}) {
      await schedule(request, opts)
      // On time, not at a blocking wait's timeout (see start); BullMQ's own delay if this instance is gone.
      if (opts.delayMs !== undefined && opts.delayMs > 0) promoteAt(Date.now() + opts.delayMs, request.id)
    },

    async wake(id) {
      const job = await bounded(queueOf(id).getJob(id))
      if (job === undefined || !(await job.isDelayed())) return
      // Another instance may promote it first; then there is nothing left to do.
      await job.promote().catch(() => undefined)
    },

    claim() {
      if (processor === null || closing || free <= 0) return null
      free--
      let kept = true
      const process = processor
      return {
        run(request, held, handBack) {
          if (!kept) return
          kept = false
          runClaimed(request, held, process, handBack)
        },
        free() {
          if (!kept) return
          kept = false
          giveBack()
        },
      }
    },

    start(process: Processor, concurrency) {
      if (concurrency <= 0 || started) return
      started = true
      processor = process
      free = concurrency
      const runJob = async (job: Job, token?: string, signal?: AbortSignal): Promise<void> => {
        const data = job.data as { line?: unknown; createdAt?: unknown }
        const request = { id: job.id ?? '', line: String(data.line ?? ''), createdAt: Number(data.createdAt ?? 0) }
        const stopped = signal ?? NEVER
        // Stopped while it waited for a worker (the gateway is closing): it runs elsewhere.
        const outcome = (await workerFor(stopped, job.priority))
          ? await process(request, stopped).finally(giveBack)
          : { kind: 'later' as const, at: Date.now() }
        if (outcome.kind === 'later') {
          await job.moveToDelayed(outcome.at, token)
          // BullMQ wakes a delayed job when Redis times out a worker's blocking wait, which
          // an idle Redis does only every 1/hz s (100 ms by default): up to 5 % of a 2 s
          // window lost at each of its ends. A timer here wakes it on time; BullMQ's own
          // delay still does if this instance is gone.
          promoteAt(outcome.at, job)
          throw new DelayedError()
        }
      }
      const workerConnection = connectionFor(target, 'worker', options.commandTimeoutMs, log, owned)
      const startWorker = (prefix: string): void => {
        const worker = new Worker(
          name,
          (job: Job, token?: string, signal?: AbortSignal) => {
            const run = runJob(job, token, signal)
            jobRuns.add(run)
            return run.finally(() => jobRuns.delete(run))
          },
          {
            prefix,
            concurrency,
            connection: workerConnection,
            // A request whose gateway died mid-run is run again; only a request that keeps
            // killing its workers is dropped (its record then stays in_progress until swept).
            maxStalledCount: 10,
            lockDuration: options.recoverAfterMs ?? 30_000,
            stalledInterval: Math.ceil((options.recoverAfterMs ?? 30_000) / 2),
            removeOnComplete: { count: 0 },
            removeOnFail: { count: 0 },
          },
        )
        workers.push(worker)
        // Its connections' state, for healthy(): up on each (re)connect, down when one drops.
        const backend = worker.getBackend()
        backend.on('ready', () => reachable.add(worker))
        backend.on('close', () => reachable.delete(worker))
        worker.on('ready', () => reachable.add(worker))
        worker.on('error', (err: Error) => {
          if (!isConnectionError(err)) {
            log.warn({ err: err.message }, 'queue worker error')
            return
          }
          reachable.delete(worker)
          log.debug({ err: err.message }, 'queue worker: Redis connection error')
        })
        worker.on('failed', (job, err) =>
          log.error({ queueId: job?.id, err: err.message }, 'queue worker failed a job'),
        )
      }
      for (const prefix of served) startWorker(prefix)
    },

    // A worker whose Redis is away runs nothing: /readyz says so.
    healthy: () => workers.every((worker) => worker.isRunning() && reachable.has(worker)),

    async close(graceMs = 0) {
      closing = true
      for (const timer of timers) clearTimeout(timer)
      timers.clear()
      const running = (): Promise<unknown> => Promise.all([...claimedRuns.keys(), ...jobRuns])
      if (workers.length > 0) {
        // Take no new job from now on; resolve once the running ones are done and the
        // connections are closed, which needs Redis.
        const closed = Promise.all(workers.map((worker) => worker.close()))
        // The grace is for the requests running here, not for Redis: with none running,
        // nothing is waited for.
        if (!(await within(running(), graceMs))) {
          // Aborted requests record what they got; a job stopped mid-run is run again
          // elsewhere, and so is a claimed run (handed to the shared queue as it stops).
          for (const controller of claimedRuns.values()) controller.abort()
          for (const worker of workers) worker.cancelAllJobs('gateway shutting down')
          await within(running(), Math.min(CLOSE_MS, Math.max(graceMs, DISCONNECT_MS)))
        }
        // With Redis away a graceful close (QUIT on a connection that queues commands
        // until it is back) would wait for ever: drop the connections instead.
        if (!allReachable() || !(await within(closed, CLOSE_MS))) {
          if (!(await within(Promise.all(workers.map((worker) => worker.disconnect())), DISCONNECT_MS)))
            log.debug('queue worker: connections dropped without waiting for them')
        }
      }
      // With Redis away a graceful close would wait for ever.
      queuesClosed = true
      const all = [...queues.values()]
      if (
        (workers.length > 0 && !allReachable()) ||
        !(await within(Promise.all(all.map((queue) => queue.close())), CLOSE_MS))
      )
        await within(Promise.all(all.map((queue) => queue.disconnect())), DISCONNECT_MS)
      // BullMQ leaves a client it was given open.
      for (const cluster of owned) cluster.disconnect()
    },
  }
}

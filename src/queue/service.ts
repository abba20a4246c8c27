// The queue as the rest of the gateway sees it: a drop-in strategy for the corridor, the
// asynchronous requests (accept, read, list, cancel), the lines for the admin API, and the
// worker that runs stored requests on this instance.
import { randomBytes } from 'node:crypto'
import type { Config, StorageCaps } from '../config/schema.ts'
import { gatewayError, type GatewayError } from '../errors.ts'
import { storageCapsOf } from '../limits/plans.ts'
import type { RequestBody } from '../http/body.ts'
import type { RequestContext } from '../http/context.ts'
import { sendJson } from '../http/reply.ts'
import type { AdmissionStrategy, Corridor, PreparedCall } from '../inference/corridor.ts'
import type { Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { KeyStore } from '../store/ports.ts'
import { Coordinator, describe } from './coordinator.ts'
import {
  isFinal,
  QueueFullError,
  type JobRunner,
  type NewRequest,
  type QueuedRequest,
  type QueueStore,
  type RequestStatus,
  type RequestSummary,
  type StoredBody,
  type StoredCall,
  type CallerProtocol,
} from './ports.ts'
import type { QueueSignals, SignalHandlers } from './signals.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { LineFairness } from './capacity-line.ts'
import { jobTicket, lineOf } from './tickets.ts'
import { requestView, statusOf } from './view.ts'
import { waitInLine } from './waiter.ts'
import { createWaitPredictor } from './wait-predictor.ts'
import type { Tracing } from '../observability/tracing.ts'
import { createProcessor } from './worker.ts'

export interface QueueServiceDeps {
  /** The limiter's window (limits.windowMs) is the rate a line drains at before one is learned (deadline.ts). */
  readonly config: Pick<Config, 'queue'> & { readonly limits?: Pick<Config['limits'], 'windowMs'> }
  readonly log: Logger
  readonly metrics: Metrics
  readonly limiter: Limiter
  readonly corridor: Corridor
  readonly keys: Pick<KeyStore, 'get'>
  readonly store: QueueStore
  readonly runner: JobRunner
  readonly signals: (handlers: SignalHandlers) => QueueSignals
  /** This gateway's name in the lines; random per process. */
  readonly instance?: string
  /** Room coming back on a deployment wakes the calls of this gateway waiting for one (capacity-line.ts). */
  readonly capacity?: Pick<DeploymentCapacity, 'onRoom' | 'learnedElsewhere'>
  /** Traces: accepted requests keep their trace to their run (worker.ts). */
  readonly tracing?: Tracing
  /** Fair shares between the parties waiting in the capacity line (capacity-line.ts, src/fairness/). */
  readonly fairness?: LineFairness
}

export interface ListQuery {
  readonly limit: number
  readonly after?: string | undefined
  readonly status?: RequestStatus | undefined
}

export interface LineView {
  readonly key_id: string
  readonly model: string
  readonly depth: number
  readonly oldest_joined_at: string | null
  readonly oldest_wait_ms: number | null
}

export interface QueueHealth {
  /** running: this instance runs stored requests; accept_only: queue.concurrency is 0; stopped: its worker is down. */
  readonly worker: 'running' | 'accept_only' | 'stopped'
  readonly healthy: boolean
}

export interface QueueService {
  readonly kind: QueueStore['kind']
  /** This gateway's name in the lines and leases; its heartbeat says it is alive. */
  readonly instance: string
  /** Whether a gateway's heartbeat is current: what a stopped one left behind may be taken over. */
  isAlive(instance: string): Promise<boolean>
  /** The drop-in admission of one call; `signal` fires when its client leaves. */
  waitInLine(signal: AbortSignal): AdmissionStrategy
  /**
   * Stores a checked call to run later and answers 202 (Prefer: respond-async). `protocol`:
   * the API the caller spoke when the call was translated from it (its result is shown so).
   */
  accept(ctx: RequestContext, call: PreparedCall, protocol?: CallerProtocol): Promise<void>
  /** A new stored-request id for a key's request (kept by whoever submits it later: a batch's line). */
  newId(keyId: string): string
  /**
   * Stores a checked call under `id` to run later, with nobody waiting for a reply (a
   * batch's line, so in the batch class: behind every other call of its key's line, priced
   * at the tier's batch price; priority/classes.ts): as accept, without the limiter's early refusal. Its key's pending caps
   * hold: a full queue is `queue_full`, to try again once some have run. `keepIdUntil`: the
   * id is taken once until then, even after the request's record is gone (QueueStore.submit);
   * an id taken already is a RequestTakenError.
   */
  enqueue(call: PreparedCall, id: string, keepIdUntil?: number): Promise<void>
  /**
   * Calls `listener` whenever a batch's line (a request stored by enqueue) ends on this
   * instance: the batch runner collects it then, instead of at its next look.
   */
  onBatchLineEnded(listener: () => void): void
  /** One request; `owner` given: 404 unless it is that owner's (without: the admin, who also sees the owner). */
  read(id: string, owner?: string): Promise<Record<string, unknown>>
  list(owner: string, query: ListQuery): Promise<Record<string, unknown>>
  cancel(id: string, owner?: string): Promise<Record<string, unknown>>
  /** Depth and oldest wait of every line. */
  lines(): Promise<LineView[]>
  health(): QueueHealth
  /** Starts the worker (if queue.concurrency > 0), heartbeat and sweep; schedules every line's head. */
  start(): Promise<void>
  /**
   * Calls still waiting get 503 (they may go to another instance); no new stored request
   * starts here, and those running may finish within `graceMs`.
   */
  beginShutdown(graceMs: number): void
  /** Waits for the running stored requests (as beginShutdown allowed), then closes. */
  close(): Promise<void>
  /**
   * Resolves once the stored requests running now have ended (those started later are not
   * waited for): a reload closes what only the previous configuration used after them.
   */
  settledNow(): Promise<void>
}

/** How long DELETE waits for a running request to stop before it answers. */
const CANCEL_WAIT_MS = 5000

/** A request as it was just stored. */
function queued(request: NewRequest): QueuedRequest {
  return {
    ...request,
    status: 'queued',
    attempts: 0,
    startedAt: null,
    finishedAt: null,
    cancelRequested: false,
    result: null,
    runner: null,
  }
}

/**
 * The refusal of a request its key's pending requests have no room for. The key's line
 * drains at its rate limit, so a place frees about one request interval from now: that is
 * the retry hint. A body larger than the whole byte cap can never fit: 413, not 429.
 */
function queueFull(error: QueueFullError, caps: StorageCaps, rpm: number | undefined): GatewayError {
  const { pending, size } = error
  if (size > caps.queuedBytes) {
    return gatewayError('body_too_large', {
      message: `This request's stored body (${size} bytes) is larger than all a key may keep waiting (${caps.queuedBytes} bytes); it can never be queued.`,
    })
  }
  const retryMs = rpm === undefined ? 1000 : Math.ceil(60_000 / rpm)
  const what =
    pending.requests + 1 > caps.queuedRequests
      ? `${pending.requests} stored asynchronous requests are waiting or running for this key, its cap (${caps.queuedRequests})`
      : `the stored requests waiting for this key hold ${pending.bytes} bytes; with this one (${size} bytes) they would pass its cap (${caps.queuedBytes} bytes)`
  return gatewayError('queue_full', {
    message: `Queue full: ${what}. Retry after ${Math.ceil(retryMs / 1000)}s, once some have run, or cancel some (DELETE /queue/requests/{id}).`,
    headers: { 'retry-after': String(Math.ceil(retryMs / 1000)), 'retry-after-ms': String(retryMs) },
  })
}

export function createQueueService(deps: QueueServiceDeps): QueueService {
  const { config, store, runner, metrics } = deps
  const settings = config.queue
  const ttlMs = settings.resultTtlSeconds * 1000
  const instance = deps.instance ?? randomBytes(6).toString('hex')
  const coordinator = new Coordinator({
    store,
    runner,
    instance,
    tierPriority: settings.tierPriority,
    log: deps.log,
    signals: deps.signals,
    recoverAfterMs: settings.recoverAfterMs,
    onLeaseRecovered: () => metrics.queueLeasesRecovered.inc(),
    onDeploymentLearned: (deploymentId) => deps.capacity?.learnedElsewhere(deploymentId),
    ...(deps.fairness === undefined ? {} : { fairness: deps.fairness }),
  })
  deps.capacity?.onRoom((deploymentId) => coordinator.capacityLine.room(deploymentId))
  // Per instance: a call joins the capacity line after a deployment refused it, or on arrival
  // behind calls of its model already waiting there (fair shares: capacity-line.ts crowded).
  metrics.setCapacityLineSource(() => coordinator.capacityLine.waiting())
  const shutdown = new AbortController()
  const batchLineListeners = new Set<() => void>()
  /** The stored requests running on this instance now (settledNow). */
  const runs = new Set<Promise<unknown>>()
  let workerStarted = false
  let stopping: Promise<void> | null = null
  const stopRunner = (graceMs: number): Promise<void> => {
    stopping ??= runner
      .close(graceMs)
      .catch((error: unknown) => deps.log.warn({ err: describe(error) }, 'queue worker did not close cleanly'))
    return stopping
  }

  metrics.setQueueSource(async () =>
    (await store.lines()).map((line) => ({
      model: line.model,
      depth: line.depth,
      headJoinedAt: line.head?.joinedAt ?? null,
    })),
  )

  const notFound = (): Error => gatewayError('resource_not_found', { message: 'No such queued request.', param: 'id' })

  async function find(id: string, owner: string | undefined): Promise<QueuedRequest> {
    const request = /^qreq_[\w-]{1,64}$/.test(id) ? await store.get(id) : null
    // Another owner's request does not exist, as far as this caller can tell.
    if (request === null || (owner !== undefined && request.owner !== owner)) throw notFound()
    return request
  }

  async function view(request: RequestSummary): Promise<Record<string, unknown>> {
    const now = Date.now()
    const position =
      statusOf(request, now, ttlMs) === 'queued' ? await store.position(request.line, jobTicket(request)) : null
    return requestView(request, { now, ttlMs, position })
  }

  async function stored(body: RequestBody): Promise<{ body: StoredBody; bytes: Buffer | null }> {
    // Only the parsed value is kept: the client's bytes (JsonBody.received) are this process's.
    if (body.kind === 'json') return { body: { kind: 'json', value: body.value }, bytes: null }
    if (body.kind !== 'multipart') return { body, bytes: null }
    const chunks: Buffer[] = []
    for await (const chunk of body.open()) chunks.push(chunk as Buffer)
    const { contentType, fields, files, size } = body
    return { body: { kind: 'multipart', contentType, fields, files, size }, bytes: Buffer.concat(chunks) }
  }

  /** A checked call as the store keeps it (accept and enqueue), `extra` on its call. */
  async function newRequest(
    call: PreparedCall,
    id: string,
    extra: Pick<StoredCall, 'trace' | 'protocol' | 'batch'>,
  ): Promise<{ request: NewRequest; bytes: Buffer | null }> {
    const { principal, resolved, estimate, spec } = call
    const { body, bytes } = await stored(call.body)
    const request: NewRequest = {
      id,
      keyId: principal.keyId,
      owner: principal.owner,
      tier: resolved.tier,
      line: lineOf(principal.keyId, resolved.model),
      createdAt: Date.now(),
      call: {
        endpoint: spec.endpoint,
        model: call.modelName,
        params: { ...call.params },
        query: call.query.toString(),
        body,
        estimate,
        ...extra,
      },
    }
    return { request, bytes }
  }

  // Learns how fast each line drains, for the deadlines of the calls that join it (deadline.ts).
  const predictor = settings.deadlines === 'wait' ? undefined : createWaitPredictor(deps.config.limits?.windowMs)

  return {
    kind: store.kind,
    instance,
    isAlive: (other) => store.isAlive(other),

    waitInLine(signal) {
      return waitInLine(
        {
          coordinator,
          limiter: deps.limiter,
          metrics,
          maxWaitMs: settings.maxWaitMs,
          upstreamRetries: settings.upstreamRetries,
          retryBackoffMs: settings.retryBackoffMs,
          shutdown: shutdown.signal,
          ...(predictor === undefined ? {} : { predictor }),
        },
        signal,
      )
    },

    async accept(ctx, call, protocol) {
      if (shutdown.signal.aborted) throw gatewayError('shutting_down')
      const { principal, resolved, estimate } = call
      const admission = {
        keyId: principal.keyId,
        owner: principal.owner,
        tier: resolved.tier,
        model: resolved.model,
        limits: resolved.limits,
        estimate,
      }
      let limits: Readonly<Record<string, string>>
      try {
        limits = (await deps.limiter.check?.(admission)) ?? {}
      } catch (error) {
        metrics.queueRequests.inc({ mode: 'async', outcome: 'refused' })
        throw error
      }
      const traced = ctx.trace.headers()
      const { request, bytes } = await newRequest(call, store.newId(principal.keyId), {
        // Its run continues this trace (sampled out here: there too).
        ...(traced.traceparent === undefined ? {} : { trace: traced }),
        ...(protocol === undefined ? {} : { protocol }),
      })
      // A worker of this instance that is free now runs the request at once if it is the
      // head of its line: it is leased to this instance, and no other one runs it meanwhile.
      const slot = workerStarted ? runner.claim() : null
      if (slot !== null) coordinator.hold(request.id)
      const { plans, storageCaps } = call.runtime.config
      const storage = storageCapsOf(plans, storageCaps, resolved.tier)
      let ahead: number
      try {
        ahead = await store.submit(request, bytes, slot === null ? undefined : instance, {
          requests: storage.queuedRequests,
          bytes: storage.queuedBytes,
        })
      } catch (error) {
        slot?.free()
        coordinator.unhold(request.id)
        if (error instanceof QueueFullError) {
          metrics.queueRequests.inc({ mode: 'async', outcome: 'refused' })
          throw queueFull(error, storage, resolved.limits.rpm)
        }
        throw error
      }
      metrics.queueRequests.inc({ mode: 'async', outcome: 'accepted' })
      ctx.trace.set({ 'tollgate.admission.decision': 'queued', 'tollgate.queue.id': request.id })
      if (ahead === 0 && slot !== null) {
        slot.run(request, { request: { ...queued(request), runner: instance }, key: principal.key }, (at) =>
          coordinator.handBackHeld(request, at),
        )
      } else {
        slot?.free()
        coordinator.unhold(request.id)
        // Stored: from here the request exists. If its scheduling fails, the sweep schedules it.
        if (ahead === 0) {
          await coordinator.schedule(request, request.tier).catch((error: unknown) => {
            ctx.log.warn(
              { queueId: request.id, err: describe(error) },
              'queued request stored but not scheduled yet; the sweep will',
            )
          })
        }
      }
      ctx.log.info({ queueId: request.id, ahead }, 'queued request accepted')
      const shown = requestView(queued(request), { now: Date.now(), ttlMs, position: ahead })
      sendJson(ctx.res, 202, shown, {
        ...limits,
        location: `/queue/requests/${request.id}`,
        'preference-applied': 'respond-async',
        'cache-control': 'no-store',
      })
    },

    newId: (keyId) => store.newId(keyId),

    async enqueue(call, id, keepIdUntil) {
      if (shutdown.signal.aborted) throw gatewayError('shutting_down')
      const { resolved } = call
      // A batch's line: behind every interactive call of its key's line, in the batch class (priority/classes.ts).
      const { request, bytes } = await newRequest(call, id, { batch: true })
      const { plans, storageCaps } = call.runtime.config
      const storage = storageCapsOf(plans, storageCaps, resolved.tier)
      let ahead: number
      try {
        ahead = await store.submit(
          request,
          bytes,
          undefined,
          { requests: storage.queuedRequests, bytes: storage.queuedBytes },
          keepIdUntil,
        )
      } catch (error) {
        if (error instanceof QueueFullError) {
          // Counted as accept() counts it: a batch's line refused by a full queue is a refusal too.
          metrics.queueRequests.inc({ mode: 'async', outcome: 'refused' })
          throw queueFull(error, storage, resolved.limits.rpm)
        }
        throw error
      }
      metrics.queueRequests.inc({ mode: 'async', outcome: 'accepted' })
      if (ahead === 0) {
        await coordinator.schedule(request, request.tier).catch((error: unknown) => {
          deps.log.warn(
            { queueId: id, err: describe(error) },
            'queued request stored but not scheduled yet; the sweep will',
          )
        })
      }
    },

    onBatchLineEnded(listener) {
      batchLineListeners.add(listener)
    },

    async read(id, owner) {
      const request = await find(id, owner)
      // The admin (no owner given) also sees whose it is.
      return owner === undefined ? { ...(await view(request)), owner: request.owner } : view(request)
    },

    async list(owner, query) {
      // The store filters and pages (exactly, without reading bodies); positions are read per queued request.
      const page = await store.list(owner, { after: query.after, limit: query.limit, status: query.status })
      const data = await Promise.all(page.data.map(view))
      return {
        object: 'list',
        data,
        first_id: page.data[0]?.id ?? null,
        last_id: page.data.at(-1)?.id ?? null,
        has_more: page.hasMore,
      }
    },

    async cancel(id, owner) {
      const request = await find(id, owner)
      const status = statusOf(request, Date.now(), ttlMs)
      if (isFinal(status) && status !== 'cancelled') {
        // SDKs retry a 409 unless told not to; this one never changes.
        throw gatewayError('conflict', {
          message: `The request has already finished (${status}); there is nothing to cancel.`,
          headers: { 'x-should-retry': 'false' },
        })
      }
      const { was, next } = await store.cancel(request, Date.now())
      await coordinator.handOver(request.line, next)
      if (was === 'queued') metrics.queueRequests.inc({ mode: 'async', outcome: 'cancelled' })
      if (was === 'in_progress') {
        await coordinator.cancelRunning(id)
        // Whichever instance runs it aborts the upstream call and records what it cost.
        const deadline = Date.now() + CANCEL_WAIT_MS
        while (Date.now() < deadline && !isFinal((await store.get(id))?.status ?? 'cancelled')) {
          await new Promise((done) => setTimeout(done, 50))
        }
      }
      return view((await store.get(id)) ?? request)
    },

    async lines() {
      const now = Date.now()
      return (await store.lines())
        .map((line): LineView => ({
          key_id: line.keyId,
          model: line.model,
          depth: line.depth,
          oldest_joined_at: line.head === null ? null : new Date(line.head.joinedAt).toISOString(),
          oldest_wait_ms: line.head === null ? null : Math.max(0, now - line.head.joinedAt),
        }))
        .sort((a, b) => b.depth - a.depth || a.key_id.localeCompare(b.key_id) || a.model.localeCompare(b.model))
    },

    health() {
      if (settings.concurrency === 0) return { worker: 'accept_only', healthy: true }
      // Running but unhealthy: started and not stopping, but its Redis is away (it runs nothing until it is back).
      const running = workerStarted && !shutdown.signal.aborted
      return { worker: running ? 'running' : 'stopped', healthy: running && runner.healthy() }
    },

    async start() {
      if (settings.concurrency > 0) {
        const processor = createProcessor({
          coordinator,
          corridor: deps.corridor,
          limiter: deps.limiter,
          keys: deps.keys,
          config,
          metrics,
          log: deps.log,
          ...(deps.tracing === undefined ? {} : { tracing: deps.tracing }),
          onBatchLineEnded: () => {
            for (const listener of batchLineListeners) listener()
          },
        })
        runner.start((request, signal, held) => {
          const run = processor(request, signal, held)
          runs.add(run)
          void run.finally(() => runs.delete(run)).catch(() => undefined)
          return run
        }, settings.concurrency)
        workerStarted = true
      }
      metrics.queueWorkerUp.set(workerStarted ? 1 : 0)
      await coordinator.ready(2000)
      coordinator.start(settings.sweepIntervalMs)
    },

    async settledNow() {
      await Promise.allSettled([...runs])
    },

    beginShutdown(graceMs) {
      shutdown.abort()
      void stopRunner(graceMs)
    },

    async close() {
      shutdown.abort()
      metrics.queueWorkerUp.set(0)
      await stopRunner(0)
      await coordinator.close()
      await store.close()
    },
  }
}

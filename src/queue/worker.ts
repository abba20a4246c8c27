// Runs a stored (asynchronous) request whose turn has come, on whichever instance's worker
// took it, through the same corridor as a live call: its key is read again (a key revoked
// meanwhile fails the request), its scopes are checked again, it is admitted by the
// limiter like any call, and its reply is recorded instead of sent. Over the limit, it
// goes back to the runner until the limiter's retry-after; an upstream 429 or 5xx puts
// it back at the head of its line with backoff, a bounded number of times.
//
// A request leased to this instance when it was accepted (QueueStore.submit) arrives with
// its record and key (`held`): it runs without reading them again, and if it must wait
// after all, it goes to the shared queue like any other, and then its lease ends.
import { Readable } from 'node:stream'
import { NO_USAGE, type Usage } from '../backends/port.ts'
import type { Config } from '../config/schema.ts'
import { GatewayError, gatewayError, toGatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import type { AdmissionStrategy, CallNotes, CallResult, Corridor, Exchange } from '../inference/corridor.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from '../inference/endpoints.ts'
import { principalOf, type KeyRecord } from '../keys/record.ts'
import type { Admission, AdmissionRequest, Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import { isJsonType, mediaType } from '../http/media-type.ts'
import { detachedClient } from '../proxy/detached-client.ts'
import { RecordingSink, type Recording } from '../proxy/recorder.ts'
import { StoreUnavailableError } from '../store/errors.ts'
import type { KeyStore } from '../store/ports.ts'
import { seatOf, type CapacityTurn } from './capacity-line.ts'
import { chargeAsOf } from './charge-once.ts'
import { describe, type Coordinator } from './coordinator.ts'
import {
  isFinal,
  type FinalStatus,
  type Held,
  type Outcome,
  type Processor,
  type QueuedRequest,
  type StoredResult,
} from './ports.ts'
import { endCallSpan } from '../observability/call-spans.ts'
import { NO_SPAN, type Span, type Tracing } from '../observability/tracing.ts'
import { backoffMs, retryAfterMs, upstreamRetryable, waitUntil, withGiveBack } from './retry.ts'
import { jobTicket, parseLine } from './tickets.ts'

export interface WorkerDeps {
  readonly coordinator: Coordinator
  readonly corridor: Corridor
  readonly limiter: Limiter
  readonly keys: Pick<KeyStore, 'get'>
  readonly config: Pick<Config, 'queue'>
  readonly metrics: Metrics
  readonly log: Logger
  /** Traces: a run continues the trace of the request that accepted it (observability/tracing.ts). */
  readonly tracing?: Tracing
  /** A batch's line ended here (QueueService.onBatchLineEnded). */
  readonly onBatchLineEnded?: () => void
}

/** The admission was granted but the request may no longer start (cancelled or finished meanwhile). */
class NotStarted extends Error {}

/** After a store failure: try again in a moment. */
const STORE_RETRY_MS = 1000
/**
 * A head over the limit is woken this much before the limiter's retry-after, and a wait
 * this short is waited in the worker: the window's first admission then happens as the
 * window opens, not after a wake-up's round trips (a few ms lost per window, per line).
 */
const EARLY_WAKE_MS = 25
/** Tries to record a finished request, 250 ms apart and doubling (about 8 s in all). */
const FINISH_ATTEMPTS = 5
const SHORT_WAIT_MS = 60
/**
 * A request leased to an instance is left to it; the job that found it looks again after
 * this long (the lease may end with the request still to run, or its runner may be gone).
 * A request handed back is scheduled before its lease ends, so its job may well find the
 * lease still on: it is woken as the lease ends (Coordinator.handBack).
 */
const LEASE_RECHECK_MS = 1000

export function specFor(request: Pick<QueuedRequest, 'call'>): EndpointSpec | undefined {
  return PROXIED_ENDPOINTS.find((s) => s.endpoint === request.call.endpoint && s.method === 'POST')
}

export function createProcessor(deps: WorkerDeps): Processor {
  const { coordinator: c, corridor, limiter, metrics, config } = deps
  const { store } = c
  const ttlMs = config.queue.resultTtlSeconds * 1000
  const later = (ms: number): Outcome => ({ kind: 'later', at: Date.now() + ms })

  /** Admits, waiting out a refusal whose window ends within SHORT_WAIT_MS. */
  async function admitSoon(request: AdmissionRequest, signal: AbortSignal): Promise<Admission> {
    for (let tries = 0; ; tries++) {
      try {
        return await limiter.admit(request)
      } catch (error) {
        const wait = retryAfterMs(error)
        if (wait === undefined || wait > SHORT_WAIT_MS || tries >= 3 || signal.aborted) throw error
        await new Promise((done) => setTimeout(done, wait))
      }
    }
  }

  /**
   * Records how it ended. Retried through a short store outage: giving up here would have
   * the request run (and reach the upstream) again.
   */
  async function finish(request: QueuedRequest, status: FinalStatus, result: StoredResult | null): Promise<void> {
    let outcome
    for (let attempt = 0; ; attempt++) {
      try {
        outcome = await store.finish(request, status, result, Date.now())
        break
      } catch (error) {
        if (attempt >= FINISH_ATTEMPTS || !(error instanceof StoreUnavailableError)) throw error
        await new Promise((done) => setTimeout(done, 250 * 2 ** attempt))
      }
    }
    const { finished, next } = outcome
    await c.handOver(request.line, next)
    if (finished) metrics.queueRequests.inc({ mode: 'async', outcome: status })
    if (finished && request.call.batch === true) deps.onBatchLineEnded?.()
  }

  const refusal = (error: GatewayError, usage: Usage = NO_USAGE): StoredResult => ({
    statusCode: error.status,
    contentType: 'application/json',
    encoding: 'json',
    body: error.toBody(),
    usage,
  })

  async function body(request: QueuedRequest): Promise<RequestBody> {
    const stored = request.call.body
    if (stored.kind !== 'multipart') return stored
    const bytes = await store.body(request.id)
    if (bytes === null) throw gatewayError('internal', { message: 'The stored body of this request is gone.' })
    return { ...stored, open: () => Readable.from([bytes]), dispose: async () => {} }
  }

  return async function process(ref, runnerSignal, held) {
    if (held !== undefined) return runHeld(held, runnerSignal)
    const { id } = ref
    let request: QueuedRequest | null
    let key: KeyRecord | null
    try {
      // The record, its place in line and its key, in one round trip: the line (which
      // names the key) travels with the scheduled request.
      let ahead: number | null
      ;[request, ahead, key] = await Promise.all([
        store.get(id),
        store.position(ref.line, jobTicket(ref)),
        deps.keys.get(parseLine(ref.line).keyId),
      ])
      if (request === null || isFinal(request.status)) return { kind: 'done' }
      if (request.line !== ref.line) {
        ahead = await store.position(request.line, jobTicket(request))
        key = await deps.keys.get(request.keyId)
      }
      // Only the head of a line runs: one that is not will be scheduled when its turn comes.
      if (request.status === 'queued' && (ahead ?? 0) > 0) return { kind: 'done' }
      if (request.runner !== null) return later(LEASE_RECHECK_MS)
    } catch (error) {
      deps.log.warn({ queueId: id, err: describe(error) }, 'queue worker cannot read a request; trying again')
      return later(STORE_RETRY_MS)
    }
    return runLogged(request, key, runnerSignal)
  }

  /** A request leased to this instance, as it was accepted. */
  async function runHeld(held: Held, runnerSignal: AbortSignal): Promise<Outcome> {
    const { request } = held
    const outcome = await runLogged(request, held.key, runnerSignal, c.instance)
    // To wait, it goes to the shared queue, leased until it is there: the runner hands the
    // 'later' back (Coordinator.handBackHeld), which schedules it and then ends the lease.
    if (outcome.kind !== 'later') c.unhold(request.id)
    return outcome
  }

  /** run(), with its log; a failure it did not expect (a store outage, say) is tried again later. */
  async function runLogged(
    request: QueuedRequest,
    key: KeyRecord | null,
    runnerSignal: AbortSignal,
    runner?: string,
  ): Promise<Outcome> {
    const log = deps.log.child({ queueId: request.id, keyId: request.keyId })
    try {
      return await run(request, key, runnerSignal, log, runner)
    } catch (error) {
      log.warn({ err: describe(error) }, 'queue worker could not finish a request; trying again')
      return later(STORE_RETRY_MS)
    }
  }

  async function run(
    request: QueuedRequest,
    key: KeyRecord | null,
    runnerSignal: AbortSignal,
    log: Logger,
    runner?: string,
  ): Promise<Outcome> {
    if (request.cancelRequested) {
      await finish(request, 'cancelled', null)
      return { kind: 'done' }
    }
    if (request.status === 'queued' && Date.now() - request.createdAt > ttlMs) {
      await finish(request, 'expired', refusal(gatewayError('queue_expired')))
      return { kind: 'done' }
    }
    const spec = specFor(request)
    const fatal =
      key === null
        ? gatewayError('invalid_api_key', { message: 'The API key that made this request no longer exists.' })
        : key.status === 'revoked'
          ? gatewayError('revoked_api_key')
          : key.expiresAt !== null && Date.parse(key.expiresAt) <= Date.now()
            ? gatewayError('expired_api_key')
            : spec === undefined
              ? gatewayError('unknown_route')
              : null
    if (fatal !== null || key === null || spec === undefined) {
      await finish(request, 'failed', refusal(fatal ?? gatewayError('internal')))
      return { kind: 'done' }
    }

    let call
    try {
      call = corridor.restore(principalOf(key), spec, {
        params: request.call.params,
        query: new URLSearchParams(request.call.query),
        body: await body(request),
        modelName: request.call.model,
        estimate: request.call.estimate,
        ...(request.call.batch === true ? { batch: true } : {}),
      })
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error
      await finish(request, 'failed', refusal(error))
      return { kind: 'done' }
    }

    const controller = new AbortController()
    const onStop = (): void => controller.abort()
    runnerSignal.addEventListener('abort', onStop, { once: true })
    const unregister = c.running(request.id, controller)
    const recorder = new RecordingSink(config.queue.maxResultBytes)
    const notes: CallNotes = {}
    const search = call.query.toString()
    const trace = runSpan(deps.tracing, request)
    const queueWaitMs = Date.now() - request.createdAt
    const endTrace = (status: number, errorName?: string): void =>
      endCallSpan(trace, {
        route: spec.endpoint,
        model: request.call.model ?? undefined,
        keyId: request.keyId,
        tier: request.tier,
        backend: notes.backend,
        usage: notes.usage,
        status,
        errorName: errorName ?? notes.errorName,
        queueWaitMs,
      })
    const attemptsBefore = request.attempts
    const exchange: Exchange = {
      id: request.id,
      log,
      signal: controller.signal,
      sink: recorder,
      client: detachedClient(spec.method, spec.upstreamPath(call.params) + (search ? `?${search}` : '')),
      notes,
      trace,
      // Charged once, whatever runs it again (charge-once.ts).
      chargeAs: chargeAsOf({
        request,
        status: () => recorder.statusCode,
        stopping: runnerSignal,
        retriesLeft: attemptsBefore + 1 <= config.queue.upstreamRetries,
        queue: config.queue,
      }),
    }
    /** Every deployment was full until then: the request, started already, waits for one in the capacity line. */
    let capacityAt: number | null = null
    let capacityOf: readonly string[] = []
    /** Its turn in the capacity line, held from its try until a deployment is picked. */
    const waiting: { turn: CapacityTurn | null } = { turn: null }
    let startedHere = false
    const strategy: AdmissionStrategy = {
      waitForCapacity(retryAt, deployments) {
        capacityAt = retryAt
        capacityOf = deployments
        return true
      },
      picked() {
        waiting.turn?.pass(true)
        waiting.turn = null
      },
      async admit(admissionRequest) {
        if (capacityAt !== null) return await admitAgain(admissionRequest)
        const admission = await admitSoon(admissionRequest, controller.signal)
        const { started, next } = await store.start(request, Date.now(), runner).catch(async (error: unknown) => {
          await admission.settle(NO_USAGE)
          throw error
        })
        if (!started) {
          await admission.settle(NO_USAGE)
          throw new NotStarted()
        }
        startedHere = true
        await c.handOver(request.line, next)
        metrics.queueStarts.inc({ path: runner === undefined ? 'shared' : 'here' })
        if (attemptsBefore === 0) {
          metrics.queueWait.observe({ mode: 'async' }, (Date.now() - request.createdAt) / 1000)
          metrics.queueRequests.inc({ mode: 'async', outcome: 'admitted' })
        }
        return withGiveBack(admission, admissionRequest, {}, () => void c.released(request.line))
      },
    }

    /**
     * Admitted again after waiting for a deployment with room: it keeps the place it started
     * from (not an upstream retry, so request.attempts does not grow), and the limiter's own
     * refusals are waited out here too.
     */
    async function admitAgain(admissionRequest: AdmissionRequest): Promise<Admission> {
      for (let at = capacityAt; at !== null;) {
        capacityAt = null
        if (!startedHere) throw new NotStarted()
        // Its turn in the capacity line (kept at the head when refused again), then the limiter.
        const mine =
          waiting.turn ?? (await c.capacityLine.enter(capacityOf, at, controller.signal, seatOf(admissionRequest)))
        if (mine === null || (mine === waiting.turn && !(await mine.again(at)))) throw new NotStarted()
        waiting.turn = mine
        try {
          const admission = await admitSoon(admissionRequest, controller.signal)
          return withGiveBack(admission, admissionRequest, {}, () => void c.released(request.line))
        } catch (error) {
          // Over the key's own limit: the line goes on without it meanwhile.
          mine.pass(false)
          waiting.turn = null
          const wait = retryAfterMs(error)
          if (wait === undefined) throw error
          if (!(await waitUntil(Date.now() + wait, controller.signal))) throw new NotStarted()
          at = Date.now()
        }
      }
      throw new NotStarted()
    }

    let result: CallResult
    try {
      result = await corridor.run(call, exchange, strategy)
    } catch (error) {
      const ended = toGatewayError(error)
      endTrace(ended.status, error instanceof NotStarted ? 'not_started' : ended.errorName)
      if (error instanceof NotStarted) {
        // Cancelled while it was being admitted: nothing ran.
        const now = await store.get(request.id)
        if (now?.cancelRequested === true) await finish(now, 'cancelled', null)
        return { kind: 'done' }
      }
      // Refused by the limiter before it started: it stays at the head and tries again when
      // the window allows (the only admission refusal a wait cures).
      const wait = retryAfterMs(error)
      if (wait !== undefined) return later(Math.max(0, wait - EARLY_WAKE_MS))
      if (error instanceof StoreUnavailableError) return later(STORE_RETRY_MS)
      const gatewayErr = toGatewayError(error)
      if (
        gatewayErr.errorName === 'upstream_unreachable' &&
        attemptsBefore + 1 <= config.queue.upstreamRetries &&
        (await store.requeue(request))
      ) {
        return later(backoffMs(config.queue.retryBackoffMs, attemptsBefore + 1))
      }
      if (gatewayErr.errorName === 'internal') log.error({ err: error }, 'queue worker: unexpected error')
      await finish(request, 'failed', refusal(gatewayErr, notes.usage))
      return { kind: 'done' }
    } finally {
      waiting.turn?.pass(false)
      runnerSignal.removeEventListener('abort', onStop)
      unregister()
    }

    const recording = recorder.recording()
    endTrace(recording.status)
    if (controller.signal.aborted) {
      // A cancel, or the gateway stopping: a stopped one runs again (its record stays in_progress).
      const now = await store.get(request.id)
      if (now?.cancelRequested !== true) return later(0)
      await finish(request, 'cancelled', toResult(recording, result.usage))
      return { kind: 'done' }
    }
    if (
      upstreamRetryable(recording.status) &&
      attemptsBefore + 1 <= config.queue.upstreamRetries &&
      (await store.requeue(request))
    ) {
      log.info(
        { status: recording.status, attempt: attemptsBefore + 1 },
        'upstream refused a queued request; back in line',
      )
      return later(backoffMs(config.queue.retryBackoffMs, attemptsBefore + 1))
    }
    if (recording.truncated) {
      const error = gatewayError('result_too_large', {
        message: `The reply was larger than ${config.queue.maxResultBytes} bytes (queue.maxResultBytes); it was not kept.`,
      })
      await finish(request, 'failed', refusal(error, result.usage))
      return { kind: 'done' }
    }
    await finish(request, recording.status < 400 ? 'completed' : 'failed', toResult(recording, result.usage))
    return { kind: 'done' }
  }
}

/** The reply as it is kept: JSON parsed, text as text, anything else in base64. */
export function toResult(recording: Recording, usage: Usage): StoredResult {
  const contentType = recording.headers['content-type'] ?? null
  const type = mediaType(contentType ?? undefined)
  const base = { statusCode: recording.status, contentType, usage }
  if (recording.body.length === 0) return { ...base, encoding: 'none', body: null }
  if (isJsonType(type)) {
    try {
      return { ...base, encoding: 'json', body: JSON.parse(recording.body.toString('utf8')) }
    } catch {
      /* kept as text below */
    }
  }
  if (type.startsWith('text/') || isJsonType(type)) {
    return { ...base, encoding: 'text', body: recording.body.toString('utf8') }
  }
  return { ...base, encoding: 'base64', body: recording.body.toString('base64') }
}

/** The span of one run of a stored request: in the trace of the request that accepted it, linked to that span. */
function runSpan(tracing: Tracing | undefined, request: QueuedRequest): Span {
  if (tracing?.enabled !== true) return NO_SPAN
  const { trace } = request.call
  return tracing.start(`queue ${request.call.endpoint}`, {
    kind: 'consumer',
    ...(trace === undefined ? {} : { parent: trace, link: trace }),
    attributes: { 'tollgate.queue.id': request.id, 'tollgate.queue.attempts': request.attempts },
  })
}

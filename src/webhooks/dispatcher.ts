// Events in, signed webhook deliveries out. publish() is the Events port: it commits the
// event and one delivery per matching endpoint to the outbox (one write) and only then
// hands the deliveries to the job runner, so a process that dies in between loses nothing:
// the sweep finds every pending delivery whose time has come and schedules it again
// (scheduling is idempotent). Deliveries run on the runner's workers (BullMQ on Redis, the
// in-process runner otherwise), never on a request's path. At least once: a delivery is
// recorded after its answer, so one whose worker dies mid-request is sent again, with the
// same webhook-id.
//
// An attempt that gets no 2xx (no answer, a refused address, a redirect, any other status)
// is tried again after an exponential backoff (retry.baseDelayMs doubling, up to
// retry.maxDelayMs, ±10 % jitter) until retry.maxAttempts, then the delivery is failed; the
// admin API can replay it.
import { randomBytes } from 'node:crypto'
import type { EventData, EventType, Events, GatewayEvent, PublishOptions } from '../events/types.ts'
import type { Logger } from '../observability/logger.ts'
import { createTaskOutage } from '../observability/outage-log.ts'
import type { JobRunner, Outcome, RequestRef } from '../queue/ports.ts'
import type { AddressGuard } from './address-guard.ts'
import type { AttemptOutcome, Delivery, WebhookEndpoint, WebhookStore } from './port.ts'
import { sendWebhook, type SendLimits, type SendRequest, type SendResult } from './send.ts'
import { signedHeaders } from './signing.ts'

export interface RetryPolicy {
  readonly baseDelayMs: number
  readonly maxDelayMs: number
  readonly maxAttempts: number
}

export interface DispatcherOptions {
  readonly store: WebhookStore
  readonly runner: JobRunner
  readonly guard: AddressGuard
  readonly limits: SendLimits
  readonly retry: RetryPolicy
  /** Deliveries this instance runs at once; 0: it publishes and leaves delivering to others. */
  readonly concurrency: number
  /** How often pending deliveries are looked for (those a process that died left unscheduled). */
  readonly sweepIntervalMs: number
  /** Finished deliveries and old events are kept this long. */
  readonly retentionMs: number
  readonly log: Logger
  readonly now?: () => number
  readonly random?: () => number
  /** The request itself (tests stand in for the network). */
  readonly send?: (request: SendRequest, guard: AddressGuard, limits: SendLimits) => Promise<SendResult>
}

export interface Dispatcher extends Events {
  /** Schedules what is pending and starts the workers and the sweep. */
  start(): Promise<void>
  /** A new delivery of a delivery's event to its endpoint, now. Null when the delivery, event or endpoint is gone. */
  replay(deliveryId: string): Promise<Delivery | null>
  /** Stops the sweep and the workers (running deliveries get `graceMs`). */
  close(graceMs?: number): Promise<void>
}

const LINE = 'webhooks'
/** How many pending deliveries one sweep schedules at most. */
const SWEEP_BATCH = 1000
const PRUNE_EVERY_MS = 3_600_000
/** A disabled endpoint's deliveries wait; they are looked at again this often. */
const DISABLED_RECHECK_MS = 60_000

export const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`

export function matches(endpoint: WebhookEndpoint, type: EventType): boolean {
  if (!endpoint.enabled || type === 'webhook.test') return false
  return endpoint.eventTypes === null || endpoint.eventTypes.includes(type)
}

/** The delay before attempt `n + 1`, after `n` failed ones (n ≥ 1). */
export function backoffMs(n: number, retry: RetryPolicy, random: () => number = Math.random): number {
  const plain = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** Math.min(Math.max(0, n - 1), 40))
  return Math.max(1, Math.round(plain * (0.9 + 0.2 * random())))
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { store, runner, log, retry } = options
  const now = options.now ?? Date.now
  const random = options.random ?? Math.random
  const send = options.send ?? sendWebhook
  let sweepTimer: NodeJS.Timeout | undefined
  let lastPrune = 0
  let closed = false

  const refOf = (d: Pick<Delivery, 'id' | 'createdAt'>): RequestRef => ({
    id: d.id,
    line: LINE,
    createdAt: d.createdAt,
  })

  async function schedule(d: Pick<Delivery, 'id' | 'createdAt'>, at: number): Promise<void> {
    try {
      await runner.schedule(refOf(d), { delayMs: Math.max(0, at - now()) })
    } catch (error) {
      // It stays pending in the outbox: the next sweep schedules it.
      log.warn(
        { deliveryId: d.id, err: (error as Error).message },
        'webhooks: could not schedule a delivery; the sweep will',
      )
    }
  }

  async function publish<T extends EventType>(
    type: T,
    data: EventData[T],
    opts: PublishOptions = {},
  ): Promise<GatewayEvent<T> | null> {
    const at = now()
    const event: GatewayEvent<T> = { id: newId('evt'), type, timestamp: new Date(at).toISOString(), data }
    const endpoints =
      opts.endpointId !== undefined
        ? [opts.endpointId]
        : (await store.listEndpoints()).filter((e) => matches(e, type)).map((e) => e.id)
    const deliveries = endpoints.map((endpointId) => ({ id: newId('whd'), endpointId }))
    if (!(await store.append(event, deliveries, opts.dedupeKey ?? null, at))) return null
    for (const d of deliveries) await schedule({ id: d.id, createdAt: at }, at)
    return event
  }

  async function attempt(ref: RequestRef): Promise<Outcome> {
    const delivery = await store.getDelivery(ref.id)
    if (delivery === null || delivery.status !== 'pending') return { kind: 'done' }
    const started = now()
    // Scheduled early (a sweep, a replayed job): its time has not come.
    if (delivery.nextAttemptAt !== null && delivery.nextAttemptAt > started + 50)
      return { kind: 'later', at: delivery.nextAttemptAt }
    const [endpoint, event] = await Promise.all([
      store.getEndpoint(delivery.endpointId),
      store.getEvent(delivery.eventId),
    ])
    if (endpoint === null || event === null) return { kind: 'done' }
    if (!endpoint.enabled && event.type !== 'webhook.test') return { kind: 'later', at: started + DISABLED_RECHECK_MS }
    const body = JSON.stringify({ id: event.id, type: event.type, timestamp: event.timestamp, data: event.data })
    const headers = signedHeaders(endpoint.secret, event.id, Math.floor(started / 1000), body)
    const result = await send({ url: endpoint.url, headers, body }, options.guard, options.limits)
    const attempts = delivery.attempts + 1
    const outcome: AttemptOutcome =
      result.error === null
        ? { kind: 'delivered' }
        : attempts >= retry.maxAttempts
          ? { kind: 'failed' }
          : { kind: 'retry', at: now() + backoffMs(attempts, retry, random) }
    const recorded = await store.recordAttempt(
      delivery.id,
      { at: now(), status: result.status, error: result.error, durationMs: result.durationMs },
      outcome,
    )
    const line = {
      deliveryId: delivery.id,
      eventId: event.id,
      endpointId: endpoint.id,
      status: result.status,
      attempts,
    }
    if (result.error === null) log.debug(line, 'webhook delivered')
    else
      log.info(
        { ...line, error: result.error, next: outcome.kind === 'retry' ? new Date(outcome.at).toISOString() : null },
        outcome.kind === 'failed' ? 'webhook delivery failed for good' : 'webhook delivery failed; will retry',
      )
    return recorded && outcome.kind === 'retry' ? { kind: 'later', at: outcome.at } : { kind: 'done' }
  }

  async function sweep(): Promise<void> {
    const at = now()
    const due = await store.due(at, SWEEP_BATCH)
    for (const d of due) await schedule(d, d.nextAttemptAt ?? at)
    if (at - lastPrune >= PRUNE_EVERY_MS) {
      lastPrune = at
      const pruned = await store.prune(at - options.retentionMs)
      if (pruned > 0) log.debug({ pruned }, 'webhooks: old deliveries and events pruned')
    }
  }

  // Every sweepIntervalMs during a store outage: one line when it starts failing, one when it is over.
  const sweepOutage = createTaskOutage(log, 'webhooks: sweep')
  const sweepOnce = (): Promise<void> =>
    sweep().then(
      () => sweepOutage.succeeded(),
      (error: unknown) => sweepOutage.failed(error),
    )

  function sweepLater(): void {
    if (closed) return
    sweepTimer = setTimeout(() => {
      void sweepOnce().finally(sweepLater)
    }, options.sweepIntervalMs)
    sweepTimer.unref()
  }

  return {
    publish,
    fire(type, data, opts) {
      publish(type, data, opts).catch((error: unknown) =>
        log.warn({ type, err: (error as Error).message }, 'events: an event could not be stored and is lost'),
      )
    },
    async start() {
      if (options.concurrency > 0)
        runner.start(
          (ref) =>
            attempt(ref).catch((error: unknown): Outcome => {
              log.warn({ deliveryId: ref.id, err: (error as Error).message }, 'webhooks: attempt failed; trying again')
              return { kind: 'later', at: now() + retry.baseDelayMs }
            }),
          options.concurrency,
        )
      await sweepOnce()
      sweepLater()
    },
    async replay(deliveryId) {
      const original = await store.getDelivery(deliveryId)
      if (original === null) return null
      const at = now()
      const delivery = await store.addDelivery(
        original.eventId,
        { id: newId('whd'), endpointId: original.endpointId, replayOf: original.id },
        at,
      )
      if (delivery !== null) await schedule(delivery, at)
      return delivery
    },
    async close(graceMs = 0) {
      closed = true
      clearTimeout(sweepTimer)
      await runner.close(graceMs)
    },
  }
}

// The webhooks' state, as a port: the endpoints (with their signing secrets), the outbox of
// events and one delivery per (event, endpoint), and each delivery's attempts. An event and
// its deliveries are committed in one write (one SQLite transaction, one Lua script), so an
// event is either in the outbox with every delivery it will ever need, or not at all.
// Delivery itself is the dispatcher's (dispatcher.ts); the store only says what is due.
// Two adapters, embedded (webhooks.db) and Redis (`<prefix>{tg}:wh:…`), pass one contract
// test (test/webhooks/store-contract.ts).
import type { EventType, GatewayEvent } from '../events/types.ts'

export interface WebhookEndpoint {
  /** `whe_` + 24 hex. */
  readonly id: string
  readonly url: string
  readonly description: string | null
  /** The types delivered to it; null: every type (but `webhook.test`, sent on request only). */
  readonly eventTypes: readonly EventType[] | null
  readonly enabled: boolean
  /** `whsec_` + base64 of 32 random bytes: shown once, kept to sign, never logged. */
  readonly secret: string
  readonly createdAt: string
  readonly updatedAt: string
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed'

export interface Delivery {
  /** `whd_` + 24 hex. */
  readonly id: string
  readonly endpointId: string
  readonly eventId: string
  readonly eventType: EventType
  readonly status: DeliveryStatus
  /** Attempts made so far. */
  readonly attempts: number
  /** Epoch ms of the next attempt while pending; null once it is delivered or failed. */
  readonly nextAttemptAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
  /** The HTTP status of the last attempt that got an answer, if any. */
  readonly lastStatus: number | null
  /** Why the last attempt failed (no answer, refused address, a redirect...), if it did. */
  readonly lastError: string | null
  /** The delivery this one replays, if it is a replay. */
  readonly replayOf: string | null
}

export interface Attempt {
  readonly at: number
  /** The HTTP status the endpoint answered; null when none (refused, timed out, unreachable). */
  readonly status: number | null
  readonly error: string | null
  readonly durationMs: number
}

/** What an attempt ended as, and so what the delivery becomes. */
export type AttemptOutcome =
  { readonly kind: 'delivered' } | { readonly kind: 'retry'; readonly at: number } | { readonly kind: 'failed' }

export interface NewDelivery {
  readonly id: string
  readonly endpointId: string
}

export interface DeliveryPage {
  readonly data: Delivery[]
  readonly hasMore: boolean
}

export interface WebhookStore {
  readonly kind: 'embedded' | 'redis'

  createEndpoint(endpoint: WebhookEndpoint): Promise<void>
  /** Oldest first. */
  listEndpoints(): Promise<WebhookEndpoint[]>
  getEndpoint(id: string): Promise<WebhookEndpoint | null>
  /** Replaces the endpoint; false when there is none by that id. */
  updateEndpoint(endpoint: WebhookEndpoint): Promise<boolean>
  /** Removes the endpoint and its pending deliveries; false when there was none. */
  deleteEndpoint(id: string): Promise<boolean>

  /**
   * Commits the event and its deliveries in one write; false (and nothing written) when an
   * event with the same dedupe key is kept already.
   */
  append(
    event: GatewayEvent,
    deliveries: readonly NewDelivery[],
    dedupeKey: string | null,
    now: number,
  ): Promise<boolean>
  getEvent(id: string): Promise<GatewayEvent | null>
  getDelivery(id: string): Promise<Delivery | null>
  /** A new pending delivery of an event already kept (a replay); null when the event or the endpoint is gone. */
  addDelivery(
    eventId: string,
    delivery: NewDelivery & { readonly replayOf: string | null },
    now: number,
  ): Promise<Delivery | null>
  /**
   * Records an attempt of a pending delivery and what it becomes. False (nothing recorded)
   * when it was not pending: another worker finished it, or its endpoint was deleted.
   */
  recordAttempt(id: string, attempt: Attempt, outcome: AttemptOutcome): Promise<boolean>
  attempts(id: string): Promise<Attempt[]>
  /** An endpoint's deliveries, newest first, after the one with id `after`. */
  listDeliveries(endpointId: string, page: { readonly after?: string; readonly limit: number }): Promise<DeliveryPage>
  /** Pending deliveries whose next attempt is due by `until`, soonest first, at most `limit`. */
  due(until: number, limit: number): Promise<Array<Pick<Delivery, 'id' | 'createdAt' | 'nextAttemptAt'>>>
  /** Drops events, deliveries and attempts finished (or created, for events) before `before`. */
  prune(before: number): Promise<number>

  ping(): Promise<boolean>
  close(): Promise<void>
}

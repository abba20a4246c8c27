// The gateway's events: what happened, said once, for whoever listens (today, the webhook
// endpoints of src/webhooks/). Each has a unique id (`evt_…`, what a receiver dedupes on:
// a retried delivery carries the same id), a type from the table below, a timestamp and
// its data. Publishing is one call on the Events port from anywhere; the publisher decides
// nothing about delivery.
//
// A type is named `<object>.<what happened>` and never reused for another meaning; its
// data only grows (a receiver must ignore fields it does not know).
import type { BudgetPeriod } from '../budgets/period.ts'
import type { BudgetScope, BudgetThresholdEvent } from '../budgets/port.ts'

/** Every event type and what its `data` holds. */
export interface EventData {
  /** A key was made (admin API, CLI or portal). Never the secret nor its hash. */
  'key.created': KeyEventData
  /** A key got a new secret; the old one works until `rotation_grace_until` (null: no longer). */
  'key.rotated': KeyEventData & { readonly rotation_grace_until: string | null }
  'key.revoked': KeyEventData & { readonly revoked_at: string | null }
  /** A key expires within `webhooks.keyExpiringWithinDays`: said once per expiry date. */
  'key.expiring': KeyEventData & { readonly expires_at: string; readonly days_left: number }
  /** A key's expiry has passed: said once per expiry date. */
  'key.expired': KeyEventData & { readonly expires_at: string }
  /**
   * A call of this key was refused by its rate limit. Sampled: at most once per key per
   * limits window (`window_start` names it), however many calls were refused in it.
   */
  'key.rate_limited': {
    readonly key_id: string
    readonly model: string
    readonly limit: 'requests' | 'tokens'
    readonly window_start: string
    readonly window_ms: number
  }
  /** A RAG gateway account was made. */
  'user.created': UserEventData
  /** An account was disabled (it was enabled before). */
  'user.disabled': UserEventData
  /**
   * The login throttle started refusing an address: on one username (`scope: user_address`)
   * or on every username (`scope: address`). Once per block, not per refused attempt.
   */
  'user.locked_out': {
    readonly username: string
    readonly address: string
    readonly scope: 'user_address' | 'address'
    readonly until: string
  }
  /**
   * An upstream deployment has no room: full (its declared rpm/tpm/maxConcurrent, or what
   * its headers taught) or cooling down after a 429/503. Sampled: at most once per
   * deployment per minute (`minute` names it).
   */
  'deployment.saturated': {
    readonly deployment: string
    readonly reason: 'full' | 'cooling_down'
    readonly until: string | null
    readonly minute: string
  }
  /**
   * A budget crossed one of its thresholds (percent of its amount) in a period: at most once
   * per threshold per period. Published by the budgets (issue #23, part 1) through
   * `budgetThresholdEvent`.
   */
  'budget.threshold': {
    readonly scope: BudgetScope
    readonly id: string
    readonly period: BudgetPeriod
    readonly period_start: string
    readonly threshold: number
    readonly spent: number
    readonly amount: number
    readonly currency: string
  }
  /**
   * A call's text matched its guardrail policy (docs/guardrails.md): blocked, masked or
   * flagged (`action`, the strictest taken). Which detectors and where; never the text.
   */
  'guardrail.triggered': {
    readonly key_id: string
    readonly request_id: string
    readonly policy: string
    /** `rewrite`: an external webhook check gave new text (docs/guardrails.md, "External checks"). */
    readonly action: 'block' | 'mask' | 'flag' | 'rewrite'
    readonly endpoint: string
    readonly detectors: readonly string[]
    readonly paths: readonly string[]
    /** An external check's decision: which, and what it said (a deny's reason code); never the text. */
    readonly check?: { readonly name: string; readonly verdict: string; readonly reason?: string }
  }
  /** Sent by POST /admin/webhooks/{id}/test only, to that endpoint. */
  'webhook.test': { readonly endpoint_id: string }
  /** A batch (docs/batches.md) ended with every line run. */
  'batch.completed': BatchEventData
  /** A batch's input file did not validate: nothing ran. */
  'batch.failed': BatchEventData
  /** A batch's 24 hours passed before its lines all ran. */
  'batch.expired': BatchEventData
  /** A batch was cancelled: its lines that had run are in its output. */
  'batch.cancelled': BatchEventData
}

export interface BatchEventData {
  readonly batch_id: string
  readonly key_id: string
  readonly owner: string
  readonly status: 'completed' | 'failed' | 'expired' | 'cancelled'
  readonly request_counts: { readonly total: number; readonly completed: number; readonly failed: number }
  readonly output_file_id: string | null
  readonly error_file_id: string | null
}

export interface KeyEventData {
  readonly key_id: string
  readonly name: string | null
  readonly owner: string | null
  readonly tier: string | null
  readonly prefix: string
}

export interface UserEventData {
  readonly user_id: string
  readonly username: string
  readonly tenant: string
}

export type EventType = keyof EventData

/** Every type, in the order the docs list them; a webhook endpoint filters on these. */
export const EVENT_TYPES = [
  'key.created',
  'key.rotated',
  'key.revoked',
  'key.expiring',
  'key.expired',
  'key.rate_limited',
  'user.created',
  'user.disabled',
  'user.locked_out',
  'deployment.saturated',
  'budget.threshold',
  'guardrail.triggered',
  'webhook.test',
  'batch.completed',
  'batch.failed',
  'batch.expired',
  'batch.cancelled',
] as const satisfies readonly EventType[]

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value)
}

/** One event, as it is stored and as a webhook body carries it. */
export interface GatewayEvent<T extends EventType = EventType> {
  /** `evt_` + 24 hex: unique; the webhook-id of every delivery of it. */
  readonly id: string
  readonly type: T
  /** ISO 8601, when it happened. */
  readonly timestamp: string
  readonly data: EventData[T]
}

export interface PublishOptions {
  /**
   * Events with the same dedupe key are one event: a second publish of it (from this or
   * another instance, before or after a restart) stores nothing and answers null. What
   * makes "once per occurrence" hold for events that are noticed more than once (an
   * expiry seen by every instance's scan, a threshold crossed by concurrent calls).
   */
  readonly dedupeKey?: string
  /** Deliver to this endpoint only, whatever its filters (the test event). */
  readonly endpointId?: string
}

/** The one way anything publishes an event. */
export interface Events {
  /**
   * Stores the event in the outbox (with a delivery per matching endpoint) and resolves once
   * it is committed; null when its dedupe key was seen. Throws when the store cannot take
   * it (StoreUnavailableError): a caller on a request path should not wait on it (`fire`).
   */
  publish<T extends EventType>(type: T, data: EventData[T], options?: PublishOptions): Promise<GatewayEvent<T> | null>
  /** publish without waiting: a failure is logged, never thrown (rate limits, lockouts). */
  fire<T extends EventType>(type: T, data: EventData[T], options?: PublishOptions): void
}

/** Publishes nothing: where no events are wanted (tests, embedders). */
export const noEvents: Events = {
  publish: async () => null,
  fire: () => undefined,
}

/**
 * What the budgets call when a threshold is crossed (the hook `onBudgetThreshold` of issue
 * #23's part 1), as an event: once per budget, period and threshold.
 */
export function budgetThresholdEvent(
  events: Events,
  crossed: BudgetThresholdEvent,
): Promise<GatewayEvent<'budget.threshold'> | null> {
  return events.publish(
    'budget.threshold',
    {
      scope: crossed.scope,
      id: crossed.id,
      period: crossed.period,
      period_start: crossed.periodStart,
      threshold: crossed.threshold,
      spent: crossed.spent,
      amount: crossed.amount,
      currency: crossed.currency,
    },
    {
      dedupeKey: `budget.threshold:${crossed.scope}:${crossed.id}:${crossed.period}:${crossed.periodStart}:${crossed.threshold}:${crossed.amount}`,
    },
  )
}

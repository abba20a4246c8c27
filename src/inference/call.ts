// The nouns of the corridor (corridor.ts): what it is built from, the call it prepares,
// where the reply goes, what it notes on the way, and how the call ended. Types only, so
// the corridor's steps (intake.ts, reply.ts, outcome.ts) share them without importing
// one another.
import type { ApiKeyAuthenticator } from '../auth/api-key.ts'
import type { ResponseCache } from '../cache/index.ts'
import type { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import type { StreamGate } from '../proxy/relay.ts'
import type { UpstreamRequest, Usage } from '../backends/port.ts'
import type { Config, ServiceClass } from '../config/schema.ts'
import type { FairCapacity } from '../fairness/capacity-share.ts'
import type { ErrorName } from '../errors.ts'
import type { FileQuota, UploadHold } from '../files/quota.ts'
import type { Guardrails } from '../guardrails/create.ts'
import type { RequestBody } from '../http/body.ts'
import type { Params } from '../http/router.ts'
import type { Meter } from '../keys/meter.ts'
import type { Principal } from '../keys/record.ts'
import type { StreamJournalService } from '../keys/stream-journal.ts'
import type { Estimate } from '../limits/estimate.ts'
import type { ResolvedLimits } from '../limits/plans.ts'
import type { Admission, AdmissionRequest, Limiter, OnceCharge } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { Span } from '../observability/tracing.ts'
import type { ReplySink } from '../proxy/reply-sink.ts'
import type { Runtime, RuntimeSource } from '../runtime/snapshot.ts'
import type { OwnershipStore } from '../store/ports.ts'
import type { EndpointSpec } from './endpoints.ts'

export interface InferenceDeps {
  /** The boot's configuration: only settings a reload cannot change (server.*) are read from it. */
  readonly config: Config
  /**
   * The runtime snapshot in force (plans, models and deployments, backends, capacity): each
   * call reads it once, when it starts, and keeps it (PreparedCall.runtime).
   */
  readonly runtime: RuntimeSource
  readonly authenticate: ApiKeyAuthenticator
  readonly limiter: Limiter
  /** Backends that keep refusing connections are tried last (GET /admin/backends shows it); absent: one of its own. */
  readonly breaker?: CircuitBreaker
  readonly ownership: OwnershipStore
  /** Files per key (storageCaps): uploads hold room first, deletes give it back. */
  readonly fileQuota?: FileQuota
  readonly meter: Meter
  readonly metrics: Metrics
  readonly spoolDir: string
  /** Journals live streams as they flow, so a crash still charges them (keys/stream-journal.ts). */
  readonly streams?: StreamJournalService
  /** Replies served again for the same call in the same scope (src/cache/); absent: none. */
  readonly cache?: ResponseCache
  /** Checks a prepared call's text under its policy: refuses, masks or flags it (guardrails/). Absent: none. */
  readonly guardrails?: Guardrails
  /** /v2 keeps part of a contended deployment for parties below their fair share (fairness/capacity-share.ts). Absent: first come first served. */
  readonly fairCapacity?: FairCapacity
}

/** A call that passed every check before admission: who, what, which limits, what it may cost. */
export interface PreparedCall {
  /**
   * The configuration the call started on, to its end: its model's deployments, its
   * tier's limits, the adapters and the capacity it is sent through. A reload meanwhile
   * changes the next calls, not this one.
   */
  readonly runtime: Runtime
  readonly spec: EndpointSpec
  readonly params: Params
  readonly query: URLSearchParams
  readonly principal: Principal
  readonly body: RequestBody
  /** The public model the body names, or null for endpoints without one. */
  readonly modelName: string | null
  readonly resolved: ResolvedLimits
  readonly estimate: Estimate
  /** Its priority class (service_tier; priority/classes.ts): already in `resolved`'s prices and shares. Absent: default. */
  readonly serviceClass?: ServiceClass
  /** How long its caller can wait in the queue (x-tollgate-max-wait-ms; queue/deadline.ts). */
  readonly maxWaitMs?: number
  /** An upload's room under its key's file caps, held until the reply (files.create). */
  readonly upload?: UploadHold
  /** Puts the values its guardrails masked back into a whole reply (guardrails/, `restore`). */
  readonly unmask?: (reply: unknown) => unknown
  /** A whole reply judged by the policy's external checks with `replies: true`: the reply rewritten, or undefined (unchanged); throws to stop it. */
  readonly replyExternal?: (reply: unknown) => Promise<unknown>
  /** True once an external reply check failed open on this call's reply: it went out unjudged (never cached). */
  readonly replyUnjudged?: () => boolean
  /** Checks the model's reply (a policy's `replies:`): a whole one, or a stream through a fresh gate per attempt. */
  readonly replyCheck?: ReplyCheck
}

export interface ReplyCheck {
  /** Throws guardrail_blocked when a whole reply must not go out. */
  whole(reply: unknown): void
  gate(): StreamGate
}

/** What the access log (or a queue record) reads once the call is over. RequestContext is one. */
export interface CallNotes {
  backend?: string
  usage?: Usage
  upstreamMs?: number
  stream?: boolean
  errorName?: ErrorName
}

/** Where a call's reply goes. */
export interface Exchange {
  /** Sent upstream as x-request-id. */
  readonly id: string
  readonly log: Logger
  /** Aborted when nobody wants the reply any more (the client left, the request was cancelled). */
  readonly signal: AbortSignal
  /** What the relay writes the reply to. */
  readonly sink: ReplySink
  /** The exchange an adapter proxies (http-proxy-3 reads the method from it and watches it). */
  readonly client: UpstreamRequest['client']
  readonly notes: CallNotes
  /** The call's span: its steps are recorded under it (observability/call-spans.ts). Absent: none. */
  readonly trace?: Span
  /**
   * A client receives the reply as it flows. Only such a stream is journalled: a stored
   * request cut by a crash delivered nothing to anyone, and runs again elsewhere.
   */
  readonly live?: boolean
  /**
   * How this run is charged, asked as it settles (a stored request's: queue/charge-once.ts).
   * Absent: as any call.
   */
  readonly chargeAs?: () => ChargeAs
}

/**
 * Once under an id (its usage row and budget spend; a run again after a crash is charged
 * nothing more), 'plain' as any call, or 'nothing': the run was cut to run again, and that
 * run is charged.
 */
export type ChargeAs = OnceCharge | 'plain' | 'nothing'

/** How the call ended, for callers that keep a record of it. */
export interface CallResult {
  /** The status the reply was given (the upstream's, or the gateway's own error). */
  readonly status: number
  readonly usage: Usage
  /** The reply stopped before its end (the client left, the request was cancelled). */
  readonly aborted: boolean
}

/** The admit step of the corridor. */
export interface AdmissionStrategy {
  /**
   * Admits the call or throws (a 429 GatewayError, or whatever ended the wait). `attempt`
   * is 0, then n after n upstream answers were put back (see retryUpstream).
   */
  admit(request: AdmissionRequest, attempt: number): Promise<Admission>
  /**
   * Whether an upstream failure (a status, before any byte of it reached the client; or
   * 502 when no deployment could be reached) is put back to be admitted again rather
   * than answered. Absent: answered, as on /v2.
   */
  retryUpstream?(status: number, attempt: number): boolean
  /**
   * Every deployment is full or cooling down until `retryAt` (epoch ms): whether the call
   * waits for one (its reservation released, admitted again at the head of its line once
   * retryAt has passed) rather than answering the gateway's upstream_capacity 429. Such a
   * wait is not an upstream retry. `deployments` are the capacity ids of the model's
   * deployments (what the wait is for). Absent: answered, as on /v2.
   */
  waitForCapacity?(retryAt: number, deployments: readonly string[]): boolean
  /**
   * A deployment was picked for the attempt (its capacity granted), before the upstream
   * answers: a call that waited for capacity lets the next waiter try.
   */
  picked?(): void
}

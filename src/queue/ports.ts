// The queue's stateful parts, as ports. The QueueStore holds the lines (one FIFO per API
// key and model, where drop-in calls and stored asynchronous requests wait their turn)
// and the stored requests with their results; the JobRunner runs stored requests whose
// turn has come, on whichever instance has a free worker. When the instance that accepts
// a request has a free worker and the request is at once the head of its line, it runs
// there at once instead, on a lease the store keeps (no other instance runs it while the
// lease holder's heartbeat lasts). Each has a Redis adapter (shared by every instance)
// and an embedded one (one process, kept on disk), and the adapters of each pass the
// same contract tests in test/queue/.
import type { TraceHeaders } from '../observability/tracing.ts'
import type { Usage } from '../backends/port.ts'
import type { Endpoint } from '../config/schema.ts'
import type { UploadedFile } from '../http/body.ts'
import type { KeyRecord } from '../keys/record.ts'
import type { Estimate } from '../limits/estimate.ts'

/** Someone waiting in a line: a drop-in call held open by one gateway, or a stored request. */
export type Ticket =
  | { readonly kind: 'call'; readonly instance: string; readonly id: string; readonly joinedAt: number }
  | { readonly kind: 'job'; readonly id: string; readonly joinedAt: number }

export interface LineSummary {
  readonly line: string
  readonly keyId: string
  readonly model: string
  readonly depth: number
  /** The ticket whose turn it is. */
  readonly head: Ticket | null
}

export const REQUEST_STATUSES = ['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'expired'] as const
export type RequestStatus = (typeof REQUEST_STATUSES)[number]
export type FinalStatus = Exclude<RequestStatus, 'queued' | 'in_progress'>

export function isFinal(status: RequestStatus): status is FinalStatus {
  return status !== 'queued' && status !== 'in_progress'
}

/**
 * The status a client sees: a finished request reads "expired" once its result's time is
 * up, and so does one still waiting after as long (the worker then finishes it so). Both
 * stores filter lists by it.
 */
export function statusAt(
  request: Pick<QueuedRequest, 'status' | 'createdAt' | 'finishedAt'>,
  now: number,
  ttlMs: number,
): RequestStatus {
  if (isFinal(request.status))
    return request.finishedAt !== null && request.finishedAt + ttlMs <= now ? 'expired' : request.status
  if (request.status === 'queued' && request.createdAt + ttlMs <= now) return 'expired'
  return request.status
}

/** A request body as stored: multipart bytes are kept apart (QueueStore.body). */
export type StoredBody =
  | { readonly kind: 'json'; readonly value: Record<string, unknown> }
  | {
      readonly kind: 'multipart'
      readonly contentType: string
      readonly fields: Readonly<Record<string, string>>
      readonly files: readonly UploadedFile[]
      readonly size: number
    }
  | { readonly kind: 'none' }

/** What was asked, as accepted: enough for any instance to run it later. */
export interface StoredCall {
  readonly endpoint: Endpoint
  /** The public model name, or null. */
  readonly model: string | null
  readonly params: Readonly<Record<string, string>>
  /** The query string, without '?'. */
  readonly query: string
  readonly body: StoredBody
  /** The admission estimate made when it was accepted. */
  readonly estimate: Estimate
  /** Traces on: the span that accepted it, which the run continues and links to. */
  readonly trace?: TraceHeaders
  /**
   * The API the caller spoke, when not the endpoint's own: the request was translated into
   * the endpoint's at the door (a Messages request is run as a chat completion), and its
   * result is shown back in the caller's (queue/view.ts). Absent: the endpoint's own.
   */
  readonly protocol?: CallerProtocol
  /**
   * A batch's line (src/batches/): it waits behind every other class in its key's line and
   * runs in the lowest (priority/classes.ts batchClass), priced at its tier's batch price.
   */
  readonly batch?: true
}

/** The APIs a stored request may have been asked in besides the endpoint's own. */
export type CallerProtocol = 'anthropic'

/** The reply a stored request got. */
export interface StoredResult {
  readonly statusCode: number
  readonly contentType: string | null
  /** How `body` holds the reply: parsed JSON, text, base64 of other bytes, or nothing. */
  readonly encoding: 'json' | 'text' | 'base64' | 'none'
  readonly body: unknown
  /** The tokens charged for it (all attempts). */
  readonly usage: Usage
}

export interface QueuedRequest {
  readonly id: string
  readonly keyId: string
  /** The key's owner (or the key id): keys of one owner see each other's requests. */
  readonly owner: string
  /** The key's tier when it was accepted (its priority among busy workers). */
  readonly tier: string
  readonly line: string
  /** Epoch ms. */
  readonly createdAt: number
  readonly call: StoredCall
  readonly status: RequestStatus
  /** Admissions so far (each upstream try is one). */
  readonly attempts: number
  readonly startedAt: number | null
  readonly finishedAt: number | null
  /** DELETE came while it ran: the instance running it aborts it. */
  readonly cancelRequested: boolean
  /** Set when it finished with a reply, until the result's time is up. */
  readonly result: StoredResult | null
  /**
   * The instance it is leased to, if any: that instance runs it on its own worker, not
   * through the shared JobRunner, until it finishes or hands it back (QueueStore.release).
   */
  readonly runner: string | null
}

export type NewRequest = Pick<QueuedRequest, 'id' | 'keyId' | 'owner' | 'tier' | 'line' | 'createdAt' | 'call'>

/**
 * A stored request without its body, as lists read it: a list never loads the bodies of
 * the requests it shows (a key's pending bodies may weigh its whole byte cap).
 */
export type RequestSummary = Omit<QueuedRequest, 'call'> & { readonly call: Omit<StoredCall, 'body'> }

/** A page of an owner's requests, newest first. */
export interface RequestPage {
  readonly data: RequestSummary[]
  /** Whether more requests (of the status asked, if any) follow the last one. */
  readonly hasMore: boolean
}

/**
 * What one key may keep stored and not yet finished (queued or in_progress): how many
 * requests, and how many bytes of bodies (the JSON body as stored plus multipart bytes).
 */
export interface PendingCaps {
  readonly requests: number
  readonly bytes: number
}

/** A key's stored requests not yet finished, and their bodies' bytes. */
export interface Pending {
  readonly requests: number
  readonly bytes: number
}

/** QueueStore.submit refused a request: its key's pending requests are at a cap. */
export class QueueFullError extends Error {
  override readonly name = 'QueueFullError'
  readonly pending: Pending
  readonly size: number
  constructor(pending: Pending, size: number) {
    super(
      `the key's pending stored requests are at their cap (${pending.requests} requests, ${pending.bytes} bytes; this one ${size} bytes)`,
    )
    this.pending = pending
    this.size = size
  }
}

/**
 * QueueStore.submit refused a request: a request was submitted under its id already (its
 * record is there, or is gone but the id was kept: `keepIdUntil`).
 */
export class RequestTakenError extends Error {
  override readonly name = 'RequestTakenError'
  readonly id: string
  constructor(id: string) {
    super(`a stored request was already submitted under ${id}`)
    this.id = id
  }
}

/** What a store needs to find a request and its ticket. */
export type RequestRef = Pick<QueuedRequest, 'id' | 'line' | 'createdAt'>

/** A leased request as QueueStore.leases lists it. */
export interface Lease {
  readonly request: RequestRef
  readonly runner: string
  /** Whether the runner's heartbeat is current: a lease of a gateway that stopped is handed back. */
  readonly alive: boolean
}

export interface StoreRetention {
  /** How long a finished request's result is kept. Its record stays as long again, reading "expired". */
  readonly resultTtlMs: number
}

export interface QueueStore {
  readonly kind: 'redis' | 'embedded'

  // Lines. The ticket whose turn it is (the head) is the only one that may try admission.

  /** A new request id for a request of `keyId` (on Redis it names the shard the key's requests live on). */
  newId(keyId: string): string
  /**
   * Puts the ticket at the back of the line (or the front: a call put back after an upstream
   * failure). Returns how many are ahead. `band` (priority/classes.ts bandOf) places it among
   * its class: the back of its band, behind every lower band and before every higher one.
   */
  join(line: string, ticket: Ticket, place?: 'back' | 'front', band?: number): Promise<number>
  /** Takes the ticket out of its line. Returns the new head if the ticket was the head and someone follows. */
  leave(line: string, ticket: Ticket): Promise<Ticket | null>
  /** Whose turn it is in the line, if anyone's. */
  head(line: string): Promise<Ticket | null>
  /** How many are ahead of the ticket, or null when it is not in the line. */
  position(line: string, ticket: Ticket): Promise<number | null>
  /** Every line with someone in it. */
  lines(): Promise<LineSummary[]>
  /**
   * Takes out tickets nobody will ever serve (calls of gateways whose heartbeat ran out,
   * requests whose record is gone) and returns the head of every line. Null when another
   * instance swept within `intervalMs`.
   */
  sweep(intervalMs: number): Promise<Array<{ readonly line: string; readonly head: Ticket }> | null>
  /** This gateway is alive for `ttlMs` more: its calls stay in line. */
  heartbeat(instance: string, ttlMs: number): Promise<void>
  /** Whether the gateway's heartbeat is current (what else it left behind may be taken over when not). */
  isAlive(instance: string): Promise<boolean>

  // Stored (asynchronous) requests.

  /**
   * Stores a new request (its multipart bytes too) and puts it at the back of its line.
   * Returns how many are ahead. With `runner`, a request that is at once the head of its
   * line is leased to that instance (see QueuedRequest.runner). With `caps`, a request that
   * would take its key's pending requests past either cap is refused (QueueFullError),
   * atomically with the count: concurrent submits cannot overshoot it. An id submitted
   * before is refused (RequestTakenError); with `keepIdUntil` (epoch ms), so is this one
   * until then, even after its record is gone: a batch's line whose submit may be tried
   * again after any downtime (batches/runner.ts) is taken once.
   */
  submit(
    request: NewRequest,
    body: Buffer | null,
    runner?: string,
    caps?: PendingCaps,
    keepIdUntil?: number,
  ): Promise<number>
  /** A key's pending (queued or in_progress) requests and their bodies' bytes. */
  pending(keyId: string): Promise<Pending>
  /** A request with its body (a finished request's body is gone: `{ kind: 'none' }`). */
  get(id: string): Promise<QueuedRequest | null>
  /** The multipart bytes of a request not yet finished. */
  body(id: string): Promise<Buffer | null>
  /**
   * An owner's requests, newest first, after the one with id `after`; with `status`, only
   * those a client sees in that status (statusAt). The page is full while more match, and
   * hasMore says exactly whether more match. Bodies are not read.
   */
  list(
    owner: string,
    page: { readonly after?: string | undefined; readonly limit: number; readonly status?: RequestStatus | undefined },
  ): Promise<RequestPage>
  /**
   * Admitted: queued (or in_progress, run again after its gateway stopped) → in_progress,
   * out of its line, attempts + 1. Not started when it was finished or cancel was asked,
   * nor when `runner` (none: the shared JobRunner) is not the instance it is leased to.
   */
  start(
    request: RequestRef,
    now: number,
    runner?: string,
  ): Promise<{ readonly started: boolean; readonly next: Ticket | null }>
  /** Ends `runner`'s lease on the request (a final status ends it too). Returns whether it held one. */
  release(request: RequestRef, runner: string): Promise<boolean>
  /** The leases of unfinished requests, with whether their runners are alive. */
  leases(): Promise<Lease[]>
  /** An upstream failure to try again: in_progress → queued, at the front of its line. */
  requeue(request: RequestRef): Promise<boolean>
  /** queued or in_progress → a final status (with the reply, if any); out of its line. */
  finish(
    request: RequestRef,
    status: FinalStatus,
    result: StoredResult | null,
    now: number,
  ): Promise<{ readonly finished: boolean; readonly next: Ticket | null }>
  /**
   * queued → cancelled (out of its line); in_progress → cancelRequested (whoever runs it
   * aborts it). Returns the status it had (null: no such request).
   */
  cancel(
    request: RequestRef,
    now: number,
  ): Promise<{ readonly was: RequestStatus | null; readonly next: Ticket | null }>

  ping(): Promise<boolean>
  close(): Promise<void>
}

export type Outcome =
  /** Done with it for now: finished, or not its turn (it is scheduled again when it is). */
  | { readonly kind: 'done' }
  /** Try again at this time (epoch ms): over the limit until then, or backing off. */
  | { readonly kind: 'later'; readonly at: number }

/** A request leased to this instance as it was accepted, with its key: it runs without reading either again. */
export interface Held {
  readonly request: QueuedRequest
  readonly key: KeyRecord
}

/** Runs one stored request whose turn has come (`held`: on this instance's lease). Never throws. */
export type Processor = (request: RequestRef, signal: AbortSignal, held?: Held) => Promise<Outcome>

/** A worker of this instance kept free for one request. */
export interface WorkerSlot {
  /**
   * Runs a request leased to this instance on the kept worker at once, not through the
   * shared queue. An outcome of 'later' goes to `handBack` (with the time it may run) once
   * the run is over: the coordinator schedules it, then ends its lease (Coordinator.handBackHeld).
   */
  run(request: RequestRef, held: Held, handBack: (at: number) => Promise<void>): void
  /** Gives the worker back unused. */
  free(): void
}

export interface JobRunner {
  /**
   * Makes a stored request runnable, now or after `delayMs`. Idempotent: a request already
   * scheduled (waiting, delayed or running) is left as it is.
   */
  schedule(request: RequestRef, options?: { readonly delayMs?: number; readonly priority?: number }): Promise<void>
  /** A request delayed until later may run now (capacity was given back). */
  wake(id: string): Promise<void>
  /**
   * Starts running scheduled requests, at most `concurrency` at once, in the order they
   * became runnable (lower priority first). Without start() this instance only schedules.
   */
  start(processor: Processor, concurrency: number): void
  /** A worker of this instance that is free now, kept for one request; null when none is (or none was started). */
  claim(): WorkerSlot | null
  /** Whether its worker runs (or none was started). */
  healthy(): boolean
  /** Stops taking requests; waits for running ones up to `graceMs`, then aborts them. */
  close(graceMs?: number): Promise<void>
}

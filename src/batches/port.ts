// A batch (OpenAI's Batch API) as the gateway keeps it: the record a client sees, and its
// lines. The record is written by the instance that holds the batch's lease (its runner);
// a client's cancel is kept apart (`cancelAt`) so it never races the runner's writes. Each
// line runs as a stored /queue request (its id is kept before it is submitted, so a
// restart submits it again only if the queue never took it). Two adapters: embedded
// (SQLite) and Redis, which pass the same contract tests.
import type { Endpoint } from '../config/schema.ts'

export const BATCH_STATUSES = [
  'validating',
  'failed',
  'in_progress',
  'finalizing',
  'completed',
  'expired',
  'cancelling',
  'cancelled',
] as const
export type BatchStatus = (typeof BATCH_STATUSES)[number]

const FINAL: ReadonlySet<BatchStatus> = new Set(['failed', 'completed', 'expired', 'cancelled'])
export const isFinalBatch = (status: BatchStatus): boolean => FINAL.has(status)

/** One thing wrong with an input file (OpenAI's BatchError). */
export interface BatchError {
  readonly code: string
  readonly message: string
  readonly param: string | null
  /** 1-based line of the input file, or null for the file as a whole. */
  readonly line: number | null
}

export interface BatchCounts {
  readonly total: number
  readonly completed: number
  readonly failed: number
}

export interface BatchRecord {
  readonly id: string
  readonly owner: string
  readonly keyId: string
  readonly endpoint: Endpoint
  /** The endpoint as the client named it (/v1/chat/completions or /v2/chat/completions). */
  readonly endpointPath: string
  readonly inputFileId: string
  readonly completionWindow: string
  readonly metadata: Readonly<Record<string, string>> | null
  readonly status: BatchStatus
  /** Epoch ms of each step reached. */
  readonly createdAt: number
  readonly expiresAt: number
  readonly inProgressAt: number | null
  readonly finalizingAt: number | null
  readonly completedAt: number | null
  readonly failedAt: number | null
  readonly expiredAt: number | null
  readonly cancelledAt: number | null
  readonly outputFileId: string | null
  readonly errorFileId: string | null
  readonly errors: readonly BatchError[] | null
  readonly counts: BatchCounts
  /** The model of the lines, when they all name one. */
  readonly model: string | null
  /** Tokens charged so far, over every line. */
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
  /** Epoch ms a client asked to cancel (kept apart from the runner's writes), or null. */
  readonly cancelAt: number | null
}

/** How one line ended. */
export type LineResult =
  | { readonly kind: 'response'; readonly statusCode: number; readonly requestId: string; readonly body: unknown }
  | { readonly kind: 'error'; readonly code: string; readonly message: string }

export interface BatchLine {
  readonly index: number
  readonly customId: string
  readonly body: Record<string, unknown>
  /** The stored /queue request it runs as, once chosen (before it is submitted). */
  readonly queueId: string | null
  /**
   * The queue took it (its enqueue succeeded): false while only chosen. Absent on lines kept
   * before it was recorded. A line the queue took and no longer knows is not submitted again.
   */
  readonly submitted?: boolean
  readonly result: LineResult | null
}

/** What the runner changes of a line. */
export type LinePatch = Partial<Pick<BatchLine, 'queueId' | 'submitted' | 'result'>>

export interface BatchPage {
  readonly data: BatchRecord[]
  readonly hasMore: boolean
}

/** What the runner writes on a record (never `cancelAt`, which only cancel() sets). */
export type BatchPatch = Partial<Omit<BatchRecord, 'id' | 'owner' | 'keyId' | 'createdAt' | 'cancelAt'>>

export interface BatchStore {
  readonly kind: 'redis' | 'embedded'
  /** Stores a new batch unless its key has `maxActive` unfinished ones already (false then). */
  create(record: BatchRecord, maxActive: number): Promise<boolean>
  get(id: string): Promise<BatchRecord | null>
  /** An owner's batches, newest first, after the one with id `after`. */
  list(owner: string, page: { readonly after?: string | undefined; readonly limit: number }): Promise<BatchPage>
  /**
   * The runner's write; returns the record as it now stands (null: no such batch). With
   * `holder`, written only while that instance holds the batch's lease (null otherwise): an
   * instance whose lease lapsed (a finalize longer than the lease) writes nothing over the
   * instance that took the batch on.
   */
  update(id: string, patch: BatchPatch, holder?: string): Promise<BatchRecord | null>
  /** Marks a cancel asked at `now` (once: a later ask keeps the first time). */
  cancel(id: string, now: number): Promise<BatchRecord | null>
  /** Ids of the batches not yet finished, oldest first. */
  active(): Promise<string[]>
  /** Takes or renews the batch's lease for `instance`; false while another instance's lease lasts. */
  lease(id: string, instance: string, ttlMs: number): Promise<boolean>
  /** Gives the lease up (a finished batch, a gateway closing). */
  unlease(id: string, instance: string): Promise<void>
  putLines(id: string, lines: readonly BatchLine[]): Promise<void>
  lines(id: string): Promise<BatchLine[]>
  setLine(id: string, index: number, patch: LinePatch): Promise<void>
  ping(): Promise<boolean>
  close(): Promise<void>
}

/** A batch as it is created: validating, nothing run, nothing written (the routes; the store tests). */
export function newBatchRecord(
  created: Pick<
    BatchRecord,
    | 'id'
    | 'owner'
    | 'keyId'
    | 'endpoint'
    | 'endpointPath'
    | 'inputFileId'
    | 'completionWindow'
    | 'metadata'
    | 'createdAt'
    | 'expiresAt'
  >,
): BatchRecord {
  return {
    ...created,
    status: 'validating',
    inProgressAt: null,
    finalizingAt: null,
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancelledAt: null,
    outputFileId: null,
    errorFileId: null,
    errors: null,
    counts: { total: 0, completed: 0, failed: 0 },
    model: null,
    usage: { inputTokens: 0, outputTokens: 0 },
    cancelAt: null,
  }
}

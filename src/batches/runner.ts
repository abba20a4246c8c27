// Drives batches to their end, on whichever instance holds a batch's lease (any instance
// takes a batch whose lease has lapsed: its gateway stopped). A batch's lines do not run
// here: each is submitted as a stored /queue request, and the queue's workers (any
// instance's) run it through the corridor like any stored request: scopes and ownership
// checked again, admitted by the key's limits and budgets in its line, sent where there is
// capacity, metered once. The runner keeps a window of lines in the queue, collects what
// each got, and writes the output and error files at the end.
//
// Exactly once: a line's queue id is kept before it is submitted, and that the queue took
// it once it did; after a restart a line with an id is submitted again only when the queue
// never took it. One it took and no longer knows (its result was purged: the gateway was
// down longer than queue.resultTtlSeconds) ends as an error, never runs again. The queue
// itself runs and charges each stored request once (queue/charge-once.ts).
//
// Between the queue taking a line and `submitted` being written, a crash leaves a line the
// runner cannot place from its own record: a 404 then is either "never taken" or "taken and
// purged" (after downtime longer than the queue keeps records and charge ids, 2 ×
// resultTtlSeconds). So the enqueue is what is made exact, not the guess: the queue keeps a
// line's id, in the transaction that stores it, until past the batch's expiry (after which
// nothing of it is submitted), and refuses it again (RequestTakenError), however long the
// gateway was down. A line whose submit is refused so was taken: it is marked submitted and
// read like any other. Guessing from the charge id instead would expire with the charge id,
// and would miss a line taken and never charged (still queued when its record went).
import type { ClientCalls } from '../priority/client-calls.ts'
import { GatewayError, toGatewayError } from '../errors.ts'
import { screened, type Guardrails } from '../guardrails/create.ts'
import type { Corridor } from '../inference/corridor.ts'
import { principalOf, type Principal } from '../keys/record.ts'
import type { Logger } from '../observability/logger.ts'
import type { QueueService } from '../queue/service.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { KeyStore, OwnershipStore } from '../store/ports.ts'
import { batchCapsOf } from './caps.ts'
import { deleteFile, fileText, uploadFile } from './files.ts'
import { finalize, type FinalizeDeps } from './finalize.ts'
import { batchErrorOf, parseInput, prepareLine, specOf } from './input.ts'
import { RequestTakenError } from '../queue/ports.ts'
import { LEASE_MS } from './lease.ts'
import { LineBook } from './line-book.ts'
import { lineState, type QueueView } from './line-state.ts'
import {
  isFinalBatch,
  type BatchError,
  type BatchLine,
  type BatchPatch,
  type BatchRecord,
  type BatchStore,
  type LinePatch,
} from './port.ts'

export interface BatchRunnerDeps {
  readonly store: BatchStore
  readonly queue: Pick<QueueService, 'newId' | 'enqueue' | 'read' | 'cancel'>
  readonly corridor: Corridor
  readonly ownership: OwnershipStore
  readonly runtime: RuntimeSource
  readonly keys: Pick<KeyStore, 'get'>
  readonly instance: string
  readonly log: Logger
  /** A line's text checked when it runs, under its key's policy then (guardrails/): masked as stored, or refused. */
  readonly guardrails?: Guardrails
  /** How often a batch's lines are looked at (and unled batches looked for). */
  readonly tickMs: number
  /** Lines of one batch in the queue at once. */
  readonly window: number
  /** Lines of one batch in the queue at once while clients' requests are being served here (`clientCalls`: now or in the last second). */
  readonly busyWindow?: number
  /** The client requests this instance serves now (priority/client-calls.ts); absent: never busy. */
  readonly clientCalls?: Pick<ClientCalls, 'busy'>
  /** A batch reached a final status (webhooks, audit). */
  readonly onFinished?: (batch: BatchRecord) => void
}

/**
 * How long past a batch's expiry the queue keeps its lines' ids (QueueStore.submit
 * keepIdUntil): an instance whose clock runs behind may still submit a line then.
 */
const KEEP_IDS_PAST_EXPIRY_MS = 60 * 60_000

/** Errors of a failed validation kept on the batch (OpenAI's list is bounded too). */
const MAX_ERRORS = 1000

export interface BatchRunner {
  start(): void
  /** Looks at once (a batch was created or cancelled on this instance). */
  poke(): void
  /**
   * One of the lines in the queue ended on this instance: the batches looked at go on at
   * once rather than after their pause (lines ending on another instance wait for it).
   */
  wake(): void
  close(): Promise<void>
}

const isNotFound = (error: unknown): boolean => error instanceof GatewayError && error.status === 404

export function createBatchRunner(deps: BatchRunnerDeps): BatchRunner {
  const { store, queue, log } = deps
  const busyWindow = Math.min(deps.window, deps.busyWindow ?? deps.window)
  const driving = new Map<string, Promise<void>>()
  let timer: NodeJS.Timeout | null = null
  let closed = false
  /** The drives pausing between looks: a poke ends their pause. */
  const pausing = new Set<() => void>()
  /** Wake-ups so far: a drive woken while it looked (not pausing yet) does not pause after that look. */
  let wakes = 0
  const wakeAll = (): void => {
    wakes++
    for (const finish of [...pausing]) finish()
  }

  /** A tick, or until a wake-up; none if one came since `since` (a count of wakes). */
  const pause = (since: number): Promise<void> =>
    new Promise((done) => {
      if (wakes !== since) return done()
      const t = setTimeout(finish, deps.tickMs)
      function finish(): void {
        clearTimeout(t)
        pausing.delete(finish)
        done()
      }
      pausing.add(finish)
    })

  async function principal(record: BatchRecord): Promise<Principal | null> {
    const key = await deps.keys.get(record.keyId)
    return key === null || key.status !== 'active' ? null : principalOf(key)
  }

  /** The runner's writes on a record: only while this instance holds the batch's lease. */
  const update = (id: string, patch: BatchPatch): Promise<BatchRecord | null> => store.update(id, patch, deps.instance)

  async function finish(record: BatchRecord, patch: BatchPatch): Promise<BatchRecord | null> {
    const next = await update(record.id, patch)
    if (next !== null && isFinalBatch(next.status)) deps.onFinished?.(next)
    return next
  }

  async function validate(record: BatchRecord): Promise<void> {
    const now = Date.now()
    const fail = (errors: BatchError[]) => finish(record, { status: 'failed', failedAt: now, errors })
    const who = await principal(record)
    if (who === null)
      return void (await fail([
        { code: 'invalid_api_key', message: 'The key of this batch is no longer active.', param: null, line: null },
      ]))
    const runtime = deps.runtime.current
    const caps = batchCapsOf(runtime.config.plans, who.key)
    let text: string
    try {
      text = await fileText(runtime, record.inputFileId, caps.maxFileBytes)
    } catch (error) {
      const known = toGatewayError(error)
      return void (await fail([
        { code: known.code ?? known.errorName, message: known.message, param: 'input_file_id', line: null },
      ]))
    }
    const { lines, errors } = parseInput(text, record.endpoint)
    if (lines.length + errors.length > caps.maxLines) {
      return void (await fail([
        {
          code: 'too_many_lines',
          message: `The input file has ${lines.length + errors.length} requests; a batch may hold ${caps.maxLines}.`,
          param: 'input_file_id',
          line: null,
        },
      ]))
    }
    if (lines.length + errors.length === 0) {
      return void (await fail([
        { code: 'empty_file', message: 'The input file has no requests.', param: 'input_file_id', line: null },
      ]))
    }
    const spec = specOf(record.endpoint)
    for (const [i, line] of lines.entries()) {
      // A long file keeps its lease while it is checked: no other instance starts on it meanwhile.
      if (i % 1000 === 999 && !(await store.lease(record.id, deps.instance, LEASE_MS))) return
      try {
        await prepareLine(deps, runtime, who, spec, line.body)
      } catch (error) {
        errors.push(batchErrorOf(line.index, error))
      }
    }
    if (errors.length > 0) {
      errors.sort((a, b) => (a.line ?? 0) - (b.line ?? 0))
      return void (await fail(errors.slice(0, MAX_ERRORS)))
    }
    await store.putLines(
      record.id,
      lines.map((l): BatchLine => ({
        index: l.index,
        customId: l.customId,
        body: l.body,
        queueId: null,
        result: null,
      })),
    )
    const models = new Set(lines.map((l) => l.body.model))
    const [only] = models
    await update(record.id, {
      status: 'in_progress',
      inProgressAt: Date.now(),
      counts: { total: lines.length, completed: 0, failed: 0 },
      model: models.size === 1 && typeof only === 'string' ? only : null,
    })
  }

  /** One look at a batch in progress; returns whether every line still to run has ended. */
  async function step(
    record: BatchRecord,
    book: LineBook,
  ): Promise<{ settled: boolean; stopping: boolean; progressed: boolean }> {
    const { lines } = book
    const stopping = record.cancelAt !== null || Date.now() >= record.expiresAt
    const who = await principal(record)
    let usage = record.usage
    let changed = false
    /** Writes a change of the line at place `i`, then keeps it in the book. */
    const set = async (i: number, patch: LinePatch) => {
      const line = lines[i]
      if (line === undefined) return
      await store.setLine(record.id, line.index, patch)
      const current = lines[i]
      if (current !== undefined) book.replace(i, { ...current, ...patch })
      changed = true
    }
    const submit = async (i: number, line: BatchLine, queueId: string): Promise<boolean> => {
      if (who === null) {
        await set(i, {
          result: { kind: 'error', code: 'invalid_api_key', message: 'The key of this batch is no longer active.' },
        })
        return true
      }
      try {
        const prepared = await prepareLine(deps, deps.runtime.current, who, specOf(record.endpoint), line.body)
        // Checked as a /queue request is when it arrives: the stored request is the masked one, a block fails the line.
        const keepIdUntil = record.expiresAt + KEEP_IDS_PAST_EXPIRY_MS
        await queue.enqueue(await screened(deps, { id: queueId, log }, prepared), queueId, keepIdUntil)
        // Only now is it the queue's: a 404 from here on is a result purged, not a line never taken.
        await set(i, { submitted: true })
        return true
      } catch (error) {
        // Taken before (a crash before `submitted` was written; an instance whose lease lapsed
        // mid-submit): the queue has it, or had it and purged it. The next look reads which.
        if (error instanceof RequestTakenError) {
          await set(i, { submitted: true })
          return true
        }
        const known = toGatewayError(error)
        // A full queue (or an outage) is waited out: the line is submitted on a later look.
        if (known.errorName === 'queue_full' || known.status === 503) return false
        await set(i, { result: { kind: 'error', code: known.code ?? known.errorName, message: known.message } })
        return true
      }
    }
    let inQueue = 0
    for (const i of [...book.waiting]) {
      const line = lines[i]
      if (line === undefined || line.queueId === null || line.result !== null) continue
      let view: QueueView | null
      try {
        view = await queue.read(line.queueId, record.owner)
      } catch (error) {
        if (!isNotFound(error)) throw error
        view = null
      }
      const state = lineState(line, view, stopping)
      if (state.kind === 'submit') {
        if (await submit(i, line, line.queueId)) inQueue++
        continue
      }
      if (state.kind === 'waiting') {
        inQueue++
        if (stopping && view?.status === 'queued') await queue.cancel(line.queueId, record.owner).catch(() => undefined)
        continue
      }
      const { result } = state
      const u = view?.response?.usage
      usage = {
        inputTokens: usage.inputTokens + Number(u?.input_tokens ?? 0),
        outputTokens: usage.outputTokens + Number(u?.output_tokens ?? 0),
      }
      await set(i, { result })
    }
    if (!stopping) {
      // While clients are served here, a batch keeps only a few lines going: it uses the CPU they leave.
      const room = deps.clientCalls?.busy() === true ? busyWindow : deps.window
      for (let i = book.firstUnsent(); i < lines.length && inQueue < room; i++) {
        const line = lines[i]
        if (line === undefined || line.queueId !== null || line.result !== null) continue
        const queueId = queue.newId(record.keyId)
        // Kept before it is submitted: a restart in between submits it again, once.
        await set(i, { queueId, submitted: false })
        if (!(await submit(i, line, queueId))) break
        if (lines[i]?.result === null) inQueue++
      }
    }
    if (changed) await update(record.id, { counts: book.counts(), usage })
    return { settled: book.waiting.size === 0 && (stopping || book.unsent === 0), stopping, progressed: changed }
  }

  const finalizeDeps: FinalizeDeps = {
    store,
    instance: deps.instance,
    log,
    update,
    finish,
    upload: (owner, name, content) => uploadFile(deps.runtime.current, deps.ownership, owner, name, content),
    discard: (fileId) => deleteFile(deps.runtime.current, deps.ownership, fileId),
  }

  async function drive(id: string): Promise<void> {
    let book: LineBook | null = null
    while (!closed) {
      const since = wakes
      if (!(await store.lease(id, deps.instance, LEASE_MS))) return
      const record = await store.get(id)
      if (record === null || isFinalBatch(record.status)) return
      if (record.status === 'validating') {
        if (record.cancelAt !== null) await finish(record, { status: 'cancelled', cancelledAt: Date.now() })
        else await validate(record)
        continue
      }
      if (record.cancelAt !== null && record.status === 'in_progress') await update(id, { status: 'cancelling' })
      book ??= new LineBook(await store.lines(id))
      const { settled, stopping, progressed } = await step(record, book)
      if (settled) {
        await finalize(finalizeDeps, (await store.get(id)) ?? record, book.lines, stopping)
        return
      }
      // Lines ended or started: look again at once (the window refills); nothing moved: wait a tick.
      if (!progressed) await pause(since)
    }
  }

  async function look(): Promise<void> {
    for (const id of await store.active()) {
      if (closed || driving.has(id)) continue
      const run = drive(id)
        .catch((error: unknown) =>
          log.warn({ batchId: id, err: (error as Error).message }, 'batch runner: will try again'),
        )
        .finally(() => {
          driving.delete(id)
          void store.unlease(id, deps.instance).catch(() => undefined)
        })
      driving.set(id, run)
    }
  }

  let looking: Promise<void> | null = null
  const tick = (): void => {
    looking ??= look()
      .catch((error: unknown) => log.warn({ err: (error as Error).message }, 'batch runner: could not list batches'))
      .finally(() => {
        looking = null
      })
  }

  return {
    start() {
      timer = setInterval(tick, deps.tickMs)
      timer.unref()
      tick()
    },
    poke() {
      wakeAll()
      tick()
    },
    wake: wakeAll,
    async close() {
      closed = true
      if (timer !== null) clearInterval(timer)
      wakeAll()
      await Promise.allSettled([...driving.values()])
    },
  }
}

// The end of a batch whose lines have all ended: its output and error files written, then
// its final status with their ids, by the instance holding its lease (runner.ts).
//
// The files are written before the record names them, so an instance that loses the lease
// meanwhile (stalled past it: the store refuses its final write) has written files no
// batch names; the instance that took the batch on writes its own. The loser deletes what
// it wrote, as it does when the second file could not be written. It keeps them only when
// it cannot tell whether the record names them (the final write failed without an answer).
import type { Logger } from '../observability/logger.ts'
import { whileLeased } from './lease.ts'
import { lineError } from './line-state.ts'
import type { BatchLine, BatchPatch, BatchRecord, BatchStore, LineResult } from './port.ts'

export interface FinalizeDeps {
  readonly store: Pick<BatchStore, 'lease'>
  readonly instance: string
  readonly log: Logger
  /** The runner's write on the record: null when this instance no longer holds the lease. */
  readonly update: (id: string, patch: BatchPatch) => Promise<BatchRecord | null>
  /** As `update`, telling of a batch that reached its final status. */
  readonly finish: (record: BatchRecord, patch: BatchPatch) => Promise<BatchRecord | null>
  /** Stores a result file as `owner`'s; returns its id. */
  readonly upload: (owner: string, name: string, content: Buffer) => Promise<string>
  /** Deletes a result file no batch names. */
  readonly discard: (fileId: string) => Promise<void>
}

/** The output and error files' lines of a batch whose lines have ended. */
export function resultRows(
  record: Pick<BatchRecord, 'id'>,
  lines: readonly BatchLine[],
  expired: boolean,
): { out: string[]; err: string[] } {
  const out: string[] = []
  const err: string[] = []
  for (const line of lines) {
    // An expired batch's lines that never ran (those it took back from the queue too, which the queue calls cancelled).
    const unrun = line.result === null || (line.result.kind === 'error' && line.result.code === 'batch_cancelled')
    const result: LineResult | null = expired && unrun ? lineError('batch_expired') : line.result
    if (result === null) continue
    const id = `batch_req_${line.queueId ?? `${record.id}_${line.index}`}`
    if (result.kind === 'response') {
      const text = JSON.stringify({
        id,
        custom_id: line.customId,
        response: { status_code: result.statusCode, request_id: result.requestId, body: result.body },
        error: null,
      })
      ;(result.statusCode < 400 ? out : err).push(text)
    } else {
      err.push(
        JSON.stringify({
          id,
          custom_id: line.customId,
          response: null,
          error: { code: result.code, message: result.message },
        }),
      )
    }
  }
  return { out, err }
}

/** Writes the files and the final status, the lease renewed meanwhile: a large batch may take longer than it lasts. */
export async function finalize(
  deps: FinalizeDeps,
  record: BatchRecord,
  lines: readonly BatchLine[],
  stopping: boolean,
): Promise<void> {
  const { log } = deps
  const expired = stopping && record.cancelAt === null
  await whileLeased({ store: deps.store, id: record.id, instance: deps.instance }, async () => {
    if ((await deps.update(record.id, { status: 'finalizing', finalizingAt: Date.now() })) === null) return
    const written: string[] = []
    const discard = async (): Promise<void> => {
      for (const fileId of written)
        await deps
          .discard(fileId)
          .catch((error: unknown) =>
            log.warn({ batchId: record.id, fileId, err: (error as Error).message }, 'batch runner: unused file kept'),
          )
    }
    const upload = async (rows: string[], name: string): Promise<string | null> => {
      if (rows.length === 0) return null
      const fileId = await deps.upload(record.owner, name, Buffer.from(`${rows.join('\n')}\n`))
      written.push(fileId)
      return fileId
    }
    const { out, err } = resultRows(record, lines, expired)
    let files: { outputFileId: string | null; errorFileId: string | null }
    try {
      files = {
        outputFileId: await upload(out, `${record.id}_output.jsonl`),
        errorFileId: await upload(err, `${record.id}_error.jsonl`),
      }
    } catch (error) {
      // The drive tries again later, writing both anew.
      await discard()
      throw error
    }
    const now = Date.now()
    const end: BatchPatch = !stopping
      ? { status: 'completed', completedAt: now }
      : expired
        ? { status: 'expired', expiredAt: now }
        : { status: 'cancelled', cancelledAt: now }
    // The store writes it only while this instance holds the lease (BatchStore.update's
    // holder), which is the one check that counts: the renewals' view of it (whileLeased's
    // held) may be a third of a lease late. Lost (this instance stalled past the lease): the
    // instance that took the batch on finishes it, with files of its own.
    if ((await deps.finish(record, { ...end, ...files })) === null) {
      log.warn({ batchId: record.id }, 'batch runner: lost the lease while finalizing; left to its new holder')
      await discard()
    }
  })
}

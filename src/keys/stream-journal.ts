// What a running stream has used, kept in the store as it flows, so that a gateway killed
// mid-stream (kill -9, OOM, a lost node) still charges what its clients received. Every
// other call is metered in one write as it ends (meter.ts); a stream that is cut by the
// gateway's death never ends, and without this it would cost its key nothing.
//
// A stream is journalled when it starts (the prompt's estimate, nothing delivered yet),
// checkpointed as its text reaches the client, and its entry goes in the very write that
// meters it, so it is charged by its settle or by a recovery, never both. The hot path
// pays one store write at the start and one per checkpoint interval, never one per chunk.
//
// What a checkpoint says was delivered is the linear estimate admission reserves on
// (tokenizer/estimate-text.ts: a table lookup per character, as the text goes by) plus 10 %,
// its error on prose, code and JSON. Not the exact count: that would load the tokenizer
// in every gateway that streams, while a gateway whose upstreams report usage never needs
// it, for a figure that only matters after a crash.
//
// And a checkpoint can only say what was delivered before it, while a crash comes between two.
// So each one is written ahead: it charges what was delivered plus twice what the stream
// delivered in the interval before (its pace: the next checkpoint may land up to an
// interval late on a busy gateway), within the reservation. A crash then charges at least
// what the client received while the pace holds, and at most about two intervals more. A
// stream cut in its first interval is charged its prompt.
//
// Entries of a gateway whose queue heartbeat ran out are recovered by whichever instance
// looks first (the store lets one of them charge each); the embedded store's are all of
// an earlier process, recovered at start.
import { randomBytes } from 'node:crypto'
import { estimateTokenHundredths } from '../tokenizer/estimate-text.ts'
import type { Logger } from '../observability/logger.ts'
import type { StreamJournal, UsageRecord } from '../store/ports.ts'

export interface StreamJournalOptions {
  readonly journal: StreamJournal
  /** This gateway's name: its queue heartbeat says it runs its streams. */
  readonly instance: string
  readonly log: Logger
  /** store.streamCheckpointMs: the longest a stream's delivered text goes unjournalled. */
  readonly checkpointMs: number
  /** Told of each stream this instance recovered (a metric). */
  readonly onRecovered?: (record: UsageRecord) => void
  /** Tokens of a delivered text, a fraction allowed; the estimate plus its margin by default. */
  readonly tokensOf?: (text: string) => number
  /** Epoch ms; injectable so tests need not wait out intervals. */
  readonly now?: () => number
}

/** A stream that starts: who pays, and how its charge is priced. */
export interface StreamStart {
  readonly keyId: string
  readonly owner: string
  readonly tier: string
  readonly model: string
  /** The prompt's estimate: what a crash charges at least. */
  readonly inputTokens: number
  /** The output reserved at admission: a checkpoint's lead never goes beyond it. */
  readonly reservedOutputTokens: number
  readonly cost: (inputTokens: number, outputTokens: number) => number
}

/** One running stream's tally. */
export interface StreamTally {
  /** The journal entry's id, for the metering write that removes it. */
  readonly id: string
  /** Text that reached the client. Cheap: gathered, counted when a checkpoint is due. */
  readonly delivered: (text: string) => void
  /** No checkpoint after this; resolves once those made are written (or failed), never rejects. */
  close(): Promise<void>
}

export interface StreamJournalService {
  begin(start: StreamStart): StreamTally
  /**
   * Charges the journalled streams of gateways that stopped (`isAlive` says which have).
   * Returns how many this call charged. Throws only if the store cannot be read.
   */
  recover(isAlive: (instance: string) => Promise<boolean>): Promise<number>
}

/** The estimate's error on prose, code and JSON, charged on top of it. */
const ESTIMATE_MARGIN = 1.1

function estimatedTokens(text: string): number {
  return (estimateTokenHundredths(text) * ESTIMATE_MARGIN) / 100
}

export function createStreamJournal(options: StreamJournalOptions): StreamJournalService {
  const { journal, instance, log, checkpointMs } = options
  const tokensOf = options.tokensOf ?? estimatedTokens
  const now = options.now ?? Date.now
  let warned = false
  const failed = (error: unknown): void => {
    // The stream goes on, and its settle still meters it: only a crash would now cost more.
    if (!warned)
      log.warn(
        { err: (error as Error).message },
        'stream journal write failed; streams are metered when they end, a crash may cost their usage',
      )
    warned = true
  }

  return {
    begin(start) {
      const id = `str_${randomBytes(12).toString('base64url')}`
      // Whose stream: a store keeps it with its owner's other state (Redis: on the owner's slot).
      const ref = { id, keyId: start.keyId, owner: start.owner }
      const opened = now()
      let lastAt = opened
      /** Output delivered so far, estimated. */
      let deliveredTokens = 0
      /** What the last checkpoint counted as delivered (without its lead). */
      let counted = 0
      let closed = false
      let busy = false
      // Journal writes, in order: the open, then checkpoints one at a time.
      let writes: Promise<void> = journal
        .open({
          id,
          instance,
          keyId: start.keyId,
          owner: start.owner,
          tier: start.tier,
          model: start.model,
          at: opened,
          inputTokens: start.inputTokens,
          outputTokens: 0,
          costNanos: start.cost(start.inputTokens, 0),
        })
        .then(() => {
          warned = false
        }, failed)

      const checkpoint = async (at: number): Promise<void> => {
        const total = Math.ceil(deliveredTokens)
        const pace = total - counted
        counted = total
        // Written ahead by two intervals at the stream's pace, within what was reserved.
        const lead = Math.min(2 * pace, Math.max(0, start.reservedOutputTokens - counted))
        const outputTokens = counted + lead
        await journal.checkpoint(
          ref,
          { inputTokens: start.inputTokens, outputTokens, costNanos: start.cost(start.inputTokens, outputTokens) },
          at,
        )
      }

      return {
        id,
        delivered(text) {
          if (closed || text.length === 0) return
          deliveredTokens += tokensOf(text)
          if (busy) return
          const at = now()
          if (at - lastAt < checkpointMs) return
          lastAt = at
          busy = true
          writes = writes
            .then(() => checkpoint(at))
            .catch(failed)
            .finally(() => {
              busy = false
            })
        },
        async close() {
          closed = true
          await writes
        },
      }
    },

    async recover(isAlive) {
      let recovered = 0
      // This gateway's own entries are streams it runs, or settles it still retries.
      const stopped = async (other: string): Promise<boolean> => other !== instance && !(await isAlive(other))
      for (const entry of await journal.list(stopped)) {
        const record = await journal.recover(entry)
        if (record === null) continue
        recovered++
        options.onRecovered?.(record)
        log.warn(
          {
            recovered: true,
            streamId: entry.id,
            instance: entry.instance,
            keyId: record.keyId,
            model: record.model,
            inputTokens: record.inputTokens,
            outputTokens: record.outputTokens,
          },
          'usage recovered: a stream cut by a gateway that stopped is charged what it had delivered',
        )
      }
      return recovered
    },
  }
}

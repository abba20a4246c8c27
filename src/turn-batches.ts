// What many calls make in one turn of the event loop, sent once at the turn's end. Under
// concurrency one turn admits, settles and meters several calls (each request's body and
// each upstream reply end in their own callbacks of one poll phase); one script for all of
// them costs a command, a reply and a promise, where one each cost them per call.
//
// The turn ends in one check-phase callback (setImmediate) that first sends every batch of
// the turn, then flushes what was held for the turn's end (a corked Redis socket:
// store/redis-turn-writes.ts). So the admissions, settles and usage rows of a turn that share
// a connection leave in one socket write, whichever of them came first in the turn.

type Step = () => void

const sends: Step[] = []
const flushes: Step[] = []
let scheduled = false

function endTurn(): void {
  // Every send before any flush. A step may add steps (a batch's commands cork their socket):
  // they run in this same end, sends first. Each step runs though another threw before it
  // (a socket left corked would hold its connection's commands for good); the first error is
  // thrown once all have run.
  let failed: { error: unknown } | undefined
  for (let s = 0, f = 0; s < sends.length || f < flushes.length;) {
    const step = s < sends.length ? sends[s++] : flushes[f++]
    try {
      step?.()
    } catch (error) {
      failed ??= { error }
    }
  }
  sends.length = 0
  flushes.length = 0
  scheduled = false
  if (failed !== undefined) throw failed.error
}

function atTurnEnd(steps: Step[], step: Step): void {
  steps.push(step)
  if (scheduled) return
  scheduled = true
  setImmediate(endTurn)
}

/**
 * Runs `flush` at the end of this turn, after every batch of the turn has been sent (or of
 * the next turn, when called after this one's end has run).
 */
export function flushAtTurnEnd(flush: () => void): void {
  atTurnEnd(flushes, flush)
}

/**
 * Resolves once the end of this turn has run (or of the next, when called after this one's
 * end): every batch made until then sent, every corked Redis socket flushed, the embedded
 * store's group commit made. What was handed to a store in the turn has then left the
 * process for good (in the kernel's socket buffer, or committed to the database file), and
 * a gateway killed right after still has it written: the relay's commit waits for this
 * rather than for Redis's reply (inference/reply.ts). A write to a connection that is not
 * ready (reconnecting) waits in memory instead, and is not covered.
 */
export function turnWritten(): Promise<void> {
  // A flush of its own: its promise settles after the whole end has run (every step, those
  // added meanwhile too), since a promise's callbacks wait for the running callback to return.
  return new Promise((written) => flushAtTurnEnd(written))
}

/** A turn's batch under one name (a Redis slot, say), and the promise of its one sending. */
export interface TurnBatch<B, R> {
  readonly batch: B
  readonly sent: Promise<R>
}

/**
 * Batches by name: the first caller of a turn opens one (`open`), every caller of that turn
 * adds to it, and `send` sends it at the turn's end (its check phase). A caller after that
 * gets a batch of its own, sent at the next turn's end.
 */
export function turnBatches<B, R>(open: () => B, send: (batch: B) => Promise<R>): (name: string) => TurnBatch<B, R> {
  const current = new Map<string, TurnBatch<B, R>>()
  return (name) => {
    let turn = current.get(name)
    if (turn === undefined) {
      const batch = open()
      const sent = new Promise<R>((resolve, reject) => {
        atTurnEnd(sends, () => {
          current.delete(name)
          try {
            resolve(send(batch))
          } catch (error) {
            reject(error)
          }
        })
      })
      turn = { batch, sent }
      current.set(name, turn)
    }
    return turn
  }
}

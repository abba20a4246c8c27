// What many calls make in one turn of the event loop, sent once at the turn's end. Under
// concurrency one turn admits, settles and meters several calls (each request's body and
// each upstream reply end in their own callbacks of one poll phase); one script for all of
// them costs a command, a reply and a promise, where one each cost them per call.

/** A turn's batch under one name (a Redis slot, say), and the promise of its one sending. */
export interface TurnBatch<B, R> {
  readonly batch: B
  readonly sent: Promise<R>
}

/**
 * Batches by name: the first caller of a turn opens one (`open`), every caller of that turn
 * adds to it, and `send` sends it in the turn's check phase (setImmediate). A caller of the
 * next turn, or of that check phase, gets a batch of its own.
 */
export function turnBatches<B, R>(open: () => B, send: (batch: B) => Promise<R>): (name: string) => TurnBatch<B, R> {
  const current = new Map<string, TurnBatch<B, R>>()
  return (name) => {
    let turn = current.get(name)
    if (turn === undefined) {
      const batch = open()
      const sent = new Promise<void>((ended) => setImmediate(ended)).then(() => {
        current.delete(name)
        return send(batch)
      })
      turn = { batch, sent }
      current.set(name, turn)
    }
    return turn
  }
}

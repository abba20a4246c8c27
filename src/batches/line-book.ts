// Where a batch's lines stand during one drive of it, counted as each line changes: a look at
// the batch (runner.ts, step) then costs the lines in the queue, its window, not the whole
// file. Each look used to rebuild a map of every line and filter them all three times, and a
// batch is looked at after every change: at 10,000 lines that was a tenth of the gateway's
// CPU (bench/batch-profile.ts).
import type { BatchLine } from './port.ts'

const completedLine = (line: BatchLine): boolean => line.result?.kind === 'response' && line.result.statusCode < 400

export class LineBook {
  /** Places (in `lines`) of the lines in the queue without a result, in the order they were sent. */
  readonly waiting = new Set<number>()
  #unsent = 0
  #done = 0
  #completed = 0
  /** Every line before it has a queue id (ids are never taken back). */
  #cursor = 0

  readonly lines: BatchLine[]

  constructor(lines: BatchLine[]) {
    this.lines = lines
    lines.forEach((line, i) => this.#tally(i, line, 1))
  }

  /** Replaces the line at place `i` (its patched copy). */
  replace(i: number, next: BatchLine): void {
    const before = this.lines[i]
    if (before === undefined) return
    this.#tally(i, before, -1)
    this.lines[i] = next
    this.#tally(i, next, 1)
  }

  /** The first place that may hold a line without a queue id. */
  firstUnsent(): number {
    while (this.#cursor < this.lines.length && this.lines[this.#cursor]?.queueId !== null) this.#cursor++
    return this.#cursor
  }

  get unsent(): number {
    return this.#unsent
  }

  counts(): { total: number; completed: number; failed: number } {
    return { total: this.lines.length, completed: this.#completed, failed: this.#done - this.#completed }
  }

  #tally(i: number, line: BatchLine, sign: 1 | -1): void {
    if (line.queueId === null) this.#unsent += sign
    if (line.result !== null) {
      this.#done += sign
      if (completedLine(line)) this.#completed += sign
    } else if (line.queueId !== null) {
      if (sign > 0) this.waiting.add(i)
      else this.waiting.delete(i)
    }
  }
}

// The client's side of a relay: writes with backpressure, and notices when the client
// goes away (its response closes before finishing, or the gateway's signal fires) so
// the relay can stop and free the upstream. A client that stays connected but stops
// reading counts as gone after idleReaderMs without a drain ("stalled"): the relay stops
// pulling from the upstream at once (backpressure), and after that long it gives up.
import { performance } from 'node:perf_hooks'
import type { ReplySink } from './reply-sink.ts'

export class ClientSink {
  readonly #res: ReplySink
  readonly #signal: AbortSignal
  readonly #onAbort: () => void
  readonly #idleReaderMs: number | undefined
  readonly #started = performance.now()
  #aborted = false
  #stalled = false
  #bytes = 0
  #firstByteMs: number | undefined
  #drainWaiter: (() => void) | undefined

  constructor(res: ReplySink, signal: AbortSignal, onAbort: () => void, idleReaderMs?: number) {
    this.#res = res
    this.#signal = signal
    this.#onAbort = onAbort
    this.#idleReaderMs = idleReaderMs
    res.on('close', this.#onClose)
    signal.addEventListener('abort', this.#abort, { once: true })
    if (signal.aborted || res.destroyed) this.#abort()
  }

  get aborted(): boolean {
    return this.#aborted
  }
  /** Aborted because the client took nothing for idleReaderMs; its connection is still open. */
  get stalled(): boolean {
    return this.#stalled
  }
  get bytes(): number {
    return this.#bytes
  }
  get firstByteMs(): number | undefined {
    return this.#firstByteMs
  }

  /** Writes and waits for the client to drain; returns at once when the client is gone. */
  async write(chunk: Buffer | string): Promise<void> {
    await this.send(chunk)
  }

  /**
   * write(), with a promise only when there is something to wait for (the client is behind):
   * for a stream's chunks, most of which the client takes at once.
   */
  send(chunk: Buffer | string): Promise<void> | undefined {
    if (this.#aborted || chunk.length === 0) return undefined
    this.#count(chunk)
    if (this.#res.write(chunk)) return undefined
    return new Promise<void>((resolve) => {
      const stall = this.#idleReaderMs === undefined ? undefined : setTimeout(this.#stall, this.#idleReaderMs)
      const done = (): void => {
        clearTimeout(stall)
        this.#res.off('drain', done)
        this.#drainWaiter = undefined
        resolve()
      }
      this.#drainWaiter = done
      this.#res.once('drain', done)
    })
  }

  end(chunk?: Buffer | string): void {
    if (this.#stalled) {
      // A body with a promised length (or none that can carry a note) cannot end early honestly.
      this.cut()
      return
    }
    if (this.#aborted || this.#res.writableEnded) return
    if (chunk !== undefined) this.#count(chunk)
    this.#res.end(chunk)
  }

  /**
   * After a stall: ends the reply with `last` (an error event), behind what is still
   * queued, so a client that comes back reads everything it was charged for and why it
   * ended. One more idle period for it to do so, then the connection is closed.
   */
  endStalled(last: string): void {
    const res = this.#res
    if (res.writableEnded || res.destroyed) return
    this.#count(last)
    res.end(last)
    const timer = setTimeout(() => {
      if (!res.writableFinished) res.destroy()
    }, this.#idleReaderMs)
    timer.unref()
    res.once('close', () => clearTimeout(timer))
  }

  /** A body that cannot be finished honestly: cut the connection so the client sees it was truncated. */
  cut(): void {
    this.#res.destroy()
  }

  dispose(): void {
    if (this.#stalled && !this.#res.writableEnded) this.#res.destroy()
    this.#res.off('close', this.#onClose)
    this.#signal.removeEventListener('abort', this.#abort)
  }

  #count(chunk: Buffer | string): void {
    if (this.#firstByteMs === undefined) this.#firstByteMs = Math.round(performance.now() - this.#started)
    this.#bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length
  }

  readonly #onClose = (): void => {
    if (!this.#res.writableFinished) this.#abort()
  }

  readonly #stall = (): void => {
    if (this.#aborted) return
    this.#stalled = true
    this.#aborted = true
    this.#drainWaiter?.()
    this.#onAbort()
  }

  readonly #abort = (): void => {
    if (this.#aborted) return
    this.#aborted = true
    // Nobody will finish this reply now; a client still connected (the gateway gave up,
    // e.g. at shutdown) must not be left waiting on it.
    if (!this.#res.writableFinished) this.#res.destroy()
    this.#drainWaiter?.()
    this.#onAbort()
  }
}

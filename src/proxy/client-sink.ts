// The client's side of a relay: writes with backpressure, and notices when the client
// goes away (its response closes before finishing, or the gateway's signal fires) so
// the relay can stop and free the upstream.
import type { ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'

export class ClientSink {
  readonly #res: ServerResponse
  readonly #signal: AbortSignal
  readonly #onAbort: () => void
  readonly #started = performance.now()
  #aborted = false
  #bytes = 0
  #firstByteMs: number | undefined
  #drainWaiter: (() => void) | undefined

  constructor(res: ServerResponse, signal: AbortSignal, onAbort: () => void) {
    this.#res = res
    this.#signal = signal
    this.#onAbort = onAbort
    res.on('close', this.#onClose)
    signal.addEventListener('abort', this.#abort, { once: true })
    if (signal.aborted || res.destroyed) this.#abort()
  }

  get aborted(): boolean { return this.#aborted }
  get bytes(): number { return this.#bytes }
  get firstByteMs(): number | undefined { return this.#firstByteMs }

  /** Writes and waits for the client to drain; returns at once when the client is gone. */
  async write(chunk: Buffer | string): Promise<void> {
    if (this.#aborted || chunk.length === 0) return
    this.#count(chunk)
    if (this.#res.write(chunk)) return
    await new Promise<void>((resolve) => {
      const done = (): void => {
        this.#res.off('drain', done)
        this.#drainWaiter = undefined
        resolve()
      }
      this.#drainWaiter = done
      this.#res.once('drain', done)
    })
  }

  end(chunk?: Buffer | string): void {
    if (this.#aborted || this.#res.writableEnded) return
    if (chunk !== undefined) this.#count(chunk)
    this.#res.end(chunk)
  }

  /** A body that cannot be finished honestly: cut the connection so the client sees it was truncated. */
  cut(): void {
    this.#res.destroy()
  }

  dispose(): void {
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

// Destroys a response body whose upstream goes quiet for too long between chunks.
// The clock only counts time spent waiting for the upstream: while the consumer still
// has unread data here, the pause is the client's (backpressure), not the upstream's.
import { Transform, type TransformCallback } from 'node:stream'
import { gatewayError } from '../../errors.ts'

export class IdleWatchdog extends Transform {
  readonly #idleMs: number
  #timer: NodeJS.Timeout | undefined

  constructor(idleMs: number) {
    super()
    this.#idleMs = idleMs
    this.#arm()
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#arm()
    done(null, chunk)
  }

  override _flush(done: TransformCallback): void {
    this.#disarm()
    done()
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.#disarm()
    done(error)
  }

  #arm(): void {
    // One timer for the whole body, pushed back at each chunk (a stream's events are many).
    if (this.#timer !== undefined) {
      this.#timer.refresh()
      return
    }
    this.#timer = setTimeout(() => this.#expire(), this.#idleMs)
    // The upstream socket keeps the process alive while it matters; this timer must not.
    this.#timer.unref()
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.#timer = undefined
  }

  #expire(): void {
    if (this.readableLength > 0) {
      this.#arm()
      return
    }
    this.destroy(
      gatewayError('upstream_timeout', {
        message: `The upstream model server sent nothing for ${this.#idleMs} ms in the middle of its response.`,
      }),
    )
  }
}

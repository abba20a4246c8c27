// A reply sink with nobody on the other end: what a queue worker relays a stored request's
// upstream reply into. It keeps the status, the headers and the body (up to a limit) so
// they can be stored as the request's result, and behaves like a ServerResponse towards
// the relay: writes never block, end() finishes, destroy() closes without finishing.
import { EventEmitter } from 'node:events'
import type { ReplySink } from './reply-sink.ts'

export interface Recording {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  /** The body went past the limit: `body` holds only its start. */
  readonly truncated: boolean
  /** end() was reached: the reply is whole (unless truncated). */
  readonly complete: boolean
}

export class RecordingSink extends EventEmitter implements ReplySink {
  statusCode = 200
  readonly socket = null
  readonly #limitBytes: number
  readonly #headers = new Map<string, string>()
  readonly #chunks: Buffer[] = []
  #size = 0
  #truncated = false
  #headersSent = false
  #ended = false
  #destroyed = false

  constructor(limitBytes: number) {
    super()
    this.#limitBytes = limitBytes
  }

  get headersSent(): boolean {
    return this.#headersSent
  }
  get writableEnded(): boolean {
    return this.#ended
  }
  get writableFinished(): boolean {
    return this.#ended
  }
  get destroyed(): boolean {
    return this.#destroyed
  }

  setHeader(name: string, value: number | string | readonly string[]): this {
    // As on a ServerResponse: a header after the body started is a bug in the caller.
    if (this.#headersSent) throw new Error(`header ${name} set after the reply started`)
    this.#headers.set(name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value))
    return this
  }

  hasHeader(name: string): boolean {
    return this.#headers.has(name.toLowerCase())
  }

  flushHeaders(): void {
    this.#headersSent = true
  }

  write(chunk: Buffer | string): boolean {
    if (this.#ended || this.#destroyed) return true
    this.#headersSent = true
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk
    const room = this.#limitBytes - this.#size
    if (bytes.length > room) this.#truncated = true
    const kept = bytes.length > room ? bytes.subarray(0, Math.max(0, room)) : bytes
    if (kept.length > 0) {
      this.#chunks.push(kept)
      this.#size += kept.length
    }
    return true
  }

  end(chunk?: Buffer | string): this {
    if (this.#ended || this.#destroyed) return this
    if (chunk !== undefined) this.write(chunk)
    this.#headersSent = true
    this.#ended = true
    this.emit('finish')
    this.emit('close')
    return this
  }

  destroy(): this {
    if (this.#destroyed) return this
    this.#destroyed = true
    if (!this.#ended) queueMicrotask(() => this.emit('close'))
    return this
  }

  recording(): Recording {
    return {
      status: this.statusCode,
      headers: Object.fromEntries(this.#headers),
      body: Buffer.concat(this.#chunks, this.#size),
      truncated: this.#truncated,
      complete: this.#ended,
    }
  }
}

// Where the corridor's relay writes the reply of an Anthropic call: a ReplySink in front of
// the client's response that translates on the way out. The relay (its usage tap, journal
// and settlement) sees and meters the upstream's chat reply exactly as on /v2; the client
// gets Anthropic's. A stream is translated event by event as it is written (stream-out.ts,
// nothing buffered); a JSON reply, which the relay hands over whole, is translated whole
// (reply-out.ts, or errors.ts for an error status).
import type { ServerResponse } from 'node:http'
import { mediaType } from '../../http/media-type.ts'
import type { ReplySink } from '../../proxy/reply-sink.ts'
import { SseParser } from '../../proxy/sse.ts'
import { anthropicErrorOfBody } from './errors.ts'
import { mirrorRateLimitHeaders } from './ratelimit-headers.ts'
import { messageOf } from './reply-out.ts'
import { AnthropicStream } from './stream-out.ts'

export class AnthropicReplySink implements ReplySink {
  readonly #res: ServerResponse
  readonly #requestId: string
  #status = 200
  #sse = false
  readonly #json: Buffer[] = []
  readonly #parser = new SseParser()
  readonly #stream: AnthropicStream

  constructor(res: ServerResponse, requestId: string) {
    this.#res = res
    this.#requestId = requestId
    this.#stream = new AnthropicStream(requestId)
  }

  get headersSent(): boolean {
    return this.#res.headersSent
  }
  get statusCode(): number {
    return this.#status
  }
  set statusCode(status: number) {
    this.#status = status
  }
  get writableEnded(): boolean {
    return this.#res.writableEnded
  }
  get writableFinished(): boolean {
    return this.#res.writableFinished
  }
  get destroyed(): boolean {
    return this.#res.destroyed
  }
  get socket(): ServerResponse['socket'] {
    return this.#res.socket
  }

  setHeader(name: string, value: number | string | readonly string[]): unknown {
    const lower = name.toLowerCase()
    // The translated body has a length of its own, set when it is written.
    if (lower === 'content-length') return this
    if (lower === 'content-type') this.#sse = mediaType(String(value)) === 'text/event-stream'
    return this.#res.setHeader(name, value)
  }
  hasHeader(name: string): boolean {
    return this.#res.hasHeader(name)
  }

  flushHeaders(): void {
    this.#head()
    this.#res.flushHeaders()
  }

  write(chunk: Buffer | string): boolean {
    if (!this.#sse) {
      this.#json.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
      return true
    }
    const out = this.#translate(this.#parser.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk))
    if (out === '') return true
    this.#head()
    return this.#res.write(out)
  }

  end(chunk?: Buffer | string): unknown {
    if (chunk !== undefined) this.write(chunk)
    if (this.#sse) {
      const out = this.#translate(this.#parser.end()) + this.#stream.end()
      this.#head()
      return this.#res.end(out)
    }
    const payload = Buffer.from(JSON.stringify(this.#body(Buffer.concat(this.#json))))
    if (!this.#res.headersSent) {
      this.#res.setHeader('content-type', 'application/json')
      this.#res.setHeader('content-length', payload.length)
    }
    this.#head()
    return this.#res.end(payload)
  }

  destroy(): unknown {
    return this.#res.destroy()
  }
  on(event: 'close' | 'drain', listener: () => void): unknown {
    return this.#res.on(event, listener)
  }
  once(event: 'close' | 'drain', listener: () => void): unknown {
    return this.#res.once(event, listener)
  }
  off(event: 'close' | 'drain', listener: () => void): unknown {
    return this.#res.off(event, listener)
  }

  /** The status line and the headers Anthropic's clients read, once, before the first byte. */
  #head(): void {
    if (this.#res.headersSent) return
    this.#res.statusCode = this.#status
    mirrorRateLimitHeaders(this.#res)
  }

  #translate(events: ReturnType<SseParser['push']>): string {
    let out = ''
    for (const event of events) if (event.data !== undefined) out += this.#stream.data(event.data)
    return out
  }

  /** A whole JSON reply in Anthropic's shape: the Message, or the error at its Anthropic status. */
  #body(bytes: Buffer): unknown {
    let parsed: unknown
    try {
      parsed = JSON.parse(bytes.toString('utf8'))
    } catch {
      parsed = undefined
    }
    if (this.#status < 300 && parsed !== undefined) return messageOf(parsed)
    const error = anthropicErrorOfBody(this.#status < 300 ? 502 : this.#status, parsed, this.#requestId)
    this.#status = error.status
    return error.body
  }
}

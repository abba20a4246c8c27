// A miss on its way back: the reply sink the relay writes to, with a copy of what the client
// receives (up to a bound) handed over once the reply ended whole. The relay settles a call
// before its last bytes (proxy/relay.ts `commit`), so by then its usage is metered.
import type { ReplySink } from '../proxy/reply-sink.ts'

export interface Captured {
  readonly status: number
  readonly contentType: string
  readonly bytes: Buffer
}

export function captureSink(inner: ReplySink, maxBytes: number, ended: (captured: Captured) => void): ReplySink {
  const chunks: Buffer[] = []
  let size = 0
  let spoiled = false
  let contentType = ''
  const keep = (chunk: Buffer | string | undefined): void => {
    if (chunk === undefined || spoiled) return
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    size += buffer.length
    if (size > maxBytes) {
      spoiled = true
      chunks.length = 0
    } else chunks.push(buffer)
  }
  return {
    get headersSent() {
      return inner.headersSent
    },
    get statusCode() {
      return inner.statusCode
    },
    set statusCode(code: number) {
      inner.statusCode = code
    },
    setHeader(name, value) {
      if (name.toLowerCase() === 'content-type') contentType = String(value).toLowerCase()
      return inner.setHeader(name, value)
    },
    hasHeader: (name) => inner.hasHeader(name),
    flushHeaders: () => inner.flushHeaders(),
    write(chunk) {
      keep(chunk)
      return inner.write(chunk)
    },
    end(chunk) {
      keep(chunk)
      const result = chunk === undefined ? inner.end() : inner.end(chunk)
      if (!spoiled && !inner.destroyed) ended({ status: inner.statusCode, contentType, bytes: Buffer.concat(chunks) })
      spoiled = true
      return result
    },
    destroy() {
      spoiled = true
      chunks.length = 0
      return inner.destroy()
    },
    get writableEnded() {
      return inner.writableEnded
    },
    get writableFinished() {
      return inner.writableFinished
    },
    get destroyed() {
      return inner.destroyed
    },
    get socket() {
      return inner.socket
    },
    on: (event, listener) => inner.on(event, listener),
    once: (event, listener) => inner.once(event, listener),
    off: (event, listener) => inner.off(event, listener),
  }
}

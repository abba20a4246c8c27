// Reading HTTP/1.x responses off a raw socket, one after another (keep-alive, pipelining),
// for tests that send bytes no HTTP client would: every response is returned whole, with
// its status, headers and body (chunked or by length or to the close), or the socket's
// end if the server closed without one.
import type { Socket } from 'node:net'

export interface ParsedResponse {
  readonly version: string
  readonly status: number
  /** Lower-case names; a repeated header's values joined by ", ". */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  /** The server said it closes the connection after this response. */
  readonly closes: boolean
  /** Interim 1xx responses that came before it. */
  readonly interim: readonly number[]
}

export class MalformedResponse extends Error {
  override readonly name = 'MalformedResponse'
}

export class ResponseReader {
  /** Received bytes live in #data[#start, #end); it grows by doubling, so a long body is copied O(n) times, not O(n²). */
  #data: Buffer = Buffer.alloc(16 * 1024)
  #start = 0
  #end = 0
  #ended = false
  #error: Error | undefined
  #wake: (() => void) | undefined

  constructor(socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#append(chunk)
      this.#wake?.()
    })
    socket.on('end', () => {
      this.#ended = true
      this.#wake?.()
    })
    socket.on('close', () => {
      this.#ended = true
      this.#wake?.()
    })
    socket.on('error', (err) => {
      this.#error = err
      this.#ended = true
      this.#wake?.()
    })
  }

  /** Bytes received and not yet parsed. */
  get pending(): number {
    return this.#end - this.#start
  }

  get #buffer(): Buffer {
    return this.#data.subarray(this.#start, this.#end)
  }

  #append(chunk: Buffer): void {
    const length = this.#end - this.#start
    if (this.#end + chunk.length > this.#data.length) {
      const needed = length + chunk.length
      const target =
        needed * 2 <= this.#data.length ? this.#data : Buffer.alloc(Math.max(needed * 2, this.#data.length * 2))
      this.#data.copy(target, 0, this.#start, this.#end)
      this.#data = target
      this.#start = 0
      this.#end = length
    }
    chunk.copy(this.#data, this.#end)
    this.#end += chunk.length
  }
  get ended(): boolean {
    return this.#ended
  }
  get error(): Error | undefined {
    return this.#error
  }

  /** The next response to a request of `method`; null when the connection ended before one began. */
  async next(method = 'GET'): Promise<ParsedResponse | null> {
    const interim: number[] = []
    for (;;) {
      const head = await this.#head()
      if (head === null) return null
      if (head.status >= 100 && head.status < 200 && head.status !== 101) {
        interim.push(head.status)
        continue
      }
      const body = await this.#body(head, method)
      const connection = (head.headers.connection ?? '').toLowerCase()
      const closes = connection.includes('close') || (head.version === 'HTTP/1.0' && !connection.includes('keep-alive'))
      return { ...head, body, closes, interim }
    }
  }

  async #more(): Promise<boolean> {
    if (this.#ended) return false
    await new Promise<void>((resolve) => {
      this.#wake = resolve
    })
    this.#wake = undefined
    return true
  }

  /** The next n bytes, copied out (the buffer behind them is reused). */
  #take(n: number): Buffer {
    const out = Buffer.from(this.#data.subarray(this.#start, this.#start + n))
    this.#start += n
    return out
  }

  async #head(): Promise<{ version: string; status: number; headers: Record<string, string> } | null> {
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n')
      if (end !== -1) {
        const text = this.#take(end + 4).toString('latin1')
        const [line = '', ...fields] = text.slice(0, -4).split('\r\n')
        const match = /^(HTTP\/1\.[01]) (\d{3})(?: .*)?$/.exec(line)
        if (match === null) throw new MalformedResponse(`bad status line: ${JSON.stringify(line.slice(0, 80))}`)
        const headers: Record<string, string> = {}
        for (const field of fields) {
          const colon = field.indexOf(':')
          if (colon <= 0) throw new MalformedResponse(`bad header line: ${JSON.stringify(field.slice(0, 80))}`)
          const name = field.slice(0, colon).trim().toLowerCase()
          const value = field.slice(colon + 1).trim()
          headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
        }
        return { version: match[1] ?? '', status: Number(match[2]), headers }
      }
      if (!(await this.#more())) {
        if (this.#buffer.length > 0)
          throw new MalformedResponse(
            `connection ended inside a response head: ${JSON.stringify(this.#buffer.subarray(0, 80).toString('latin1'))}`,
          )
        return null
      }
    }
  }

  async #body(head: { status: number; headers: Record<string, string> }, method: string): Promise<Buffer> {
    if (method === 'HEAD' || head.status === 204 || head.status === 304) return Buffer.alloc(0)
    const encoding = head.headers['transfer-encoding']
    if (encoding !== undefined) {
      if (encoding.toLowerCase() !== 'chunked') throw new MalformedResponse(`unexpected transfer-encoding ${encoding}`)
      return this.#chunked()
    }
    const length = head.headers['content-length']
    if (length !== undefined) {
      if (!/^\d+$/.test(length)) throw new MalformedResponse(`bad content-length ${length}`)
      const n = Number(length)
      while (this.#buffer.length < n) {
        if (!(await this.#more())) throw new MalformedResponse(`body cut at ${this.#buffer.length} of ${n} bytes`)
      }
      return this.#take(n)
    }
    // Neither: the body runs to the close.
    while (await this.#more()) {
      /* keep reading */
    }
    return this.#take(this.#buffer.length)
  }

  async #line(): Promise<string> {
    for (;;) {
      const end = this.#buffer.indexOf('\r\n')
      if (end !== -1) {
        const line = this.#take(end).toString('latin1')
        this.#take(2)
        return line
      }
      if (!(await this.#more())) throw new MalformedResponse('chunked body cut inside a line')
    }
  }

  async #chunked(): Promise<Buffer> {
    const parts: Buffer[] = []
    for (;;) {
      const sizeLine = await this.#line()
      const size = Number.parseInt(sizeLine.split(';', 1)[0] ?? '', 16)
      if (!Number.isFinite(size) || size < 0) throw new MalformedResponse(`bad chunk size ${JSON.stringify(sizeLine)}`)
      if (size === 0) {
        // Trailers, up to an empty line.
        while ((await this.#line()) !== '') {
          /* skip */
        }
        return Buffer.concat(parts)
      }
      while (this.#buffer.length < size + 2) {
        if (!(await this.#more())) throw new MalformedResponse('chunked body cut inside a chunk')
      }
      parts.push(this.#take(size))
      this.#take(2)
    }
  }
}

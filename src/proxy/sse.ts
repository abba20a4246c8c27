// Splits a server-sent event stream into events while keeping each event's exact bytes,
// so the relay can forward an event untouched or drop it whole. Follows the WHATWG
// rules: lines end in CRLF, LF or CR; a blank line ends an event; ':' starts a comment;
// several data lines join with '\n'. Input may be cut anywhere, even inside a UTF-8
// character or between CR and LF.
import { StringDecoder } from 'node:string_decoder'

export interface SseEvent {
  /** The event exactly as received, blank line included. */
  readonly raw: string
  /** The `event:` field, if any. */
  readonly event: string | undefined
  /** The data lines joined with '\n', or undefined when the event had none (a comment). */
  readonly data: string | undefined
}

export class SseParser {
  readonly #decoder = new StringDecoder('utf8')
  #pending = ''
  #raw = ''
  #event: string | undefined
  #data: string[] = []

  /** Feeds bytes; returns the events they completed. */
  push(chunk: Buffer): SseEvent[] {
    this.#pending += this.#decoder.write(chunk)
    return this.#drain(false, this.#between() ? this.#dataEvents() : [])
  }

  /** Between events: no line of an unfinished event held. */
  #between(): boolean {
    return this.#raw.length === 0 && this.#event === undefined && this.#data.length === 0
  }

  /**
   * The usual shape, taken from the front of the pending text without going line by line:
   * events of one `data:` line each, LF-ended, arriving whole. Stops at the first that is not
   * (left for #drain, which then reads it exactly as it would have).
   */
  #dataEvents(): SseEvent[] {
    const events: SseEvent[] = []
    const text = this.#pending
    let start = 0
    for (;;) {
      const end = text.indexOf('\n\n', start)
      if (end === -1 || !text.startsWith('data:', start)) break
      const line = text.slice(start, end)
      if (line.includes('\n') || line.includes('\r')) break
      const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5)
      events.push({ raw: `${line}\n\n`, event: undefined, data: value })
      start = end + 2
    }
    if (start > 0) this.#pending = text.slice(start)
    return events
  }

  /** Ends the input; returns a last event that lacked its blank line, if any. */
  end(): SseEvent[] {
    this.#pending += this.#decoder.end()
    const events = this.#drain(true)
    if (this.#pending.length > 0) this.#line(this.#pending, '')
    this.#pending = ''
    if (this.#raw.length > 0) events.push(this.#dispatch())
    return events
  }

  #drain(ended: boolean, events: SseEvent[] = []): SseEvent[] {
    let start = 0
    const text = this.#pending
    for (;;) {
      const cr = text.indexOf('\r', start)
      const lf = text.indexOf('\n', start)
      const at = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf)
      if (at === -1) break
      let eolLength = 1
      if (text[at] === '\r') {
        // A CR at the very end may be the first half of a CRLF still on its way.
        if (at === text.length - 1 && !ended) break
        if (text[at + 1] === '\n') eolLength = 2
      }
      const line = text.slice(start, at)
      const event = this.#line(line, text.slice(at, at + eolLength))
      if (event !== undefined) events.push(event)
      start = at + eolLength
    }
    this.#pending = text.slice(start)
    return events
  }

  #line(line: string, eol: string): SseEvent | undefined {
    this.#raw += line + eol
    if (line.length === 0) return this.#dispatch()
    if (line.startsWith(':')) return undefined
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') this.#data.push(value)
    else if (field === 'event') this.#event = value
    return undefined
  }

  #dispatch(): SseEvent {
    const event: SseEvent = {
      raw: this.#raw,
      event: this.#event,
      data: this.#data.length > 0 ? this.#data.join('\n') : undefined,
    }
    this.#raw = ''
    this.#event = undefined
    this.#data = []
    return event
  }
}

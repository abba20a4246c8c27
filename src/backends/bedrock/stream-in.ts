// A ConverseStream's reply (application/vnd.amazon.eventstream: binary messages, each with
// its headers and a JSON payload, CRC-checked by AWS's own codec) → chat completion chunks,
// the corridor's stream, one event at a time as it arrives:
//   messageStart                 → a chunk with the assistant role
//   contentBlockStart (toolUse)  → a tool_calls delta with the call's id and name
//   contentBlockDelta            → text as content, toolUse.input as the call's arguments,
//                                  reasoningContent as reasoning_content (and, with its
//                                  signature and redacted pieces, as thinking_blocks pieces,
//                                  from which an Anthropic caller's stream rebuilds the blocks)
//   messageStop                  → a chunk with the finish_reason
//   metadata                     → the usage-only chunk (choices: []), after the choices end
//   the end of the body          → [DONE]
//   an exception (`:message-type` exception, e.g. throttlingException mid-stream)
//                                → chat's error event, and the end: the caller learns it in
//                                  the shape it reads, never a stream that just stops.
import { Transform, type TransformCallback } from 'node:stream'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { fromUtf8, toUtf8 } from '@smithy/core/serde'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { streamErrorOf } from './errors-in.ts'
import { completionId, finishReasonOf, thinkingBlockOf, usageOf } from './reply-in.ts'

/** A message larger than this is not one Bedrock sends (its own limit is 16 MiB): the stream is cut. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024
/** The prelude's first field: the message's whole length, big-endian. */
const LENGTH_BYTES = 4

/** One decoded event-stream message: its typed headers and its payload. */
export type Message = ReturnType<EventStreamCodec['decode']>

const frame = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`

/** Splits bytes as they come into whole event-stream messages, decoded (and CRC-checked) by AWS's codec. */
export class EventStreamReader {
  readonly #codec = new EventStreamCodec(toUtf8, fromUtf8)
  #pending: Buffer = Buffer.alloc(0)

  /** The messages completed by `chunk`. Throws on a corrupt or oversized message. */
  push(chunk: Buffer): Message[] {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk])
    const messages: Message[] = []
    while (this.#pending.length >= LENGTH_BYTES) {
      const length = this.#pending.readUInt32BE(0)
      if (length > MAX_MESSAGE_BYTES) throw new Error('an event-stream message of the upstream is too large')
      if (this.#pending.length < length) break
      messages.push(this.#codec.decode(this.#pending.subarray(0, length)))
      this.#pending = this.#pending.subarray(length)
    }
    return messages
  }

  /** Bytes left that are no whole message. */
  get leftover(): number {
    return this.#pending.length
  }
}

/** A header's string value, or undefined. */
export function headerOf(message: Message, name: string): string | undefined {
  const header = message.headers[name]
  return header?.type === 'string' ? header.value : undefined
}

/** Converse's stream events (decoded messages) → chat SSE text. */
export class ChatStreamOf {
  readonly #id = completionId()
  readonly #model: string
  readonly #created: number
  /** Chat's tool call index for each toolUse block, by Converse's contentBlockIndex. */
  readonly #calls = new Map<number, number>()
  #ended = false

  constructor(model: string, created: number) {
    this.#model = model
    this.#created = created
  }

  get ended(): boolean {
    return this.#ended
  }

  message(message: Message): string {
    if (this.#ended) return ''
    const kind = headerOf(message, ':message-type')
    const payload = Buffer.from(message.body).toString('utf8')
    if (kind === 'exception') {
      this.#ended = true
      return frame(streamErrorOf(headerOf(message, ':exception-type') ?? 'internalServerException', payload))
    }
    if (kind === 'error') {
      this.#ended = true
      const code = headerOf(message, ':error-code') ?? 'InternalServerException'
      return frame(streamErrorOf(code, JSON.stringify({ message: headerOf(message, ':error-message') ?? '' })))
    }
    let event: unknown
    try {
      event = JSON.parse(payload)
    } catch {
      return ''
    }
    if (!isJsonObject(event)) return ''
    switch (headerOf(message, ':event-type')) {
      case 'messageStart':
        return this.#chunk({ role: 'assistant', content: '' })
      case 'contentBlockStart':
        return this.#blockStart(event)
      case 'contentBlockDelta':
        return this.#blockDelta(event)
      case 'messageStop':
        return this.#chunk({}, finishReasonOf(event.stopReason))
      case 'metadata':
        return frame({ ...this.#head(), choices: [], usage: usageOf(event.usage) })
      default:
        // contentBlockStop, and whatever a newer API adds: nothing chat carries.
        return ''
    }
  }

  /** The end of the body: [DONE], unless an error ended the stream. */
  end(): string {
    if (this.#ended) return ''
    this.#ended = true
    return 'data: [DONE]\n\n'
  }

  #blockStart(event: JsonObject): string {
    const start = isJsonObject(event.start) ? event.start : {}
    const use = start.toolUse
    if (!isJsonObject(use)) return ''
    const call = this.#calls.size
    this.#calls.set(indexOf(event), call)
    return this.#chunk({
      tool_calls: [
        {
          index: call,
          id: typeof use.toolUseId === 'string' ? use.toolUseId : '',
          type: 'function',
          function: { name: typeof use.name === 'string' ? use.name : '', arguments: '' },
        },
      ],
    })
  }

  #blockDelta(event: JsonObject): string {
    const delta = isJsonObject(event.delta) ? event.delta : {}
    if (typeof delta.text === 'string') return delta.text === '' ? '' : this.#chunk({ content: delta.text })
    if (isJsonObject(delta.toolUse)) {
      const call = this.#calls.get(indexOf(event))
      const input = delta.toolUse.input
      if (call === undefined || typeof input !== 'string' || input === '') return ''
      return this.#chunk({ tool_calls: [{ index: call, function: { arguments: input } }] })
    }
    if (isJsonObject(delta.reasoningContent)) {
      const piece = delta.reasoningContent
      if (typeof piece.text === 'string')
        return this.#chunk({
          reasoning_content: piece.text,
          thinking_blocks: [{ type: 'thinking', thinking: piece.text }],
        })
      if (typeof piece.signature === 'string')
        return this.#chunk({ thinking_blocks: [{ type: 'thinking', thinking: '', signature: piece.signature }] })
      const redacted = thinkingBlockOf(piece)
      if (redacted !== undefined) return this.#chunk({ thinking_blocks: [redacted] })
    }
    return ''
  }

  #head(): JsonObject {
    return { id: this.#id, object: 'chat.completion.chunk', created: this.#created, model: this.#model }
  }

  #chunk(delta: JsonObject, finish: string | null = null): string {
    return frame({ ...this.#head(), choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
  }
}

function indexOf(event: JsonObject): number {
  return typeof event.contentBlockIndex === 'number' ? event.contentBlockIndex : -1
}

/** The body stream: event-stream bytes in, chat chunk SSE bytes out. `first`: messages already read from it. */
export class ChatStreamTransform extends Transform {
  readonly #reader: EventStreamReader
  readonly #stream: ChatStreamOf

  constructor(model: string, created: number, reader: EventStreamReader, first: readonly Message[] = []) {
    super()
    this.#reader = reader
    this.#stream = new ChatStreamOf(model, created)
    const out = this.#translate(first)
    if (out !== '') this.push(out)
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let messages: Message[]
    try {
      messages = this.#reader.push(chunk)
    } catch (err) {
      done(err as Error)
      return
    }
    const out = this.#translate(messages)
    done(null, out === '' ? undefined : out)
  }

  override _flush(done: TransformCallback): void {
    if (this.#reader.leftover > 0 && !this.#stream.ended) {
      done(new Error('the upstream stream ended inside an event-stream message'))
      return
    }
    const out = this.#stream.end()
    done(null, out === '' ? undefined : out)
  }

  #translate(messages: readonly Message[]): string {
    let out = ''
    for (const message of messages) out += this.#stream.message(message)
    return out
  }
}

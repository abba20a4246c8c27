// Anthropic's stream (the upstream's server-sent events) → chat completion chunks, the
// corridor's stream, translated event by event as it arrives (nothing is held back):
//   message_start        → a chunk with the assistant role (and the prompt's usage, kept)
//   content_block_start  → for a tool_use block, a tool_calls delta with its id and name
//   content_block_delta  → text_delta as content, input_json_delta as the tool call's
//                          arguments, thinking_delta as reasoning_content (and as a piece of
//                          thinking_blocks, as is signature_delta: stream-out.ts rebuilds the
//                          blocks from them for an Anthropic caller)
//   message_delta        → a chunk with the finish_reason (and the usage, merged: its counts
//                          are cumulative, and newer API versions repeat the prompt's there)
//   message_stop         → the usage-only chunk (choices: []), then [DONE]
//   error                → chat's error event, and the end
// ping and content_block_stop say nothing chat can carry; a redacted_thinking block comes
// whole in its content_block_start, and goes on as a thinking_blocks piece.
import { Transform, type TransformCallback } from 'node:stream'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { SseParser, type SseEvent } from '../../proxy/sse.ts'
import { openAIErrorOf } from './errors-in.ts'
import { chatUsageOf, finishReasonOf, mergeCounts, NO_COUNTS, type AnthropicCounts } from './reply-in.ts'

const chunkFrame = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`

export class ChatStreamOf {
  readonly #created: number
  #id = ''
  #model = ''
  #counts: AnthropicCounts = NO_COUNTS
  /** Chat's tool call index for each open tool_use block, by Anthropic's block index. */
  readonly #calls = new Map<number, number>()
  #ended = false

  constructor(created: number) {
    this.#created = created
  }

  /** The chat SSE text for one Anthropic event's data. */
  data(text: string): string {
    if (this.#ended) return ''
    let event: unknown
    try {
      event = JSON.parse(text)
    } catch {
      return ''
    }
    if (!isJsonObject(event)) return ''
    switch (event.type) {
      case 'message_start': {
        const message = isJsonObject(event.message) ? event.message : {}
        if (typeof message.id === 'string') this.#id = message.id
        if (typeof message.model === 'string') this.#model = message.model
        this.#counts = mergeCounts(this.#counts, message.usage)
        return this.#chunk({ role: 'assistant', content: '' })
      }
      case 'content_block_start':
        return this.#blockStart(event)
      case 'content_block_delta':
        return this.#blockDelta(event)
      case 'message_delta': {
        this.#counts = mergeCounts(this.#counts, event.usage)
        const delta = isJsonObject(event.delta) ? event.delta : {}
        if (delta.stop_reason === undefined || delta.stop_reason === null) return ''
        return this.#chunk({}, finishReasonOf(delta.stop_reason))
      }
      case 'message_stop':
        this.#ended = true
        return chunkFrame({ ...this.#head(), choices: [], usage: chatUsageOf(this.#counts) }) + 'data: [DONE]\n\n'
      case 'error':
        this.#ended = true
        return chunkFrame(openAIErrorOf(500, event).body)
      default:
        return ''
    }
  }

  #blockStart(event: JsonObject): string {
    const block = isJsonObject(event.content_block) ? event.content_block : {}
    const index = typeof event.index === 'number' ? event.index : -1
    if (block.type === 'tool_use') {
      const call = this.#calls.size
      this.#calls.set(index, call)
      return this.#chunk({
        tool_calls: [
          {
            index: call,
            id: typeof block.id === 'string' ? block.id : '',
            type: 'function',
            function: { name: typeof block.name === 'string' ? block.name : '', arguments: '' },
          },
        ],
      })
    }
    if (block.type === 'redacted_thinking') return this.#chunk({ thinking_blocks: [block] })
    // A text block starts empty; should one ever start with text, it is not lost.
    if (block.type === 'text' && typeof block.text === 'string' && block.text !== '')
      return this.#chunk({ content: block.text })
    return ''
  }

  #blockDelta(event: JsonObject): string {
    const delta = isJsonObject(event.delta) ? event.delta : {}
    switch (delta.type) {
      case 'text_delta':
        return typeof delta.text === 'string' ? this.#chunk({ content: delta.text }) : ''
      case 'thinking_delta':
        if (typeof delta.thinking !== 'string') return ''
        return this.#chunk({
          reasoning_content: delta.thinking,
          thinking_blocks: [{ type: 'thinking', thinking: delta.thinking }],
        })
      case 'signature_delta':
        if (typeof delta.signature !== 'string') return ''
        return this.#chunk({ thinking_blocks: [{ type: 'thinking', thinking: '', signature: delta.signature }] })
      case 'input_json_delta': {
        const call = this.#calls.get(typeof event.index === 'number' ? event.index : -1)
        if (call === undefined || typeof delta.partial_json !== 'string' || delta.partial_json === '') return ''
        return this.#chunk({ tool_calls: [{ index: call, function: { arguments: delta.partial_json } }] })
      }
      default:
        return ''
    }
  }

  #head(): JsonObject {
    return { id: this.#id, object: 'chat.completion.chunk', created: this.#created, model: this.#model }
  }

  #chunk(delta: JsonObject, finish: string | null = null): string {
    return chunkFrame({ ...this.#head(), choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
  }
}

/** The body stream: Anthropic's SSE bytes in, chat chunk SSE bytes out. */
export class ChatStreamTransform extends Transform {
  readonly #parser = new SseParser()
  readonly #stream: ChatStreamOf

  constructor(created: number) {
    super()
    this.#stream = new ChatStreamOf(created)
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const out = this.#translate(this.#parser.push(chunk))
    done(null, out === '' ? undefined : out)
  }

  override _flush(done: TransformCallback): void {
    const out = this.#translate(this.#parser.end())
    done(null, out === '' ? undefined : out)
  }

  #translate(events: readonly SseEvent[]): string {
    let out = ''
    for (const event of events) if (event.data !== undefined) out += this.#stream.data(event.data)
    return out
  }
}

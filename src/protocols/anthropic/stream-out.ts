// Chat completion chunks (the corridor's internal stream) → Anthropic's event sequence:
//   message_start, ping, then per content block content_block_start → content_block_delta
//   (text_delta, input_json_delta for a tool call's arguments, or thinking_delta and
//   signature_delta from an anthropic backend's thinking_blocks pieces) → content_block_stop,
//   then message_delta (stop_reason, usage) and message_stop.
// Each chunk is translated as it arrives and written at once (nothing is held back but the
// end: chat reports usage after the finish_reason, so message_delta waits for `[DONE]`, or
// for the stream's end when an upstream sends none). message_start carries no usage yet
// (chat has none to give so early); message_delta carries the whole of it, input_tokens
// included, which is how Anthropic's SDKs take it (a present input_tokens overwrites).
import { chatEventOf } from '../../proxy/chat-chunk.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { anthropicErrorOfBody } from './errors.ts'
import { stopReasonOf, usageOf, type StopReason } from './reply-out.ts'

/** One Anthropic SSE frame. */
export function frame(type: string, data: JsonObject): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
}

interface OpenBlock {
  readonly index: number
  readonly kind: 'text' | 'tool' | 'thinking' | 'redacted'
  /** For a tool block: chat's index of the tool call it carries. */
  readonly call?: number
}

export class AnthropicStream {
  readonly #requestId: string
  #started = false
  #ended = false
  #blocks = 0
  #open: OpenBlock | undefined
  #stop: StopReason | undefined
  #usage: unknown

  constructor(requestId: string) {
    this.#requestId = requestId
  }

  /** The events for one chat SSE event's data (a JSON text, or `[DONE]`). */
  data(text: string): string {
    if (this.#ended) return ''
    const event = chatEventOf(text)
    if (event === undefined) return ''
    if (event.kind === 'done') return this.end()
    // The relay's own error event (the upstream broke off mid-stream).
    if (event.kind === 'error') {
      this.#ended = true
      return frame('error', { error: anthropicErrorOfBody(500, event.body, this.#requestId).body.error })
    }
    const { chunk, choice, delta } = event
    let out = this.#start(chunk)
    if (chunk.usage !== undefined && chunk.usage !== null) this.#usage = chunk.usage
    if (choice === undefined) return out
    if (Array.isArray(delta.thinking_blocks)) for (const piece of delta.thinking_blocks) out += this.#thinking(piece)
    for (const piece of [delta.content, delta.refusal]) {
      if (typeof piece === 'string' && piece !== '') {
        out += this.#enter({ kind: 'text' }, { type: 'text', text: '', citations: null })
        out += frame('content_block_delta', { index: this.#blocks - 1, delta: { type: 'text_delta', text: piece } })
      }
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') this.#stop = 'refusal'
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) out += this.#toolCall(call)
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) {
      out += this.#close()
      this.#stop ??= stopReasonOf(choice.finish_reason)
    }
    return out
  }

  /** The closing events, once (at `[DONE]`, or the stream's end without one). */
  end(): string {
    if (this.#ended) return ''
    this.#ended = true
    let out = this.#start({})
    out += this.#close()
    out += frame('message_delta', {
      delta: { stop_reason: this.#stop ?? 'end_turn', stop_sequence: null, stop_details: null },
      usage: usageOf(this.#usage),
    })
    return out + frame('message_stop', {})
  }

  #start(chunk: JsonObject): string {
    if (this.#started) return ''
    this.#started = true
    const message = {
      id: typeof chunk.id === 'string' ? chunk.id : `msg_${this.#requestId}`,
      type: 'message',
      role: 'assistant',
      model: typeof chunk.model === 'string' ? chunk.model : '',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    }
    return frame('message_start', { message }) + frame('ping', {})
  }

  /** Opens a block of this kind unless it is the one open; the events that takes. */
  #enter(block: Omit<OpenBlock, 'index'>, contentBlock: JsonObject): string {
    const open = this.#open
    if (open !== undefined && open.kind === block.kind && open.call === block.call) return ''
    const out = this.#close()
    this.#open = { ...block, index: this.#blocks++ }
    return out + frame('content_block_start', { index: this.#open.index, content_block: contentBlock })
  }

  #close(): string {
    const open = this.#open
    if (open === undefined) return ''
    this.#open = undefined
    return frame('content_block_stop', { index: open.index })
  }

  /**
   * A piece of extended thinking (an anthropic backend's, backends/anthropic/stream-in.ts):
   * thinking text streams into a thinking block, its signature ends it; a redacted block
   * comes whole. Plain reasoning_content (an OpenAI-compatible server's) has no signature
   * an Anthropic caller could send back, and is not shown.
   */
  #thinking(piece: unknown): string {
    if (!isJsonObject(piece)) return ''
    if (piece.type === 'redacted_thinking') {
      const out = this.#enter({ kind: 'redacted', call: this.#blocks }, piece)
      return out + this.#close()
    }
    if (piece.type !== 'thinking') return ''
    let out = this.#enter({ kind: 'thinking' }, { type: 'thinking', thinking: '', signature: '' })
    const index = this.#blocks - 1
    if (typeof piece.thinking === 'string' && piece.thinking !== '')
      out += frame('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece.thinking } })
    if (typeof piece.signature === 'string') {
      out += frame('content_block_delta', { index, delta: { type: 'signature_delta', signature: piece.signature } })
      // Signed: this block is whole, and the next thinking is a block of its own.
      out += this.#close()
    }
    return out
  }

  /** A piece of a tool call: its start (id and name) opens a tool_use block, its arguments stream as JSON. */
  #toolCall(call: unknown): string {
    if (!isJsonObject(call)) return ''
    const index = typeof call.index === 'number' ? call.index : 0
    const fn = isJsonObject(call.function) ? call.function : {}
    let out = ''
    const open = this.#open
    if (open === undefined || open.kind !== 'tool' || open.call !== index) {
      out += this.#enter(
        { kind: 'tool', call: index },
        {
          type: 'tool_use',
          id: typeof call.id === 'string' ? call.id : '',
          name: typeof fn.name === 'string' ? fn.name : '',
          input: {},
          caller: { type: 'direct' },
        },
      )
    }
    if (typeof fn.arguments === 'string' && fn.arguments !== '') {
      out += frame('content_block_delta', {
        index: this.#blocks - 1,
        delta: { type: 'input_json_delta', partial_json: fn.arguments },
      })
    }
    return out
  }
}

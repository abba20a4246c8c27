// Chat completion chunks (a chat-only deployment's stream) → the Responses API's event
// sequence, translated chunk by chunk as they arrive (nothing is held back but the end):
//   response.created, response.in_progress                       (at the first chunk)
//   reasoning_content  → a reasoning item: output_item.added, reasoning_summary_part.added,
//                        reasoning_summary_text.delta… (.done, part.done, output_item.done
//                        when something else begins; an anthropic backend's signed thinking
//                        goes in the finished item's encrypted_content: carrier.ts)
//   content            → a message item: output_item.added, content_part.added,
//                        output_text.delta… (output_text.done, content_part.done, item.done)
//   tool_calls         → a function_call item per call: output_item.added (call_id, name),
//                        function_call_arguments.delta… (.done, output_item.done)
//   usage, [DONE]      → response.completed (or response.incomplete when the cap or a filter
//                        cut it) with the whole response and its usage
//   an error chunk     → an `error` event, and the end
// Every event carries its sequence_number; OpenAI's SDK checks the opening and closing
// events of each item, so none is optional.
import { chatEventOf } from '../../proxy/chat-chunk.ts'
import { Transform, type TransformCallback } from 'node:stream'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { SseParser, type SseEvent } from '../../proxy/sse.ts'
import { signatureOfCall } from './carrier.ts'
import {
  endingOf,
  functionCallItem,
  messageItem,
  newId,
  outputText,
  reasoningItem,
  responseObject,
  responseUsageOf,
} from './reply.ts'

type OpenItem =
  | {
      readonly kind: 'reasoning'
      readonly id: string
      text: string
      readonly thinking: JsonObject[]
      readonly signatures: Record<string, string>
    }
  | { readonly kind: 'message'; readonly id: string; text: string }
  | {
      readonly kind: 'call'
      readonly id: string
      readonly call: number
      readonly callId: string
      name: string
      args: string
    }

export class ResponsesStream {
  readonly #request: JsonObject
  readonly #id = newId('resp_')
  #seq = 0
  #started = false
  #ended = false
  #created = Math.floor(Date.now() / 1000)
  #model: unknown
  readonly #output: JsonObject[] = []
  #open: OpenItem | undefined
  #finish: unknown
  #usage: unknown

  constructor(request: JsonObject) {
    this.#request = request
    this.#model = request.model
  }

  /** The events for one chat SSE event's data (a JSON text, or `[DONE]`). */
  data(text: string): string {
    if (this.#ended) return ''
    const event = chatEventOf(text)
    if (event === undefined) return ''
    if (event.kind === 'done') return this.end()
    if (event.kind === 'error') return this.#error(event.error)
    const { chunk, choice, delta } = event
    let out = this.#start(chunk)
    if (chunk.usage !== undefined && chunk.usage !== null) this.#usage = chunk.usage
    if (choice === undefined) return out
    if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '')
      out += this.#reasoning(delta.reasoning_content)
    if (Array.isArray(delta.thinking_blocks)) out += this.#thinking(delta.thinking_blocks)
    if (typeof delta.content === 'string' && delta.content !== '') out += this.#text(delta.content)
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) out += this.#toolCall(call)
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) this.#finish = choice.finish_reason
    return out
  }

  /** The closing events, once (at `[DONE]`, or the stream's end without one). */
  end(): string {
    if (this.#ended) return ''
    let out = this.#start({})
    this.#ended = true
    const ending = endingOf(this.#finish)
    out += this.#close(ending.status === 'completed' ? 'completed' : 'incomplete')
    const response = this.#response(ending.status, ending.incomplete_details, responseUsageOf(this.#usage))
    return out + this.#event(ending.status === 'completed' ? 'response.completed' : 'response.incomplete', { response })
  }

  #response(status: string, incompleteDetails: JsonObject | null, usage: JsonObject | null): JsonObject {
    return responseObject(this.#request, {
      id: this.#id,
      model: this.#model,
      createdAt: this.#created,
      status,
      incompleteDetails,
      output: [...this.#output],
      usage,
    })
  }

  #event(type: string, fields: JsonObject): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, ...fields, sequence_number: this.#seq++ })}\n\n`
  }

  #start(chunk: JsonObject): string {
    if (this.#started) return ''
    this.#started = true
    if (chunk.model !== undefined) this.#model = chunk.model
    if (typeof chunk.created === 'number') this.#created = chunk.created
    const response = this.#response('in_progress', null, null)
    return this.#event('response.created', { response }) + this.#event('response.in_progress', { response })
  }

  #error(error: JsonObject): string {
    this.#ended = true
    const text = (value: unknown): string | null => (typeof value === 'string' ? value : null)
    return this.#event('error', {
      code: text(error.code) ?? text(error.type),
      message: text(error.message) ?? 'The upstream broke off the reply.',
      param: text(error.param),
    })
  }

  /** Closes the open item: its closing events, and it joins the finished output. */
  #close(status = 'completed'): string {
    const open = this.#open
    if (open === undefined) return ''
    this.#open = undefined
    const at = { item_id: open.id, output_index: this.#output.length }
    let out = ''
    let item: JsonObject
    switch (open.kind) {
      case 'reasoning': {
        item = reasoningItem(open.id, open.text, { thinking: open.thinking, signatures: open.signatures })
        const part = { type: 'summary_text', text: open.text }
        if (open.text !== '') {
          out += this.#event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: open.text })
          out += this.#event('response.reasoning_summary_part.done', { ...at, summary_index: 0, part })
        }
        break
      }
      case 'message':
        item = messageItem(open.id, status, [outputText(open.text)])
        out += this.#event('response.output_text.done', { ...at, content_index: 0, text: open.text, logprobs: [] })
        out += this.#event('response.content_part.done', { ...at, content_index: 0, part: outputText(open.text) })
        break
      case 'call':
        item = functionCallItem(open.id, status, open.callId, open.name, open.args)
        out += this.#event('response.function_call_arguments.done', { ...at, name: open.name, arguments: open.args })
        break
    }
    out += this.#event('response.output_item.done', { output_index: this.#output.length, item })
    this.#output.push(item)
    return out
  }

  /** Opens an item (closing the one open); its opening events. */
  #enter(item: OpenItem, shown: JsonObject): string {
    const out = this.#close()
    this.#open = item
    return out + this.#event('response.output_item.added', { output_index: this.#output.length, item: shown })
  }

  #openReasoning(): { out: string; item: Extract<OpenItem, { kind: 'reasoning' }> } {
    if (this.#open?.kind === 'reasoning') return { out: '', item: this.#open }
    const item = { kind: 'reasoning' as const, id: newId('rs_'), text: '', thinking: [], signatures: {} }
    return { out: this.#enter(item, { id: item.id, type: 'reasoning', summary: [] }), item }
  }

  #reasoning(piece: string): string {
    const opened = this.#openReasoning()
    let out = opened.out
    const { item } = opened
    const at = { item_id: item.id, output_index: this.#output.length, summary_index: 0 }
    if (item.text === '')
      out += this.#event('response.reasoning_summary_part.added', { ...at, part: { type: 'summary_text', text: '' } })
    item.text += piece
    return out + this.#event('response.reasoning_summary_text.delta', { ...at, delta: piece })
  }

  /** Pieces of an anthropic backend's thinking blocks: text joins the block, a signature ends it, a redacted block comes whole. */
  #thinking(pieces: readonly unknown[]): string {
    const opened = this.#openReasoning()
    const blocks = opened.item.thinking
    for (const piece of pieces) {
      if (!isJsonObject(piece)) continue
      if (piece.type === 'redacted_thinking') {
        blocks.push(piece)
        continue
      }
      if (piece.type !== 'thinking') continue
      let last = blocks.at(-1)
      if (last === undefined || last.type !== 'thinking' || typeof last.signature === 'string') {
        last = { type: 'thinking', thinking: '' }
        blocks.push(last)
      }
      if (typeof piece.thinking === 'string') last.thinking = String(last.thinking) + piece.thinking
      if (typeof piece.signature === 'string') last.signature = piece.signature
    }
    return opened.out
  }

  #text(piece: string): string {
    let out = ''
    let open = this.#open
    if (open?.kind !== 'message') {
      open = { kind: 'message', id: newId('msg_'), text: '' }
      out += this.#enter(open, messageItem(open.id, 'in_progress', []))
      out += this.#event('response.content_part.added', {
        item_id: open.id,
        output_index: this.#output.length,
        content_index: 0,
        part: outputText(''),
      })
    }
    open.text += piece
    return (
      out +
      this.#event('response.output_text.delta', {
        item_id: open.id,
        output_index: this.#output.length,
        content_index: 0,
        delta: piece,
        logprobs: [],
      })
    )
  }

  /** A piece of a tool call: its start (id and name) opens a function_call item, its arguments stream. */
  #toolCall(piece: unknown): string {
    if (!isJsonObject(piece)) return ''
    const index = typeof piece.index === 'number' ? piece.index : 0
    const fn = isJsonObject(piece.function) ? piece.function : {}
    let out = ''
    let open = this.#open
    if (open?.kind !== 'call' || open.call !== index) {
      const callId = typeof piece.id === 'string' && piece.id !== '' ? piece.id : newId('call_')
      // A thought signature goes back in a reasoning item before the call (carrier.ts).
      const signature = signatureOfCall(piece)
      if (signature !== undefined) {
        const opened = this.#openReasoning()
        out += opened.out
        opened.item.signatures[callId] = signature
      }
      open = { kind: 'call', id: newId('fc_'), call: index, callId, name: '', args: '' }
      if (typeof fn.name === 'string') open.name = fn.name
      out += this.#enter(open, functionCallItem(open.id, 'in_progress', callId, open.name, ''))
    } else if (typeof fn.name === 'string' && open.name === '') open.name = fn.name
    if (typeof fn.arguments === 'string' && fn.arguments !== '') {
      open.args += fn.arguments
      out += this.#event('response.function_call_arguments.delta', {
        item_id: open.id,
        output_index: this.#output.length,
        delta: fn.arguments,
      })
    }
    return out
  }
}

/** The body stream: chat chunk SSE bytes in, Responses event SSE bytes out. */
export class ResponsesStreamTransform extends Transform {
  readonly #parser = new SseParser()
  readonly #stream: ResponsesStream

  constructor(request: JsonObject) {
    super()
    this.#stream = new ResponsesStream(request)
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const out = this.#translate(this.#parser.push(chunk))
    done(null, out === '' ? undefined : out)
  }

  override _flush(done: TransformCallback): void {
    // An upstream that ends without `[DONE]` still gets its response.completed.
    const out = this.#translate(this.#parser.end()) + this.#stream.end()
    done(null, out === '' ? undefined : out)
  }

  #translate(events: readonly SseEvent[]): string {
    let out = ''
    for (const event of events) if (event.data !== undefined) out += this.#stream.data(event.data)
    return out
  }
}

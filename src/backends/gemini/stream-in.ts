// Gemini's streamed reply (`:streamGenerateContent?alt=sse`: one GenerateContentResponse
// per server-sent event, no end marker) as OpenAI's chat completion chunks, one out for
// each one in, as they come: nothing is held back but a partial event. Usage metadata
// comes with the events and grows; the last one seen is the call's, sent after the
// choices end as the usage chunk OpenAI sends for stream_options.include_usage (the relay
// hides it from a client that did not ask), then `[DONE]`.
import { StringDecoder } from 'node:string_decoder'
import { Transform, type TransformCallback } from 'node:stream'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { geminiErrorOf } from './errors-in.ts'
import { candidatesOf, completionIdOf, finishReasonOf, indexOf, partsOf, usageOf } from './reply-in.ts'

/** A single event larger than this is not Gemini's: the stream is cut as a bad response. */
const MAX_EVENT_CHARS = 16 * 1024 * 1024
const EVENT_END = /\r?\n\r?\n/

interface ChoiceState {
  /** Tool calls sent so far: the next one's index. */
  calls: number
}

export class GeminiStreamIn extends Transform {
  readonly #decoder = new StringDecoder('utf8')
  readonly #model: string
  readonly #created: number
  readonly #choices = new Map<number, ChoiceState>()
  #pending = ''
  #id: string | undefined
  #usage: JsonObject | undefined

  constructor(model: string, created: number) {
    super()
    this.#model = model
    this.#created = created
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#pending += this.#decoder.write(chunk)
    this.#drain()
    if (this.#pending.length > MAX_EVENT_CHARS) {
      done(new Error('a streamed event of the upstream is too large'))
      return
    }
    done()
  }

  override _flush(done: TransformCallback): void {
    this.#pending += this.#decoder.end() + '\n\n'
    this.#drain()
    if (this.#usage !== undefined) this.#send({ ...this.#chunkHead(), choices: [], usage: this.#usage })
    this.push('data: [DONE]\n\n')
    done()
  }

  #drain(): void {
    for (;;) {
      const end = EVENT_END.exec(this.#pending)
      if (end === null) return
      const event = this.#pending.slice(0, end.index)
      this.#pending = this.#pending.slice(end.index + end[0].length)
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n')
      if (data !== '') this.#event(data)
    }
  }

  #event(data: string): void {
    let response: unknown
    try {
      response = JSON.parse(data)
    } catch {
      return
    }
    if (!isJsonObject(response)) return
    if (isJsonObject(response.error)) {
      // An error in the middle of a stream: said in OpenAI's shape, as OpenAI says one.
      this.#send(geminiErrorOf(500, JSON.stringify(response)).body)
      return
    }
    this.#id ??= completionIdOf(response)
    this.#usage = usageOf(response.usageMetadata) ?? this.#usage
    candidatesOf(response).forEach((candidate, i) => {
      const index = indexOf(candidate, i)
      let state = this.#choices.get(index)
      const delta: JsonObject = {}
      if (state === undefined) {
        state = { calls: 0 }
        this.#choices.set(index, state)
        delta.role = 'assistant'
      }
      const said = partsOf(candidate)
      if (said.text !== '') delta.content = said.text
      if (said.reasoning !== '') delta.reasoning_content = said.reasoning
      if (said.toolCalls.length > 0) {
        const first = state.calls
        delta.tool_calls = said.toolCalls.map((call, k) => ({ index: first + k, ...call }))
        state.calls += said.toolCalls.length
      }
      const finish = finishReasonOf(candidate.finishReason, state.calls > 0)
      if (Object.keys(delta).length === 0 && finish === null) return
      this.#send({ ...this.#chunkHead(), choices: [{ index, delta, finish_reason: finish, logprobs: null }] })
    })
  }

  #chunkHead(): JsonObject {
    this.#id ??= completionIdOf({})
    return { id: this.#id, object: 'chat.completion.chunk', created: this.#created, model: this.#model }
  }

  #send(value: unknown): void {
    this.push(`data: ${JSON.stringify(value)}\n\n`)
  }
}

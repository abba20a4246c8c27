// The output items of a Responses API reply, in both wire forms: the finished items of the
// `response` object, and the events that stream each one. A reply is one assistant
// message (text, or JSON for text.format), or one `function_call` item per tool called.
import type { Generation } from './generation.ts'
import { newId } from './ids.ts'
import { jsonContent, toolCallTexts, type CallText } from './json-reply.ts'
import type { ReplyPlan } from './reply-plan.ts'
import { generateText, type GeneratedText } from './text.ts'

/** An event without its sequence number (the stream numbers them), and whether it carries tokens. */
export interface ItemEvent {
  readonly type: string
  readonly fields: Record<string, unknown>
  readonly paced: boolean
}

export interface OutputItem {
  /** The finished item, as in `response.output`. */
  readonly item: Record<string, unknown>
  /** Its events at `outputIndex`, from output_item.added to output_item.done. */
  events(outputIndex: number): Generator<ItemEvent>
}

export interface ResponseOutput {
  readonly items: readonly OutputItem[]
  /** max_output_tokens cut the reply: the response is "incomplete". */
  readonly cut: boolean
  readonly tokens: number
}

export interface ResponseOutputInput {
  readonly plan: ReplyPlan
  readonly seed: string
  readonly generation: Generation
  readonly proseTokens: number
}

export async function responseOutput(input: ResponseOutputInput): Promise<ResponseOutput> {
  const { plan, generation } = input
  if (plan.kind === 'tools') {
    const texts = await toolCallTexts(plan.tools, generation.limit)
    const last = texts.calls.length - 1
    return {
      items: texts.calls.map((call, i) => functionCall(call, texts.cut && i === last)),
      cut: texts.cut,
      tokens: texts.tokens,
    }
  }
  if (plan.kind === 'json') {
    const content = await jsonContent(plan.format, input.seed, 0, input.proseTokens, generation.limit)
    return { items: [message(content, content.cut)], cut: content.cut, tokens: content.tokens }
  }
  const text = await generateText(input.seed, 0, generation.budget, generation.finishReason)
  // Prose fills the budget: with the request's own limit it is the limit that ended it.
  const cut = generation.finishReason === 'length'
  return { items: [message(text, cut)], cut, tokens: text.tokens }
}

const event = (type: string, fields: Record<string, unknown>, paced = false): ItemEvent => ({ type, fields, paced })

function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [], logprobs: [] }
}

function message(reply: GeneratedText, cut: boolean): OutputItem {
  const item = {
    id: newId('msg_'),
    type: 'message',
    status: cut ? 'incomplete' : 'completed',
    role: 'assistant',
    content: [outputText(reply.text)],
  }
  return {
    item,
    *events(outputIndex) {
      const at = { item_id: item.id, output_index: outputIndex, content_index: 0 }
      yield event('response.output_item.added', {
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', content: [] },
      })
      yield event('response.content_part.added', { ...at, part: outputText('') })
      for (const delta of reply.pieces) yield event('response.output_text.delta', { ...at, delta, logprobs: [] }, true)
      yield event('response.output_text.done', { ...at, text: reply.text, logprobs: [] })
      yield event('response.content_part.done', { ...at, part: outputText(reply.text) })
      yield event('response.output_item.done', { output_index: outputIndex, item })
    },
  }
}

function functionCall(call: CallText, cut: boolean): OutputItem {
  const item = {
    id: newId('fc_'),
    type: 'function_call',
    status: cut ? 'incomplete' : 'completed',
    arguments: call.arguments.text,
    call_id: newId('call_'),
    name: call.name,
  }
  return {
    item,
    *events(outputIndex) {
      const at = { item_id: item.id, output_index: outputIndex }
      yield event('response.output_item.added', {
        output_index: outputIndex,
        item: { ...item, status: 'in_progress', arguments: '' },
      })
      for (const delta of call.arguments.pieces)
        yield event('response.function_call_arguments.delta', { ...at, delta }, true)
      yield event('response.function_call_arguments.done', { ...at, name: call.name, arguments: call.arguments.text })
      yield event('response.output_item.done', { output_index: outputIndex, item })
    },
  }
}

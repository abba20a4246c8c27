// Anthropic's Message (the upstream's reply) → a chat completion, the corridor's reply. The
// usage is exact: Anthropic reports the prompt in three parts (input_tokens, which is what
// was neither written to nor read from its cache, cache_creation_input_tokens and
// cache_read_input_tokens); prompt_tokens is their sum, which is what the key is charged,
// and the two cache parts are kept apart in prompt_tokens_details (cached_tokens for the
// read, as OpenAI names it; cache_write_tokens for the write, as the Responses API does), so
// src/protocols/anthropic/reply-out.ts gives an Anthropic caller back the same three parts.
// Thinking is reasoning_content, as OpenAI-compatible servers name it, and its blocks are kept
// whole as thinking_blocks, which reply-out.ts gives an Anthropic caller back.
import { isJsonObject, type JsonObject } from '../../json.ts'
import { assistantChoice } from '../assistant-choice.ts'

/** Anthropic's stop_reason as chat's finish_reason. */
export function finishReasonOf(stop: unknown): string {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length'
    case 'tool_use':
      return 'tool_calls'
    case 'refusal':
      return 'content_filter'
    default:
      // end_turn, stop_sequence, pause_turn
      return 'stop'
  }
}

/** The four counts Anthropic reports; a stream sends them in two parts (message_start, then message_delta). */
export interface AnthropicCounts {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

export const NO_COUNTS: AnthropicCounts = Object.freeze({
  input_tokens: 0,
  output_tokens: 0,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
})

/** `counts` with every count `usage` states replaced (message_delta's are cumulative, and win). */
export function mergeCounts(counts: AnthropicCounts, usage: unknown): AnthropicCounts {
  if (!isJsonObject(usage)) return counts
  const next = { ...counts }
  for (const name of Object.keys(NO_COUNTS) as (keyof AnthropicCounts)[]) {
    const value = usage[name]
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) next[name] = Math.floor(value)
  }
  return next
}

/** Anthropic's counts as chat's usage object. */
export function chatUsageOf(counts: AnthropicCounts): JsonObject {
  const prompt = counts.input_tokens + counts.cache_creation_input_tokens + counts.cache_read_input_tokens
  return {
    prompt_tokens: prompt,
    completion_tokens: counts.output_tokens,
    total_tokens: prompt + counts.output_tokens,
    prompt_tokens_details: {
      cached_tokens: counts.cache_read_input_tokens,
      cache_write_tokens: counts.cache_creation_input_tokens,
    },
  }
}

/** The chat completion for a Message. */
export function chatCompletionOf(message: unknown, created: number): JsonObject {
  const m = isJsonObject(message) ? message : {}
  let text = ''
  let reasoning = ''
  const calls: JsonObject[] = []
  const thoughts: JsonObject[] = []
  for (const block of Array.isArray(m.content) ? m.content : []) {
    if (!isJsonObject(block)) continue
    if (block.type === 'text' && typeof block.text === 'string') text += block.text
    else if (block.type === 'thinking' || block.type === 'redacted_thinking') {
      // Whole, signature included: an Anthropic caller sends them back on its next turn.
      thoughts.push(block)
      if (typeof block.thinking === 'string') reasoning += block.thinking
    } else if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
      calls.push({
        id: block.id,
        type: 'function',
        function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
      })
    }
  }
  return {
    id: typeof m.id === 'string' ? m.id : '',
    object: 'chat.completion',
    created,
    model: typeof m.model === 'string' ? m.model : '',
    choices: [assistantChoice({ text, reasoning, thoughts, calls }, finishReasonOf(m.stop_reason))],
    usage: chatUsageOf(mergeCounts(NO_COUNTS, m.usage)),
  }
}

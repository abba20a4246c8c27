// A Converse response (the upstream's reply) → a chat completion, the corridor's reply.
// The usage is exact, and reported as the anthropic backend reports Anthropic's: Bedrock
// counts the prompt in three parts as Anthropic does (inputTokens, which is neither read
// from nor written to the cache, cacheReadInputTokens and cacheWriteInputTokens);
// prompt_tokens is their sum, what the key is charged, and the two cache parts stay apart
// in prompt_tokens_details (cached_tokens, cache_write_tokens), so an Anthropic caller gets
// the three parts back. Reasoning (reasoningContent) is reasoning_content, and its blocks are
// kept whole, signature included, as Anthropic's thinking_blocks, which an Anthropic caller
// sends back on its next turn.
import { randomUUID } from 'node:crypto'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { chatUsageOf, NO_COUNTS, type AnthropicCounts } from '../anthropic/reply-in.ts'
import { assistantChoice } from '../assistant-choice.ts'

/** Converse's stopReason as chat's finish_reason. */
export function finishReasonOf(stop: unknown): string {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length'
    case 'tool_use':
      return 'tool_calls'
    case 'guardrail_intervened':
    case 'content_filtered':
      return 'content_filter'
    default:
      // end_turn, stop_sequence (and malformed_* output, which ends the turn all the same)
      return 'stop'
  }
}

const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.floor(value) : 0

/** Chat's usage object for Converse's TokenUsage. */
export function usageOf(usage: unknown): JsonObject {
  const u = isJsonObject(usage) ? usage : {}
  const counts: AnthropicCounts = {
    ...NO_COUNTS,
    input_tokens: count(u.inputTokens),
    output_tokens: count(u.outputTokens),
    cache_read_input_tokens: count(u.cacheReadInputTokens),
    cache_creation_input_tokens: count(u.cacheWriteInputTokens),
  }
  return chatUsageOf(counts)
}

export function completionId(): string {
  return `chatcmpl-${randomUUID().replaceAll('-', '')}`
}

/** A reasoningContent block as Anthropic's thinking block (what thinking_blocks hold), or undefined. */
export function thinkingBlockOf(reasoning: unknown): JsonObject | undefined {
  if (!isJsonObject(reasoning)) return undefined
  if (typeof reasoning.redactedContent === 'string')
    return { type: 'redacted_thinking', data: reasoning.redactedContent }
  const text = reasoning.reasoningText
  if (!isJsonObject(text) || typeof text.text !== 'string') return undefined
  return {
    type: 'thinking',
    thinking: text.text,
    ...(typeof text.signature === 'string' ? { signature: text.signature } : {}),
  }
}

/** The chat completion for a Converse response to model `model`. */
export function chatCompletionOf(response: unknown, model: string, created: number): JsonObject {
  const r = isJsonObject(response) ? response : {}
  const output = isJsonObject(r.output) ? r.output : {}
  const message = isJsonObject(output.message) ? output.message : {}
  let text = ''
  let reasoning = ''
  const calls: JsonObject[] = []
  const thoughts: JsonObject[] = []
  for (const block of Array.isArray(message.content) ? message.content : []) {
    if (!isJsonObject(block)) continue
    if (typeof block.text === 'string') text += block.text
    else if (isJsonObject(block.reasoningContent)) {
      const thought = thinkingBlockOf(block.reasoningContent)
      if (thought === undefined) continue
      thoughts.push(thought)
      if (typeof thought.thinking === 'string') reasoning += thought.thinking
    } else if (isJsonObject(block.toolUse)) {
      const use = block.toolUse
      if (typeof use.toolUseId !== 'string' || typeof use.name !== 'string') continue
      calls.push({
        id: use.toolUseId,
        type: 'function',
        function: { name: use.name, arguments: JSON.stringify(use.input ?? {}) },
      })
    }
  }
  return {
    id: completionId(),
    object: 'chat.completion',
    created,
    model,
    choices: [assistantChoice({ text, reasoning, thoughts, calls }, finishReasonOf(r.stopReason))],
    usage: usageOf(r.usage),
  }
}

// A chat completion (the corridor's internal reply) → Anthropic's Message. The usage is the
// upstream's, as reported: input_tokens is the prompt less what the upstream read from its
// cache and wrote to it, which Anthropic reports apart (cache_read_input_tokens,
// cache_creation_input_tokens), so the three add up to the prompt_tokens the gateway metered.
import { isJsonObject, type JsonObject } from '../../json.ts'

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal'

/** Chat's finish_reason as Anthropic's stop_reason. */
export function stopReasonOf(finish: unknown): StopReason {
  switch (finish) {
    case 'length':
      return 'max_tokens'
    case 'tool_calls':
    case 'function_call':
      return 'tool_use'
    case 'content_filter':
      return 'refusal'
    default:
      return 'end_turn'
  }
}

export interface AnthropicUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

/** Chat's usage object in Anthropic's terms; zeros when there is none. */
export function usageOf(usage: unknown): AnthropicUsage {
  const u = isJsonObject(usage) ? usage : {}
  const prompt = count(u.prompt_tokens)
  const details = isJsonObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {}
  const cached = Math.min(prompt, count(details.cached_tokens))
  // Written to the cache: an anthropic upstream's cache_creation_input_tokens (backends/anthropic/reply-in.ts).
  const written = Math.min(prompt - cached, count(details.cache_write_tokens))
  return {
    input_tokens: prompt - cached - written,
    output_tokens: count(u.completion_tokens),
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
  }
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0
}

/** A tool call's arguments as the object Anthropic's `input` is; text that is not an object is kept under `_raw`. */
export function toolInputOf(args: unknown): JsonObject {
  if (typeof args !== 'string' || args.trim() === '') return {}
  try {
    const parsed: unknown = JSON.parse(args)
    return isJsonObject(parsed) ? parsed : { _raw: args }
  } catch {
    return { _raw: args }
  }
}

/** The Message for a chat completion's first choice. */
export function messageOf(completion: unknown): JsonObject {
  const c = isJsonObject(completion) ? completion : {}
  const choice = Array.isArray(c.choices) && isJsonObject(c.choices[0]) ? c.choices[0] : {}
  const message = isJsonObject(choice.message) ? choice.message : {}
  const content: JsonObject[] = []
  // Extended thinking from an anthropic backend (backends/anthropic/reply-in.ts), whole and first, as Anthropic orders it.
  if (Array.isArray(message.thinking_blocks))
    for (const block of message.thinking_blocks)
      if (isJsonObject(block) && (block.type === 'thinking' || block.type === 'redacted_thinking')) content.push(block)
  const text = typeof message.content === 'string' ? message.content : ''
  const refusal = typeof message.refusal === 'string' ? message.refusal : ''
  if (text !== '' || refusal !== '') content.push({ type: 'text', text: text + refusal, citations: null })
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      if (!isJsonObject(call) || !isJsonObject(call.function)) continue
      content.push({
        type: 'tool_use',
        id: typeof call.id === 'string' ? call.id : '',
        name: typeof call.function.name === 'string' ? call.function.name : '',
        input: toolInputOf(call.function.arguments),
        caller: { type: 'direct' },
      })
    }
  }
  return {
    id: typeof c.id === 'string' ? c.id : '',
    type: 'message',
    role: 'assistant',
    model: typeof c.model === 'string' ? c.model : '',
    content,
    stop_reason: refusal !== '' ? 'refusal' : stopReasonOf(choice.finish_reason),
    stop_sequence: null,
    stop_details: null,
    container: null,
    diagnostics: null,
    usage: { ...usageOf(c.usage), cache_creation: null, server_tool_use: null, service_tier: 'standard' },
  }
}

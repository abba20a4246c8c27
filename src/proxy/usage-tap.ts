// Reading token usage out of OpenAI-shaped bodies and stream events, in both namings:
// prompt_tokens/completion_tokens (chat, completions, embeddings) and
// input_tokens/output_tokens (responses, images, audio). When a stream ends without its
// usage, the text it delivered is what gets counted.
// The prompt's cache parts are read from its details (prompt_tokens_details, or the
// Responses API's input_tokens_details): cached_tokens is what the upstream read from its
// cache (OpenAI's name), cache_write_tokens what it wrote to it (the Responses API's name,
// which the anthropic backend also puts on chat for Anthropic's cache_creation_input_tokens:
// backends/anthropic/reply-in.ts). Both are parts of the prompt: clamped so that they never
// add up to more than it.
import type { Usage } from '../backends/port.ts'
import { isJsonObject } from '../json.ts'

function tokens(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : undefined
}

/** The usage object's counts, or undefined when it has none (whisper reports seconds, not tokens). */
export function usageOf(usage: unknown): Usage | undefined {
  if (!isJsonObject(usage)) return undefined
  const input = tokens(usage.prompt_tokens) ?? tokens(usage.input_tokens)
  const output = tokens(usage.completion_tokens) ?? tokens(usage.output_tokens)
  if (input === undefined && output === undefined) return undefined
  const inputTokens = input ?? 0
  const details = isJsonObject(usage.prompt_tokens_details)
    ? usage.prompt_tokens_details
    : isJsonObject(usage.input_tokens_details)
      ? usage.input_tokens_details
      : undefined
  const read = Math.min(tokens(details?.cached_tokens) ?? 0, inputTokens)
  const write = Math.min(tokens(details?.cache_write_tokens) ?? 0, inputTokens - read)
  return {
    inputTokens,
    outputTokens: output ?? 0,
    ...(read > 0 ? { cacheReadTokens: read } : {}),
    ...(write > 0 ? { cacheWriteTokens: write } : {}),
  }
}

/** Usage of a whole JSON response body. */
export function bodyUsage(body: unknown): Usage | undefined {
  return isJsonObject(body) ? usageOf(body.usage) : undefined
}

/**
 * Whether a JSON body is one whose tokens can be counted when usage is missing: a
 * generation (its prompt and output), or a vector store search (its query, which was
 * embedded; OpenAI reports no usage for it).
 */
export function isGeneration(body: unknown): boolean {
  return (
    isJsonObject(body) &&
    (Array.isArray(body.choices) || body.object === 'response' || body.object === 'vector_store.search_results.page')
  )
}

function toolCallText(toolCalls: unknown): string {
  if (!Array.isArray(toolCalls)) return ''
  let text = ''
  for (const call of toolCalls) {
    if (isJsonObject(call) && isJsonObject(call.function) && typeof call.function.arguments === 'string')
      text += call.function.arguments
  }
  return text
}

function messageText(message: unknown): string {
  if (!isJsonObject(message)) return ''
  let text = ''
  for (const field of ['content', 'reasoning_content', 'reasoning', 'refusal']) {
    const value = message[field]
    if (typeof value === 'string') text += value
  }
  return text + toolCallText(message.tool_calls)
}

function choicesText(choices: unknown, key: 'delta' | 'message'): string {
  if (!Array.isArray(choices)) return ''
  let text = ''
  for (const choice of choices) {
    if (!isJsonObject(choice)) continue
    if (typeof choice.text === 'string') text += choice.text
    text += messageText(choice[key])
  }
  return text
}

/** Output text of a complete JSON body (chat, completions, responses). */
export function bodyText(body: unknown): string {
  if (!isJsonObject(body)) return ''
  let text = choicesText(body.choices, 'message')
  if (Array.isArray(body.output)) {
    for (const item of body.output) {
      if (!isJsonObject(item)) continue
      if (typeof item.arguments === 'string') text += item.arguments
      if (!Array.isArray(item.content)) continue
      for (const part of item.content) {
        if (isJsonObject(part) && typeof part.text === 'string') text += part.text
      }
    }
  }
  return text
}

/** What one stream event tells the tally. */
export interface EventReading {
  /** Usage carried by the event, if any. */
  readonly usage: Usage | undefined
  /** True for the chunk that only carries usage (chat/completions: `choices: []`). */
  readonly usageOnly: boolean
  /** Generated text the event delivered. */
  readonly text: string
  /** The event reports an error (`{"error": …}`, a Responses `error` event) and delivers nothing. */
  readonly error: boolean
}

export function readEvent(data: unknown): EventReading {
  if (!isJsonObject(data)) return { usage: undefined, usageOnly: false, text: '', error: false }
  // Responses API: typed events; the usage comes with the final response object.
  if (typeof data.type === 'string' && data.type.startsWith('response.')) {
    const usage = isJsonObject(data.response) ? usageOf(data.response.usage) : undefined
    // Audio deltas are base64, not text.
    const text =
      data.type.endsWith('.delta') && !data.type.endsWith('audio.delta') && typeof data.delta === 'string'
        ? data.delta
        : ''
    return { usage, usageOnly: false, text, error: false }
  }
  const usage = usageOf(data.usage)
  const usageOnly = usage !== undefined && (!Array.isArray(data.choices) || data.choices.length === 0)
  const error = (isJsonObject(data.error) || data.type === 'error') && !Array.isArray(data.choices)
  return { usage, usageOnly, text: choicesText(data.choices, 'delta'), error }
}

/** A chat or completions stream chunk: the shape a usage chunk of the gateway's own copies. */
export function isStreamChunk(data: unknown): data is Record<string, unknown> {
  return isJsonObject(data) && (data.object === 'chat.completion.chunk' || data.object === 'text_completion')
}

/**
 * The last chunk of a stream whose client asked for usage (stream_options.include_usage)
 * when the upstream sent none: OpenAI's usage chunk (no choices, CompletionUsage), with
 * the id, created, model and object of the stream's chunks and the gateway's own count.
 */
export function usageChunk(chunk: Record<string, unknown>, usage: Usage): Record<string, unknown> {
  const { id, object, created, model, system_fingerprint: fingerprint } = chunk
  return {
    id,
    object,
    created,
    model,
    ...(typeof fingerprint === 'string' ? { system_fingerprint: fingerprint } : {}),
    choices: [],
    usage: {
      prompt_tokens: usage.inputTokens,
      completion_tokens: usage.outputTokens,
      total_tokens: usage.inputTokens + usage.outputTokens,
    },
  }
}

/** Whether `body` has a `usage: null` field (withoutNullUsage drops it). */
export function hasNullUsage(body: unknown): body is Record<string, unknown> {
  return isJsonObject(body) && body.usage === null
}

/** `body` without a `usage: null` field; the same object when it has none. */
export function withoutNullUsage(body: unknown): unknown {
  if (!hasNullUsage(body)) return body
  const { usage: _dropped, ...rest } = body
  return rest
}

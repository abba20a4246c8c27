// Token counting with a real tokenizer (o200k_base, the encoding of current OpenAI
// models). Used to estimate a prompt before admission, by the mock backend to report
// usage, and to count what a stream delivered when it ended without a usage chunk.
import { countTokens as count } from 'gpt-tokenizer'

/** Per-message framing tokens of the chat format (role markers, separators). */
const TOKENS_PER_MESSAGE = 3
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMER = 3

export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : count(text)
}

/** Text carried by a message's content: a string, or an array of parts with text. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  let text = ''
  for (const part of content) {
    if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
      text += (part as { text: string }).text
    }
  }
  return text
}

/** Prompt tokens of a chat request, counted the way OpenAI bills them. */
export function countChatTokens(messages: readonly unknown[]): number {
  let total = REPLY_PRIMER
  for (const message of messages) {
    total += TOKENS_PER_MESSAGE
    if (!message || typeof message !== 'object') continue
    const m = message as Record<string, unknown>
    total += countTextTokens(contentText(m.content))
    if (typeof m.role === 'string') total += countTextTokens(m.role)
    if (typeof m.name === 'string') total += countTextTokens(m.name) + 1
  }
  return total
}

/** Tokens of an embeddings/completions `input`/`prompt`: a string or an array of strings. */
export function countInputTokens(input: unknown): number {
  if (typeof input === 'string') return countTextTokens(input)
  if (Array.isArray(input)) {
    let total = 0
    for (const item of input) {
      if (typeof item === 'string') total += countTextTokens(item)
      else if (Array.isArray(item)) total += item.length // already token ids
      else if (typeof item === 'number') total += 1
    }
    return total
  }
  return 0
}

// How many tokens a text is, two ways.
//
// estimate*: one linear pass over the text (estimate-text.ts). Admission reserves on it:
// a refused or pathological request costs no more than reading it.
//
// count*: the real tokenizer (o200k_base, the encoding of current OpenAI models), for
// where a true count is still needed: a stream the client cut off, an upstream that
// reports no usage, the mock backend's usage. It runs in a worker thread, in pieces that
// keep it linear, within a budget of characters past which the rest is estimated
// (token-count.ts, token-counter.ts), so it never holds the event loop.
import { estimateTextTokens } from './estimate-text.ts'
import type { Encoder } from './token-count.ts'
import { countTexts } from './token-counter.ts'

export { estimateTextTokens } from './estimate-text.ts'
export type { Encoder } from './token-count.ts'

/** Characters one count gives the tokenizer before it estimates the rest (about 250,000 tokens of prose). */
export const DEFAULT_COUNT_BUDGET_CHARS = 1_000_000

/** Per-message framing tokens of the chat format (role markers, separators). */
const TOKENS_PER_MESSAGE = 3
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMER = 3

let loading: Promise<Encoder> | undefined

/**
 * The tokenizer on this thread, for short text the gateway made itself (the mock backend's
 * replies). Loading it takes a few hundred milliseconds of this thread: do it at start.
 */
export function loadEncoder(): Promise<Encoder> {
  loading ??= import('gpt-tokenizer').then((m) => ({ count: (text: string) => (text.length === 0 ? 0 : m.countTokens(text)) }))
  return loading
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

interface Parts {
  readonly texts: string[]
  /** Tokens that are not in the texts: the chat format's framing, prompts given as token ids. */
  readonly framing: number
}

function chatParts(messages: readonly unknown[]): Parts {
  const texts: string[] = []
  let framing = REPLY_PRIMER
  for (const message of messages) {
    framing += TOKENS_PER_MESSAGE
    if (!message || typeof message !== 'object') continue
    const m = message as Record<string, unknown>
    texts.push(contentText(m.content))
    if (typeof m.role === 'string') texts.push(m.role)
    if (typeof m.name === 'string') {
      texts.push(m.name)
      framing += 1
    }
  }
  return { texts, framing }
}

function inputParts(input: unknown): Parts {
  if (typeof input === 'string') return { texts: [input], framing: 0 }
  const texts: string[] = []
  let framing = 0
  if (Array.isArray(input)) {
    for (const item of input) {
      if (typeof item === 'string') texts.push(item)
      else if (Array.isArray(item)) framing += item.length // already token ids
      else if (typeof item === 'number') framing += 1
    }
  }
  return { texts, framing }
}

function estimateParts(parts: Parts): number {
  let total = parts.framing
  for (const text of parts.texts) total += estimateTextTokens(text)
  return total
}

async function countParts(parts: Parts, budgetChars = DEFAULT_COUNT_BUDGET_CHARS): Promise<number> {
  return parts.framing + await countTexts(parts.texts, budgetChars)
}

/** Estimated prompt tokens of a chat request. */
export const estimateChatTokens = (messages: readonly unknown[]): number => estimateParts(chatParts(messages))
/** Estimated tokens of an embeddings/completions `input`/`prompt`. */
export const estimateInputTokens = (input: unknown): number => estimateParts(inputParts(input))

/** Tokens of a text, counted off the event loop. */
export const countTextTokens = (text: string, budgetChars?: number): Promise<number> => countParts({ texts: [text], framing: 0 }, budgetChars)
/** Prompt tokens of a chat request, counted the way OpenAI bills them. */
export const countChatTokens = (messages: readonly unknown[], budgetChars?: number): Promise<number> => countParts(chatParts(messages), budgetChars)
/** Tokens of an embeddings/completions `input`/`prompt`: a string or an array of strings. */
export const countInputTokens = (input: unknown, budgetChars?: number): Promise<number> => countParts(inputParts(input), budgetChars)

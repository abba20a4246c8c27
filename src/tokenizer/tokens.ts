// How many tokens a text is, two ways.
//
// estimate*: one linear pass over the text (estimate-text.ts). Admission reserves on it:
// a refused or pathological request costs no more than reading it.
//
// count*: the real tokenizer (o200k_base, the encoding of current OpenAI models), for
// where a true count is still needed: a stream the client cut off, an upstream that
// reports no usage, the mock backend's usage and replies. It runs in a worker thread, in
// pieces that keep it linear, within a budget of characters past which the rest is
// estimated (chunked-count.ts, counter.ts), so it never holds the event loop, and the
// gateway's own thread never loads the encoder (about 30 MB at rest).
import { estimateJsonTextTokens } from './estimate-json.ts'
import { estimateTextTokens } from './estimate-text.ts'
import type { Encoder } from './chunked-count.ts'
import { countTexts } from './counter.ts'

export { estimateTextTokens } from './estimate-text.ts'
export type { Encoder } from './chunked-count.ts'
export { countEach, countEachExact, fitPrefix } from './counter.ts'
export type { Prefix } from './prefix.ts'

/** Characters one count gives the tokenizer before it estimates the rest (about 250,000 tokens of prose). */
export const DEFAULT_COUNT_BUDGET_CHARS = 1_000_000

/** Per-message framing tokens of the chat format (role markers, separators). */
const TOKENS_PER_MESSAGE = 3
/** Tokens that prime the assistant's reply. */
const REPLY_PRIMER = 3

let loading: Promise<Encoder> | undefined

/**
 * The tokenizer on this thread, for tests and tools that check counts against it. The
 * gateway never loads it (a few hundred milliseconds of the thread that loads it, and
 * about 30 MB): its counts are the worker's (countEach, fitPrefix and the count* below).
 */
export function loadEncoder(): Promise<Encoder> {
  loading ??= import('gpt-tokenizer').then((m) => ({
    count: (text: string) => (text.length === 0 ? 0 : m.countTokens(text)),
  }))
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

/**
 * Fields of a chat completion request, besides its messages, that upstreams render into
 * the prompt and bill as input: tool and function definitions, the tool it must call, the
 * schema its answer must follow.
 */
export const CHAT_DEFINITION_FIELDS = ['tools', 'functions', 'tool_choice', 'function_call', 'response_format'] as const
/** The same for the Responses API, whose output schema is under `text.format`. */
export const RESPONSES_DEFINITION_FIELDS = ['tools', 'tool_choice', 'text'] as const

/**
 * A Responses API prompt as chat messages, the way it is counted: the instructions as a
 * developer message, then the input items as sent (a string input is one user message).
 */
export function responsesItems(input: unknown, instructions: unknown): unknown[] {
  const head = typeof instructions === 'string' ? [{ role: 'developer', content: instructions }] : []
  if (typeof input === 'string') return [...head, { role: 'user', content: input }]
  return Array.isArray(input) ? [...head, ...(input as unknown[])] : head
}

interface Parts {
  readonly texts: string[]
  /** JSON texts (tool calls, definitions): denser in tokens than prose, and estimated as such. */
  readonly json?: string[]
  /** Tokens that are not in the texts: the chat format's framing, prompts given as token ids. */
  readonly framing: number
}

const jsonOf = (value: unknown): string => JSON.stringify(value) ?? ''

function chatParts(messages: readonly unknown[]): Parts {
  const texts: string[] = []
  const json: string[] = []
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
    // Earlier tool calls and their results are prompt too: an assistant's tool_calls or
    // function_call (chat); a function_call item's arguments and a function_call_output
    // item's output (Responses API input).
    if (typeof m.tool_calls === 'object' && m.tool_calls !== null) json.push(jsonOf(m.tool_calls))
    if (typeof m.function_call === 'object' && m.function_call !== null) json.push(jsonOf(m.function_call))
    if (typeof m.arguments === 'string') json.push(m.arguments)
    if (m.output !== undefined) texts.push(contentText(m.output))
  }
  return { texts, json, framing }
}

/** The definitions in `fields` of a request body, as JSON; a plain string there ("auto") defines nothing. */
function definitionParts(body: Readonly<Record<string, unknown>>, fields: readonly string[]): Parts {
  const json: string[] = []
  for (const field of fields) {
    const value = body[field]
    if (typeof value === 'object' && value !== null) json.push(jsonOf(value))
  }
  return { texts: [], json, framing: 0 }
}

function inputParts(input: unknown): Parts {
  if (typeof input === 'string') return { texts: [input], framing: 0 }
  const texts: string[] = []
  let framing = 0
  if (Array.isArray(input)) {
    for (const item of input) {
      if (typeof item === 'string') texts.push(item)
      else if (Array.isArray(item))
        framing += item.length // already token ids
      else if (typeof item === 'number') framing += 1
    }
  }
  return { texts, framing }
}

function estimateParts(parts: Parts): number {
  let total = parts.framing
  for (const text of parts.texts) total += estimateTextTokens(text)
  for (const text of parts.json ?? []) total += estimateJsonTextTokens(text)
  return total
}

async function countParts(parts: Parts, budgetChars = DEFAULT_COUNT_BUDGET_CHARS): Promise<number> {
  return parts.framing + (await countTexts(parts.json ? [...parts.texts, ...parts.json] : parts.texts, budgetChars))
}

/** Estimated prompt tokens of a chat request. */
export const estimateChatTokens = (messages: readonly unknown[]): number => estimateParts(chatParts(messages))
/** Estimated tokens of an embeddings/completions `input`/`prompt`. */
export const estimateInputTokens = (input: unknown): number => estimateParts(inputParts(input))

/** Tokens of a text, counted off the event loop. */
export const countTextTokens = (text: string, budgetChars?: number): Promise<number> =>
  countParts({ texts: [text], framing: 0 }, budgetChars)
/** Prompt tokens of a chat request, counted the way OpenAI bills them. */
export const countChatTokens = (messages: readonly unknown[], budgetChars?: number): Promise<number> =>
  countParts(chatParts(messages), budgetChars)
/** Tokens of an embeddings/completions `input`/`prompt`: a string or an array of strings. */
export const countInputTokens = (input: unknown, budgetChars?: number): Promise<number> =>
  countParts(inputParts(input), budgetChars)
/** Tokens of the definitions (tools, schemas) in `fields` of a request body, counted off the event loop. */
export const countDefinitionTokens = (
  body: Readonly<Record<string, unknown>>,
  fields: readonly string[],
  budgetChars?: number,
): Promise<number> => countParts(definitionParts(body, fields), budgetChars)

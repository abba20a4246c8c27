// The JSON a reply carries: tool-call arguments and structured-output content. Unlike the
// mock's prose, which fills its token budget exactly, JSON has a natural end: it is
// whole unless the request's own token limit is smaller, in which case it is cut there,
// mid-value, as a real model's would be (and the reply says "length"/"incomplete").
import type { Encoder } from '../../tokenizer/tokens.ts'
import type { FunctionTool, OutputFormat } from './reply-plan.ts'
import { valueFor } from './schema-values.ts'
import { generateText, type GeneratedText } from './text.ts'

export interface FittedText extends GeneratedText {
  /** The limit cut it short. */
  readonly cut: boolean
}

export interface CallText {
  readonly name: string
  readonly arguments: FittedText
}

export interface ToolCallTexts {
  readonly calls: readonly CallText[]
  /** The limit ran out before the last call's arguments (or before later calls) were whole. */
  readonly cut: boolean
  readonly tokens: number
}

/** Arguments for each tool, valid against its parameters; `limit` is shared by all the calls. */
export function toolCallTexts(
  tools: readonly FunctionTool[],
  limit: number | undefined,
  encoder: Encoder,
): ToolCallTexts {
  const calls: CallText[] = []
  let used = 0
  for (const tool of tools) {
    const left = limit === undefined ? undefined : limit - used
    if (left !== undefined && left <= 0) return { calls, cut: true, tokens: used }
    const args = fitText(jsonText(valueFor(tool.parameters ?? { type: 'object', properties: {} })), left, encoder)
    calls.push({ name: tool.name, arguments: args })
    used += args.tokens
    if (args.cut) return { calls, cut: true, tokens: used }
  }
  return { calls, cut: false, tokens: used }
}

/**
 * The content for a JSON response format: a value of its schema, or for json_object an
 * object holding the prose reply the same prompt would get (`{"reply": "..."}`).
 */
export function jsonContent(
  format: Exclude<OutputFormat, { type: 'text' }>,
  seed: string,
  variant: number,
  proseTokens: number,
  limit: number | undefined,
  encoder: Encoder,
): FittedText {
  const value =
    format.type === 'json_schema'
      ? valueFor(format.schema)
      : { reply: generateText(seed, variant, proseTokens, encoder).text }
  return fitText(jsonText(value), limit, encoder)
}

/** JSON of a generated value; never undefined, whatever the schema gave. */
function jsonText(value: unknown): string {
  return JSON.stringify(value) ?? 'null'
}

/** The text whole if it fits `limit` tokens, else its longest prefix that does. */
export function fitText(whole: string, limit: number | undefined, encoder: Encoder): FittedText {
  const tokens = encoder.count(whole)
  if (limit === undefined || tokens <= limit) return { text: whole, pieces: piecesOf(whole), tokens, cut: false }
  // A prefix's count grows with its length (near enough for BPE): search for the longest that fits.
  let low = 0
  let high = whole.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (encoder.count(whole.slice(0, mid)) <= limit) low = mid
    else high = mid - 1
  }
  // Never end between the halves of a surrogate pair.
  if (low > 0 && /[\uD800-\uDBFF]/.test(whole.charAt(low - 1))) low -= 1
  const text = whole.slice(0, low)
  return { text, pieces: piecesOf(text), tokens: encoder.count(text), cut: true }
}

/** Stream pieces about a token long: a word or number with the space before it, or a run of punctuation. */
export function piecesOf(text: string): string[] {
  return text.match(/\s*[A-Za-z0-9]+|\s*[^A-Za-z0-9\s]+|\s+/g) ?? []
}

// The JSON a reply carries: tool-call arguments and structured-output content. Unlike the
// mock's prose, which fills its token budget exactly, JSON has a natural end: it is
// whole unless the request's own token limit is smaller, in which case it is cut there,
// mid-value, as a real model's would be (and the reply says "length"/"incomplete").
import { fitPrefix } from '../../tokenizer/tokens.ts'
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
export async function toolCallTexts(tools: readonly FunctionTool[], limit: number | undefined): Promise<ToolCallTexts> {
  const calls: CallText[] = []
  let used = 0
  for (const tool of tools) {
    const left = limit === undefined ? undefined : limit - used
    if (left !== undefined && left <= 0) return { calls, cut: true, tokens: used }
    const args = await fitText(jsonText(valueFor(tool.parameters ?? { type: 'object', properties: {} })), left)
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
export async function jsonContent(
  format: Exclude<OutputFormat, { type: 'text' }>,
  seed: string,
  variant: number,
  proseTokens: number,
  limit: number | undefined,
): Promise<FittedText> {
  const value =
    format.type === 'json_schema'
      ? valueFor(format.schema)
      : { reply: (await generateText(seed, variant, proseTokens)).text }
  return fitText(jsonText(value), limit)
}

/** JSON of a generated value; never undefined, whatever the schema gave. */
function jsonText(value: unknown): string {
  return JSON.stringify(value) ?? 'null'
}

/** The text whole if it fits `limit` tokens, else its longest prefix that does (counted by the tokenizer's worker). */
export async function fitText(whole: string, limit: number | undefined): Promise<FittedText> {
  const prefix = await fitPrefix(whole, limit ?? Number.MAX_SAFE_INTEGER)
  const text = prefix.length === whole.length ? whole : whole.slice(0, prefix.length)
  return { text, pieces: piecesOf(text), tokens: prefix.tokens, cut: text !== whole }
}

/** Stream pieces about a token long: a word or number with the space before it, or a run of punctuation. */
export function piecesOf(text: string): string[] {
  return text.match(/\s*[A-Za-z0-9]+|\s*[^A-Za-z0-9\s]+|\s+/g) ?? []
}

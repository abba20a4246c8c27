// What a call is reserved at admission, and what its prompt really was.
//
// The reservation is a linear estimate of the prompt (never the tokenizer: a refused or
// pathological request must cost no more than reading it), capped by the model's
// context, plus the completion tokens the request may produce: its max_tokens, or when it
// sets none what the tier's outputCap says, either a cap the gateway sends upstream with the
// call (defaultMaxTokens, within the model's max_output_length) or the model's own ceiling.
// Either way the upstream cannot write more than the call holds, so a budget or an
// output_tpm is never overrun by a call that named no cap. The settle step corrects the
// reservation to the usage the upstream reports.
//
// The prompt is more than the messages: upstreams render tool and function definitions
// and output schemas into it and bill them as input, and a request may carry text in any
// field the gateway does not know (an upstream's own extension may bill it too). So the
// estimate adds every other text-bearing field of the body, by the JSON weights of
// estimate-json.ts: all of it but `model` and the plain settings (numbers, booleans,
// null), which no upstream renders as text. That over-reserves for a field the upstream
// does not bill (`metadata`, `user`, a `prediction`, which OpenAI bills as output when it
// is not used): a few tokens on an ordinary call, handed back at settle. Leaving any
// field out instead let 30 concurrent calls, each "hi" and 47 KB of tools, all be admitted
// against an input_tpm of 20,000 and use 12 times it.
//
// countPromptTokens is the true count, for the rare call whose upstream reports no
// usage (a stream the client cut off); it is bounded and yields the event loop. It counts
// what upstreams do bill: the messages and the definitions (tools, schemas).
import type { Usage } from '../backends/port.ts'
import type { Endpoint, OutputCapMode } from '../config/schema.ts'
import { estimateJsonTokens } from '../tokenizer/estimate-json.ts'
import {
  CHAT_DEFINITION_FIELDS,
  RESPONSES_DEFINITION_FIELDS,
  countChatTokens,
  countDefinitionTokens,
  countInputTokens,
  countTextTokens,
  estimateChatTokens,
  estimateInputTokens,
  estimateTextTokens,
  responsesItems,
} from '../tokenizer/tokens.ts'

const positiveInt = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined

type Body = Readonly<Record<string, unknown>>

interface PromptCounter {
  chat(messages: readonly unknown[]): number | Promise<number>
  input(input: unknown): number | Promise<number>
  text(text: string): number | Promise<number>
  /** The rest of the body, besides the `prompt` fields already counted. */
  rest(body: Body, prompt: readonly string[], definitions: readonly string[]): number | Promise<number>
}

/** Fields that are not prompt text: the model's name and the gateway's own stream settings; plain settings (numbers, booleans) are left out by type. */
const NOT_TEXT = new Set(['model', 'stream_options'])

/** Every other field that can hold text, as JSON. */
function estimateRest(body: Body, prompt: readonly string[]): number {
  let tokens = 0
  for (const field in body) {
    if (NOT_TEXT.has(field) || prompt.includes(field)) continue
    const value = body[field]
    if (typeof value === 'string' || (typeof value === 'object' && value !== null)) tokens += estimateJsonTokens(value)
  }
  return tokens
}

const ESTIMATE: PromptCounter = {
  chat: estimateChatTokens,
  input: estimateInputTokens,
  text: estimateTextTokens,
  rest: (body, prompt) => estimateRest(body, prompt),
}
const COUNT: PromptCounter = {
  chat: (m) => countChatTokens(m),
  input: (i) => countInputTokens(i),
  text: (t) => countTextTokens(t),
  rest: (body, _prompt, definitions) => (definitions.length === 0 ? 0 : countDefinitionTokens(body, definitions)),
}

/** The sum of counts some of which may still be coming. */
function sum(counts: ReadonlyArray<number | Promise<number>>): number | Promise<number> {
  if (counts.every((c) => typeof c === 'number')) return counts.reduce((a, b) => a + b, 0)
  return Promise.all(counts).then((all) => all.reduce((a, b) => a + b, 0))
}

/** The prompt of a call, the way `counter` counts it; 0 where the endpoint has none. */
function promptOf(endpoint: Endpoint, body: Body, counter: PromptCounter): number | Promise<number> {
  switch (endpoint) {
    case 'chat.completions':
      return sum([
        counter.chat(Array.isArray(body.messages) ? body.messages : []),
        counter.rest(body, ['messages'], CHAT_DEFINITION_FIELDS),
      ])
    case 'completions':
      return sum([counter.input(body.prompt), counter.rest(body, ['prompt'], [])])
    case 'responses':
      return sum([
        counter.chat(responsesItems(body.input, body.instructions)),
        counter.rest(body, ['input', 'instructions'], RESPONSES_DEFINITION_FIELDS),
      ])
    case 'embeddings':
      return sum([counter.input(body.input), counter.rest(body, ['input'], [])])
    case 'images.generations':
      return typeof body.prompt === 'string' ? counter.text(body.prompt) : 0
    // The query is embedded: its tokens are the search's.
    case 'vector_stores.search':
      return counter.input(body.query)
    default:
      return 0
  }
}

/** The request's own cap on completion tokens, per choice; undefined where it sets none. */
function maxTokensOf(endpoint: Endpoint, body: Record<string, unknown>): number | undefined {
  switch (endpoint) {
    case 'chat.completions': {
      // Servers differ on which of the two wins when both are set: reserve the larger.
      const mct = positiveInt(body.max_completion_tokens)
      const mt = positiveInt(body.max_tokens)
      return mct === undefined ? mt : mt === undefined ? mct : Math.max(mct, mt)
    }
    case 'completions':
      return positiveInt(body.max_tokens)
    case 'responses':
      return positiveInt(body.max_output_tokens)
    default:
      return undefined
  }
}

/**
 * Prompts in one legacy completions call: a string or one list of token ids is one; a
 * list of strings or of token lists is a batch, and each of its prompts gets its own
 * completions.
 */
function promptCount(prompt: unknown): number {
  if (!Array.isArray(prompt) || prompt.length === 0) return 1
  return prompt.every((item) => typeof item === 'number') ? 1 : prompt.length
}

/** Choices generated: n of them, or best_of when that is more (they are all billed), for each prompt of a batch. */
function choicesOf(endpoint: Endpoint, body: Record<string, unknown>): number {
  const n = endpoint === 'responses' ? 1 : (positiveInt(body.n) ?? 1)
  return endpoint === 'completions' ? Math.max(n, positiveInt(body.best_of) ?? 1) * promptCount(body.prompt) : n
}

const GENERATES = new Set<Endpoint>(['chat.completions', 'completions', 'responses'])
/** Endpoints whose cost is their prompt alone. Attaching files to a vector store costs tokens too, but only the backend can tell how many. */
const PROMPT_ONLY = new Set<Endpoint>(['embeddings', 'images.generations', 'vector_stores.search'])

export interface EstimateOptions {
  readonly defaultMaxTokens: number
  /** The model's context window, when configured: no prompt is larger. */
  readonly contextTokens?: number | undefined
  /** The tier's choice for a call that names no output cap (OutputCapMode); unset: 'send'. */
  readonly outputCap?: OutputCapMode | undefined
  /** The model's own most output tokens per reply (meta.max_output_length), when known. */
  readonly outputCeiling?: number | undefined
}

export interface Estimate extends Usage {
  /** The request set no max_tokens: its output reservation is the gateway's, not its own. */
  readonly outputDefaulted: boolean
  /**
   * The cap per reply the gateway sends upstream for a request that set none (outputCap
   * `send`): outputTokens is exactly this times the replies, so the upstream cannot write
   * more than the call holds. Unset where the request set its own cap, or the tier holds
   * the model's ceiling instead.
   */
  readonly sentCap?: number
  /** Replies the output reservation covers (n, best_of, a batch's prompts); set where the request named no cap. */
  readonly replies?: number
}

export function estimateUsage(
  endpoint: Endpoint,
  body: Record<string, unknown> | null,
  options: EstimateOptions,
): Estimate {
  if (body === null || (!GENERATES.has(endpoint) && !PROMPT_ONLY.has(endpoint))) {
    return { inputTokens: 0, outputTokens: 0, outputDefaulted: false }
  }
  const estimated = promptOf(endpoint, body, ESTIMATE) as number
  const inputTokens = options.contextTokens === undefined ? estimated : Math.min(estimated, options.contextTokens)
  if (!GENERATES.has(endpoint)) return { inputTokens, outputTokens: 0, outputDefaulted: false }
  const replies = choicesOf(endpoint, body)
  const max = maxTokensOf(endpoint, body)
  if (max !== undefined) return { inputTokens, outputTokens: max * replies, outputDefaulted: false }
  const ceiling = options.outputCeiling
  // Holding the ceiling needs one: a model without a known ceiling gets a cap sent instead.
  if (options.outputCap === 'ceiling' && ceiling !== undefined) {
    return { inputTokens, outputTokens: ceiling * replies, outputDefaulted: true, replies }
  }
  const sentCap = ceiling === undefined ? options.defaultMaxTokens : Math.min(options.defaultMaxTokens, ceiling)
  return { inputTokens, outputTokens: sentCap * replies, outputDefaulted: true, sentCap, replies }
}

/** The prompt's tokens by the tokenizer (bounded; past its budget the rest is estimated). */
export async function countPromptTokens(endpoint: Endpoint, body: Record<string, unknown> | null): Promise<number> {
  return body === null ? 0 : promptOf(endpoint, body, COUNT)
}

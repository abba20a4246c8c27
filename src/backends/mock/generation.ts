// What every text endpoint (chat, legacy completions, responses) reads before it writes:
// how many replies, how long, streamed or not, and whether to report usage in the stream.
import { invalidRequest } from './errors.ts'
import { optionalBoolean, optionalInteger, optionalObject } from './params.ts'

/** Far beyond any reply a test wants, and small enough that nobody can ask for gigabytes. */
export const MAX_COMPLETION_TOKENS = 65_536
const MAX_CHOICES = 128
/** Replies are generated synchronously; this bounds how long one request can hold the event loop (~0.3 s). */
export const MAX_TOKENS_PER_REQUEST = 262_144

export type FinishReason = 'stop' | 'length'

export interface Generation {
  readonly n: number
  /** Tokens per reply. */
  readonly budget: number
  /** The request's own limit, if it set one: JSON replies (tool calls, structured output) are cut only by it. */
  readonly limit: number | undefined
  /**
   * "length" when the request's own limit set the budget (the reply was cut by it);
   * "stop" when the mock chose the length: the reply ends on its last whole sentence within it.
   */
  readonly finishReason: FinishReason
  readonly stream: boolean
  /** stream_options.include_usage: a final usage chunk, and `usage: null` on the others. */
  readonly includeUsage: boolean
}

export interface GenerationParams {
  /** Limit parameters in order of precedence, e.g. max_completion_tokens before max_tokens. */
  readonly limits: readonly string[]
  readonly allowN: boolean
}

export function readGeneration(
  body: Readonly<Record<string, unknown>>,
  params: GenerationParams,
  defaultTokens: number,
): Generation {
  let limit: number | undefined
  for (const name of params.limits) {
    limit ??= optionalInteger(body, name, { min: 1, max: MAX_COMPLETION_TOKENS })
  }
  const n = params.allowN ? (optionalInteger(body, 'n', { min: 1, max: MAX_CHOICES }) ?? 1) : 1
  const stream = optionalBoolean(body, 'stream') ?? false
  const streamOptions = optionalObject(body, 'stream_options')
  if (streamOptions !== undefined && !stream) {
    // OpenAI refuses this combination; a mock that accepted it would hide a client bug.
    throw invalidRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options')
  }
  const includeUsage = streamOptions === undefined ? false : (optionalBoolean(streamOptions, 'include_usage') ?? false)
  const budget = limit ?? defaultTokens
  checkTotal(n, budget)
  return {
    n,
    budget,
    limit,
    finishReason: limit === undefined ? 'stop' : 'length',
    stream,
    includeUsage,
  }
}

/** Refuses a request whose replies would hold more than MAX_TOKENS_PER_REQUEST tokens. */
export function checkTotal(replies: number, budget: number): void {
  if (replies * budget > MAX_TOKENS_PER_REQUEST) {
    throw invalidRequest(
      `The mock backend generates at most ${MAX_TOKENS_PER_REQUEST} tokens per request (replies times the token limit).`,
      'n',
    )
  }
}

/**
 * The pieces of n replies interleaved step by step, as OpenAI streams `n` choices: one
 * paced frame per step, so the choices advance together at the configured rate.
 */
export function* interleave<P, T>(
  replies: readonly { readonly pieces: readonly P[] }[],
  frame: (index: number, piece: P, paced: boolean) => T,
): Generator<T> {
  const longest = Math.max(...replies.map((r) => r.pieces.length))
  for (let step = 0; step < longest; step++) {
    let paced = true
    for (const [i, reply] of replies.entries()) {
      const piece = reply.pieces[step]
      if (piece === undefined) continue
      yield frame(i, piece, paced)
      paced = false
    }
  }
}

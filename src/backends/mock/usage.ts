// Usage objects in OpenAI's shapes. The numbers come from src/tokenizer/tokens.ts, the same
// tokenizer the gateway estimates with, so a mock-backed gateway reconciles to the token.

export interface CompletionUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details: {
    readonly cached_tokens: number
    readonly audio_tokens: number
    /** Written to the prompt cache: Tollgate's field, as the anthropic backend reports it (prompt-cache.ts). */
    readonly cache_write_tokens?: number
  }
  readonly completion_tokens_details: {
    readonly reasoning_tokens: number
    readonly audio_tokens: number
    readonly accepted_prediction_tokens: number
    readonly rejected_prediction_tokens: number
  }
}

/** Chat and legacy completions: every choice's tokens count as completion tokens, its thinking (reasoning) included. */
export function completionUsage(
  promptTokens: number,
  choices: readonly { readonly tokens: number }[],
  reasoningTokens = 0,
  cache: { readonly read: number; readonly write: number } = { read: 0, write: 0 },
): CompletionUsage {
  const completionTokens = choices.reduce((sum, choice) => sum + choice.tokens, 0)
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: {
      cached_tokens: cache.read,
      audio_tokens: 0,
      ...(cache.write > 0 ? { cache_write_tokens: cache.write } : {}),
    },
    completion_tokens_details: {
      reasoning_tokens: reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  }
}

/** The Responses API. */
export function responseUsage(inputTokens: number, outputTokens: number): Record<string, unknown> {
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  }
}

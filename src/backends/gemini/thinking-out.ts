// OpenAI's reasoning effort (chat's reasoning_effort; the Responses API's reasoning.effort
// arrives as it) as Gemini's generationConfig.thinkingConfig (ai.google.dev/api/generate-content
// #ThinkingConfig, ai.google.dev/gemini-api/docs/thinking). Gemini 3 and later take a
// thinkingLevel, whose enum has OpenAI's own words (sent as the enum's names, as Google's
// @google/genai client sends them); Gemini 2.5 a thinkingBudget in tokens, which
// this gives as Google's own OpenAI layer does (ai.google.dev/gemini-api/docs/openai): 1024,
// 8192 and 24576 tokens, none for 'none'. The two cannot be sent together (Gemini answers 400).
// includeThoughts asks for the thought summaries, which come back as reasoning_content.
import { gatewayError } from '../../errors.ts'
import type { JsonObject } from '../../json.ts'

/** Thinking budgets (tokens) per effort, for the models that take a budget (Gemini 2.5). */
const BUDGET: Readonly<Record<string, number>> = { none: 0, minimal: 1024, low: 1024, medium: 8192, high: 24576 }

/**
 * The thinking levels per effort, for Gemini 3 and later. None of them turns thinking off;
 * MINIMAL is Google's "matches no thinking for most queries", the nearest to 'none'.
 */
const LEVEL: Readonly<Record<string, string>> = {
  none: 'MINIMAL',
  minimal: 'MINIMAL',
  low: 'LOW',
  medium: 'MEDIUM',
  high: 'HIGH',
}

/** Gemini's generation in a model's name (gemini-2.5-flash, models/gemini-3-pro-preview), if it says one. */
const GENERATION = /(?:^|\/)gemini-(\d+)/

/** Whether a model takes a thinking level rather than a budget: Gemini 3 and later. */
export const takesThinkingLevel = (model: string): boolean => Number(GENERATION.exec(model)?.[1] ?? 0) >= 3

/**
 * The thinkingConfig for a reasoning_effort on `model` under a reply cap of `maxOutputTokens`,
 * or undefined when none was asked. Gemini counts thoughts within maxOutputTokens: a budget is
 * held below the cap (as the anthropic backend holds its own), or the thinking could spend
 * the whole reply and leave no answer.
 */
export function thinkingConfigOf(effort: unknown, model: string, maxOutputTokens?: unknown): JsonObject | undefined {
  if (effort === undefined || effort === null) return undefined
  const known = typeof effort === 'string' && Object.hasOwn(BUDGET, effort)
  if (!known)
    throw gatewayError('invalid_body', {
      message: "reasoning_effort: Input should be 'none', 'minimal', 'low', 'medium' or 'high'",
      param: 'reasoning_effort',
    })
  // Asked not to think, there are no thoughts to include.
  const includeThoughts = effort !== 'none'
  return takesThinkingLevel(model)
    ? { thinkingLevel: LEVEL[effort] ?? 'HIGH', includeThoughts }
    : { thinkingBudget: budgetUnder(BUDGET[effort] ?? 0, maxOutputTokens), includeThoughts }
}

function budgetUnder(budget: number, cap: unknown): number {
  return typeof cap === 'number' ? Math.max(0, Math.min(budget, cap - 1)) : budget
}

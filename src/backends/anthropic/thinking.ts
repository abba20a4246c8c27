// OpenAI's reasoning effort (chat's reasoning_effort, the Responses API's reasoning.effort)
// as Anthropic's extended thinking: a budget of thinking tokens per effort, which Anthropic
// requires to be at least 1024 and below the reply's max_tokens. A cap too small for the
// least budget is refused, naming the effort, rather than sent to fail upstream.
import { gatewayError } from '../../errors.ts'
import type { JsonObject } from '../../json.ts'

/** Thinking budgets (tokens) per effort. */
const BUDGET: Readonly<Record<string, number>> = { minimal: 1024, low: 1024, medium: 4096, high: 16384 }
/** The least budget Anthropic takes. */
export const LEAST_THINKING_BUDGET = 1024

/**
 * The `thinking` for an effort under a reply cap of `maxTokens`, or undefined for no
 * thinking ('none'); `param` names the member the caller set, for a refusal.
 */
export function thinkingOfEffort(effort: unknown, maxTokens: unknown, param: string): JsonObject | undefined {
  if (effort === undefined || effort === null || effort === 'none') return undefined
  const wanted = typeof effort === 'string' ? BUDGET[effort] : undefined
  if (wanted === undefined)
    throw gatewayError('invalid_body', {
      message: `${param}: Input should be 'none', 'minimal', 'low', 'medium' or 'high'`,
      param,
    })
  const cap = typeof maxTokens === 'number' ? maxTokens : undefined
  const budget = cap === undefined ? wanted : Math.min(wanted, cap - 1)
  if (budget < LEAST_THINKING_BUDGET)
    throw gatewayError('untranslatable_feature', {
      message: `${param} is not supported by this model's upstream under this cap: Anthropic's thinking takes at least ${LEAST_THINKING_BUDGET} tokens and must stay below max_tokens (${String(cap)}).`,
      param,
    })
  return { type: 'enabled', budget_tokens: budget }
}

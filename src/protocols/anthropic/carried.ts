// What an Anthropic caller asked that chat completions has no member for, carried to an
// anthropic backend as Anthropic has it: output_config.effort (chat's reasoning_effort
// says low and medium, but an anthropic backend reads that as a thinking budget, which is
// what an OpenAI caller means by it) and context_management (Anthropic's server-side
// trimming of a long context). It travels in one private member of the internal chat body,
// set only by request-in.ts, read only by the anthropic backend (request-out.ts), taken
// off for every other backend (inference/upstream-request.ts) and refused from any caller
// who sends it (inference/intake.ts). Plain JSON, so a queued call keeps it.
import { isJsonObject, type JsonObject } from '../../json.ts'

/** The private member's name. */
export const ANTHROPIC_CARRIED = 'tollgate_anthropic'

export interface AnthropicCarried {
  /** output_config.effort as the caller sent it. */
  readonly effort?: string
  /** context_management as the caller sent it. */
  readonly context_management?: JsonObject
}

/** The carried members of a chat body, or undefined when it carries none. */
export function anthropicCarriedOf(chat: JsonObject): AnthropicCarried | undefined {
  const value = chat[ANTHROPIC_CARRIED]
  if (!isJsonObject(value)) return undefined
  const { effort, context_management: context } = value
  return {
    ...(typeof effort === 'string' ? { effort } : {}),
    ...(isJsonObject(context) ? { context_management: context } : {}),
  }
}

/** The chat body without the private member (the body itself when it has none). */
export function withoutAnthropicCarried(chat: JsonObject): JsonObject {
  if (!(ANTHROPIC_CARRIED in chat)) return chat
  const { [ANTHROPIC_CARRIED]: _carried, ...rest } = chat
  return rest
}

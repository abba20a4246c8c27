// The one choice of a chat completion translated from a provider's whole reply (the anthropic
// and bedrock adapters): text, the thinking that preceded it, and the tool calls it made.
import type { JsonObject } from '../json.ts'

export interface AssistantTurn {
  readonly text: string
  /** The thinking's text, shown as `reasoning_content`. */
  readonly reasoning: string
  /** The thinking blocks whole (signatures included), sent back by a caller on its next turn. */
  readonly thoughts: readonly JsonObject[]
  readonly calls: readonly JsonObject[]
}

export function assistantChoice(turn: AssistantTurn, finishReason: string | null): JsonObject {
  const { text, reasoning, thoughts, calls } = turn
  return {
    index: 0,
    message: {
      role: 'assistant',
      content: text === '' && calls.length > 0 ? null : text,
      ...(reasoning === '' ? {} : { reasoning_content: reasoning }),
      ...(thoughts.length === 0 ? {} : { thinking_blocks: [...thoughts] }),
      ...(calls.length === 0 ? {} : { tool_calls: [...calls] }),
      refusal: null,
    },
    logprobs: null,
    finish_reason: finishReason,
  }
}

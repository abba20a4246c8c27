// The admission estimate: prompt tokens counted with the tokenizer, plus the completion
// tokens the request may produce (its max_tokens, or the configured default).
import type { Usage } from '../backends/port.ts'
import type { Endpoint } from '../config/schema.ts'
import { countChatTokens, countInputTokens, countTextTokens } from './tokens.ts'

const positiveInt = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined

export function estimateUsage(endpoint: Endpoint, body: Record<string, unknown> | null, defaultMaxTokens: number): Usage {
  if (body === null) return { inputTokens: 0, outputTokens: 0 }
  const choices = positiveInt(body.n) ?? 1
  switch (endpoint) {
    case 'chat.completions': {
      const messages = Array.isArray(body.messages) ? body.messages : []
      const max = positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens) ?? defaultMaxTokens
      return { inputTokens: countChatTokens(messages), outputTokens: max * choices }
    }
    case 'completions': {
      const max = positiveInt(body.max_tokens) ?? defaultMaxTokens
      return { inputTokens: countInputTokens(body.prompt), outputTokens: max * choices }
    }
    case 'responses': {
      const input = typeof body.input === 'string' ? countTextTokens(body.input) : Array.isArray(body.input) ? countChatTokens(body.input) : 0
      const instructions = typeof body.instructions === 'string' ? countTextTokens(body.instructions) : 0
      return { inputTokens: input + instructions, outputTokens: positiveInt(body.max_output_tokens) ?? defaultMaxTokens }
    }
    case 'embeddings':
      return { inputTokens: countInputTokens(body.input), outputTokens: 0 }
    case 'images.generations':
      return { inputTokens: typeof body.prompt === 'string' ? countTextTokens(body.prompt) : 0, outputTokens: 0 }
    default:
      return { inputTokens: 0, outputTokens: 0 }
  }
}

// POST /chat/completions: a chat.completion, or chat.completion.chunk events.
import { CHAT_DEFINITION_FIELDS, countChatTokens, countDefinitionTokens, loadEncoder } from '../../limits/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { interleave, readGeneration, type FinishReason } from './generation.ts'
import { SYSTEM_FINGERPRINT, newId, unixSeconds } from './ids.ts'
import { jsonBody, modelOf } from './params.ts'
import { jsonResponse } from './reply.ts'
import { DONE_FRAME, dataFrame, type Frame } from './sse.ts'
import { generateText, seedOfMessages, type GeneratedText } from './text.ts'
import { completionUsage, type CompletionUsage } from './usage.ts'

export async function chatCompletions(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const messages = body.messages
  if (messages === undefined || messages === null) throw missingParameter('messages')
  if (!Array.isArray(messages)) throw invalidRequest("Invalid type for 'messages': expected an array.", 'messages', 'invalid_type')
  if (messages.length === 0) throw invalidRequest("Invalid 'messages': empty array. Expected an array with minimum length 1.", 'messages', 'empty_array')
  const model = modelOf(body, request)
  const generation = readGeneration(body, { limits: ['max_completion_tokens', 'max_tokens'], allowN: true }, ctx.config.defaultCompletionTokens)

  const seed = seedOfMessages(messages)
  const encoder = await loadEncoder()
  const replies = Array.from({ length: generation.n }, (_, i) => generateText(seed, i, generation.budget, encoder))
  // Tool definitions and the output schema are rendered into the prompt, and billed as input.
  const [messageTokens, definitionTokens] = await Promise.all([countChatTokens(messages), countDefinitionTokens(body, CHAT_DEFINITION_FIELDS)])
  const usage = completionUsage(messageTokens + definitionTokens, replies.reduce((sum, r) => sum + r.tokens, 0))
  const head = { id: newId('chatcmpl-'), created: unixSeconds(ctx.now()), model, system_fingerprint: SYSTEM_FINGERPRINT }

  if (!generation.stream) {
    return jsonResponse(200, {
      ...head,
      object: 'chat.completion',
      choices: replies.map((reply, index) => ({
        index,
        message: { role: 'assistant', content: reply.text, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: generation.finishReason,
      })),
      usage,
      service_tier: 'default',
    })
  }
  return ctx.stream(chunks(head, replies, generation.finishReason, generation.includeUsage ? usage : undefined), request.signal)
}

/** One choice per chunk, as OpenAI sends them; the choices' pieces interleave. */
function* chunks(head: Record<string, unknown>, replies: readonly GeneratedText[], finish: FinishReason, usage: CompletionUsage | undefined): Generator<Frame> {
  const base = { ...head, object: 'chat.completion.chunk', service_tier: 'default' }
  // With include_usage every chunk carries the field, null until the last.
  const chunk = (index: number, delta: Record<string, unknown>, finishReason: FinishReason | null, paced = false): Frame =>
    dataFrame({ ...base, choices: [{ index, delta, logprobs: null, finish_reason: finishReason }], ...(usage ? { usage: null } : {}) }, paced)

  for (let i = 0; i < replies.length; i++) yield chunk(i, { role: 'assistant', content: '', refusal: null }, null)
  yield* interleave(replies, (i, piece, paced) => chunk(i, { content: piece }, null, paced))
  for (let i = 0; i < replies.length; i++) yield chunk(i, {}, finish)
  if (usage) yield dataFrame({ ...base, choices: [], usage })
  yield DONE_FRAME
}

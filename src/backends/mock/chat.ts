// POST /chat/completions: a chat.completion, or chat.completion.chunk events. What the
// reply holds (text, JSON for a response format, tool calls) is decided in reply-plan.ts;
// extended thinking, asked for with `thinking` as the gateway carries Anthropic's, in
// thinking.ts.
import { CHAT_DEFINITION_FIELDS, countChatTokens, countDefinitionTokens } from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import { chatReplies, type ChatFinishReason, type ChatReply } from './chat-reply.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { interleave, readGeneration } from './generation.ts'
import { SYSTEM_FINGERPRINT, newId, unixSeconds } from './ids.ts'
import { jsonBody, modelOf } from './params.ts'
import { jsonResponse } from './reply.ts'
import { planReply } from './reply-plan.ts'
import { chatToolRequest } from './request-tools.ts'
import { DONE_FRAME, dataFrame, type Frame } from './sse.ts'
import { seedOfMessages } from './text.ts'
import { afterThought, checkThinkingBlocks, readThinking, think, withThought } from './thinking.ts'
import { completionUsage, type CompletionUsage } from './usage.ts'

export async function chatCompletions(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const messages = body.messages
  if (messages === undefined || messages === null) throw missingParameter('messages')
  if (!Array.isArray(messages))
    throw invalidRequest("Invalid type for 'messages': expected an array.", 'messages', 'invalid_type')
  if (messages.length === 0)
    throw invalidRequest(
      "Invalid 'messages': empty array. Expected an array with minimum length 1.",
      'messages',
      'empty_array',
    )
  const model = modelOf(body, request)
  const generation = readGeneration(
    body,
    { limits: ['max_completion_tokens', 'max_tokens'], allowN: true },
    ctx.config.defaultCompletionTokens,
  )
  const thinking = readThinking(body, generation.limit)
  checkThinkingBlocks(messages, thinking)
  const tooling = chatToolRequest(body, messages)
  const plan = planReply(tooling, tooling.choiceParam)

  const seed = seedOfMessages(messages)
  const proseTokens = ctx.config.defaultCompletionTokens
  const thought = thinking === undefined ? undefined : await think(seed, thinking, generation, proseTokens)
  const answers = await chatReplies(
    {
      plan,
      legacy: tooling.legacy,
      seed,
      generation: thought === undefined ? generation : afterThought(generation, thought),
      proseTokens,
    },
    generation.n,
  )
  const replies = thought === undefined ? answers : answers.map((reply) => withThought(reply, thought))
  // Tool definitions and the output schema are rendered into the prompt, and billed as input.
  const [messageTokens, definitionTokens] = await Promise.all([
    countChatTokens(messages),
    countDefinitionTokens(body, CHAT_DEFINITION_FIELDS),
  ])
  const promptTokens = messageTokens + definitionTokens
  const usage = completionUsage(
    promptTokens,
    replies,
    (thought?.tokens ?? 0) * replies.length,
    await ctx.promptCache.use(body.prompt_cache_key, messages, promptTokens),
  )
  const head = {
    id: newId('chatcmpl-'),
    created: unixSeconds(ctx.now()),
    model,
    system_fingerprint: SYSTEM_FINGERPRINT,
  }

  if (!generation.stream) {
    return jsonResponse(200, {
      ...head,
      object: 'chat.completion',
      choices: replies.map((reply, index) => ({
        index,
        message: reply.message,
        logprobs: null,
        finish_reason: reply.finishReason,
      })),
      usage,
      service_tier: 'default',
    })
  }
  return ctx.stream(chunks(head, replies, generation.includeUsage ? usage : undefined), request.signal)
}

/** One choice per chunk, as OpenAI sends them; the choices' pieces interleave. */
function* chunks(
  head: Record<string, unknown>,
  replies: readonly ChatReply[],
  usage: CompletionUsage | undefined,
): Generator<Frame> {
  const base = { ...head, object: 'chat.completion.chunk', service_tier: 'default' }
  // With include_usage every chunk carries the field, null until the last.
  const chunk = (
    index: number,
    delta: Record<string, unknown>,
    finishReason: ChatFinishReason | null,
    paced = false,
  ): Frame =>
    dataFrame(
      {
        ...base,
        choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
        ...(usage ? { usage: null } : {}),
      },
      paced,
    )

  for (const [i, reply] of replies.entries()) yield chunk(i, reply.opening, null)
  yield* interleave(replies, (i, delta, paced) => chunk(i, delta, null, paced))
  for (const [i, reply] of replies.entries()) yield chunk(i, {}, reply.finishReason)
  if (usage) yield dataFrame({ ...base, choices: [], usage })
  yield DONE_FRAME
}

// One choice of a chat completion, in both of its wire forms: the whole message, and the
// deltas that stream it. Text and JSON content stream as `content` pieces; tool calls as
// OpenAI streams them: per call, a delta opening it (index, id, type, name, empty
// arguments), then its arguments in pieces under the same index.
import type { Generation } from './generation.ts'
import { newId } from './ids.ts'
import { jsonContent, toolCallTexts, type CallText } from './json-reply.ts'
import type { ReplyPlan } from './reply-plan.ts'
import { generateText, type GeneratedText } from './text.ts'

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls' | 'function_call'

export interface ChatReply {
  readonly message: Record<string, unknown>
  /** The first delta, before any piece: the role. */
  readonly opening: Record<string, unknown>
  /** The deltas after the opening, one paced frame each. */
  readonly pieces: readonly Record<string, unknown>[]
  readonly finishReason: ChatFinishReason
  /** Completion tokens: the content's, or the tool calls' arguments'. */
  readonly tokens: number
}

export interface ChatReplyInput {
  readonly plan: ReplyPlan
  /** The request used legacy `functions`: one `function_call`, not `tool_calls`. */
  readonly legacy: boolean
  readonly seed: string
  readonly generation: Generation
  /** The length of the mock's prose when nothing else sets it. */
  readonly proseTokens: number
}

/**
 * The n choices of one request. Tool-call arguments and schema JSON depend only on the
 * request, so they are made once and shared (each choice still gets its own call ids);
 * prose and json_object replies differ by choice, as OpenAI's n choices do.
 */
export async function chatReplies(input: ChatReplyInput, n: number): Promise<ChatReply[]> {
  const { plan, generation } = input
  const variants = Array.from({ length: n }, (_, variant) => variant)
  if (plan.kind === 'tools') {
    const texts = await toolCallTexts(input.legacy ? plan.tools.slice(0, 1) : plan.tools, generation.limit)
    const finished: ChatFinishReason = input.legacy ? 'function_call' : 'tool_calls'
    return Array.from({ length: n }, () => ({
      ...(input.legacy ? functionCallReply(texts.calls) : toolCallsReply(texts.calls)),
      finishReason: texts.cut ? 'length' : finished,
      tokens: texts.tokens,
    }))
  }
  if (plan.kind === 'json') {
    const { format } = plan
    const shared =
      format.type === 'json_schema'
        ? await jsonContent(format, input.seed, 0, input.proseTokens, generation.limit)
        : undefined
    return Promise.all(
      variants.map(async (variant) => {
        const content = shared ?? (await jsonContent(format, input.seed, variant, input.proseTokens, generation.limit))
        return { ...contentReply(content), finishReason: content.cut ? 'length' : 'stop', tokens: content.tokens }
      }),
    )
  }
  return Promise.all(
    variants.map(async (variant) => {
      const text = await generateText(input.seed, variant, generation.budget, generation.finishReason)
      return { ...contentReply(text), finishReason: generation.finishReason, tokens: text.tokens }
    }),
  )
}

type Shape = Pick<ChatReply, 'message' | 'opening' | 'pieces'>

function contentReply(content: GeneratedText): Shape {
  return {
    message: { role: 'assistant', content: content.text, refusal: null, annotations: [] },
    opening: { role: 'assistant', content: '', refusal: null },
    pieces: content.pieces.map((piece) => ({ content: piece })),
  }
}

/** An assistant message (or its opening delta) that calls instead of answering: no content, no refusal. */
function calling(): { role: 'assistant'; content: null; refusal: null } {
  return { role: 'assistant', content: null, refusal: null }
}

function toolCallsReply(calls: readonly CallText[]): Shape {
  const withIds = calls.map((call) => ({ id: newId('call_'), call }))
  return {
    message: {
      ...calling(),
      annotations: [],
      tool_calls: withIds.map(({ id, call }) => ({
        id,
        type: 'function',
        function: { name: call.name, arguments: call.arguments.text },
      })),
    },
    opening: calling(),
    pieces: withIds.flatMap(({ id, call }, index) => [
      { tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' } }] },
      ...call.arguments.pieces.map((piece) => ({ tool_calls: [{ index, function: { arguments: piece } }] })),
    ]),
  }
}

function functionCallReply(calls: readonly CallText[]): Shape {
  const call = calls[0]
  if (call === undefined) return toolCallsReply([])
  return {
    message: { ...calling(), annotations: [], function_call: { name: call.name, arguments: call.arguments.text } },
    opening: calling(),
    pieces: [
      { function_call: { name: call.name, arguments: '' } },
      ...call.arguments.pieces.map((piece) => ({ function_call: { arguments: piece } })),
    ],
  }
}

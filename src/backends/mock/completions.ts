// POST /completions (legacy): text_completion objects, streamed or not. `prompt` may be a
// string, an array of strings, an array of token ids, or an array of such arrays; each
// prompt gets `n` choices, numbered prompt by prompt as OpenAI does.
import { countInputTokens } from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { checkTotal, interleave, readGeneration, type FinishReason } from './generation.ts'
import { SYSTEM_FINGERPRINT, newId, unixSeconds } from './ids.ts'
import { jsonBody, modelOf } from './params.ts'
import { jsonResponse } from './reply.ts'
import { DONE_FRAME, dataFrame, type Frame } from './sse.ts'
import { generateText, type GeneratedText } from './text.ts'
import { completionUsage, type CompletionUsage } from './usage.ts'

export async function completions(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const prompts = promptSeeds(body.prompt)
  const model = modelOf(body, request)
  const generation = readGeneration(body, { limits: ['max_tokens'], allowN: true }, ctx.config.defaultCompletionTokens)

  checkTotal(prompts.length * generation.n, generation.budget)
  const replies: GeneratedText[] = await Promise.all(
    prompts.flatMap((seed) =>
      Array.from({ length: generation.n }, (_, i) => generateText(seed, i, generation.budget, generation.finishReason)),
    ),
  )
  const usage = completionUsage(await countInputTokens(body.prompt), replies)
  const head = {
    id: newId('cmpl-'),
    object: 'text_completion',
    created: unixSeconds(ctx.now()),
    model,
    system_fingerprint: SYSTEM_FINGERPRINT,
  }

  if (!generation.stream) {
    return jsonResponse(200, {
      ...head,
      choices: replies.map((reply, index) => ({
        text: reply.text,
        index,
        logprobs: null,
        finish_reason: generation.finishReason,
      })),
      usage,
    })
  }
  return ctx.stream(
    chunks(head, replies, generation.finishReason, generation.includeUsage ? usage : undefined),
    request.signal,
  )
}

/** One seed per prompt. Token-id prompts are seeded by their ids. */
function promptSeeds(prompt: unknown): string[] {
  if (prompt === undefined || prompt === null) throw missingParameter('prompt')
  if (typeof prompt === 'string') return [prompt]
  const invalid = invalidRequest(
    "Invalid 'prompt': expected a string, an array of strings, an array of token ids or an array of such arrays.",
    'prompt',
    'invalid_type',
  )
  if (!Array.isArray(prompt) || prompt.length === 0) throw invalid
  if (prompt.every((item) => Number.isInteger(item))) return [JSON.stringify(prompt)]
  return prompt.map((item: unknown) => {
    if (typeof item === 'string') return item
    if (Array.isArray(item) && item.length > 0 && item.every((id) => Number.isInteger(id))) return JSON.stringify(item)
    throw invalid
  })
}

function* chunks(
  head: Record<string, unknown>,
  replies: readonly GeneratedText[],
  finish: FinishReason,
  usage: CompletionUsage | undefined,
): Generator<Frame> {
  const chunk = (index: number, text: string, finishReason: FinishReason | null, paced = false): Frame =>
    dataFrame(
      {
        ...head,
        choices: [{ text, index, logprobs: null, finish_reason: finishReason }],
        ...(usage ? { usage: null } : {}),
      },
      paced,
    )

  yield* interleave(replies, (i, piece, paced) => chunk(i, piece, null, paced))
  for (let i = 0; i < replies.length; i++) yield chunk(i, '', finish)
  if (usage) yield dataFrame({ ...head, choices: [], usage })
  yield DONE_FRAME
}

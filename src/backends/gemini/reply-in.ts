// A Gemini GenerateContentResponse (ai.google.dev/api/generate-content#v1beta.GenerateContentResponse)
// as an OpenAI chat completion: each candidate a choice, text parts its content, thought
// parts its reasoning_content, function calls its tool_calls (with the call's thought
// signature kept where Google's own OpenAI layer keeps it), the finish reason in OpenAI's
// words, and the usage exactly as usageMetadata counted it: thoughts are output tokens,
// cached content stays apart in prompt_tokens_details.
import { randomUUID } from 'node:crypto'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { SIGNATURE_HOME } from './request-out.ts'

/** Gemini's finish reasons that mean a filter stopped the candidate. */
const FILTERED = new Set([
  'SAFETY',
  'RECITATION',
  'BLOCKLIST',
  'PROHIBITED_CONTENT',
  'SPII',
  'IMAGE_SAFETY',
  'IMAGE_PROHIBITED_CONTENT',
  'IMAGE_RECITATION',
])

export function completionIdOf(response: JsonObject): string {
  return `chatcmpl-${typeof response.responseId === 'string' ? response.responseId : randomUUID()}`
}

/** OpenAI's finish_reason for a candidate's, or null while it is still going. */
export function finishReasonOf(reason: unknown, calledFunctions: boolean): string | null {
  if (typeof reason !== 'string' || reason === 'FINISH_REASON_UNSPECIFIED') return null
  if (calledFunctions) return 'tool_calls'
  if (reason === 'MAX_TOKENS') return 'length'
  if (FILTERED.has(reason)) return 'content_filter'
  return 'stop'
}

const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : 0

/** OpenAI's usage object for Gemini's usageMetadata, or undefined when there is none. */
export function usageOf(metadata: unknown): JsonObject | undefined {
  if (!isJsonObject(metadata)) return undefined
  // Tokens of the tools Gemini ran for the call were read by the model as prompt.
  const prompt = count(metadata.promptTokenCount) + count(metadata.toolUsePromptTokenCount)
  const thoughts = count(metadata.thoughtsTokenCount)
  const completion = count(metadata.candidatesTokenCount) + thoughts
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: count(metadata.cachedContentTokenCount) },
    completion_tokens_details: { reasoning_tokens: thoughts },
  }
}

export interface ToolCall {
  readonly id: string
  readonly type: 'function'
  readonly function: { readonly name: string; readonly arguments: string }
  readonly [SIGNATURE_HOME]?: { readonly google: { readonly thought_signature: string } }
}

/** What a candidate's parts say, sorted into OpenAI's message members. */
export interface Said {
  readonly text: string
  readonly reasoning: string
  readonly toolCalls: ToolCall[]
}

export function partsOf(candidate: JsonObject): Said {
  let text = ''
  let reasoning = ''
  const toolCalls: ToolCall[] = []
  const content = candidate.content
  const parts = isJsonObject(content) && Array.isArray(content.parts) ? content.parts : []
  for (const part of parts as unknown[]) {
    if (!isJsonObject(part)) continue
    if (typeof part.text === 'string') {
      if (part.thought === true) reasoning += part.text
      else text += part.text
    } else if (isJsonObject(part.functionCall) && typeof part.functionCall.name === 'string') {
      const call = part.functionCall
      toolCalls.push({
        id: typeof call.id === 'string' && call.id !== '' ? call.id : `call_${randomUUID().replaceAll('-', '')}`,
        type: 'function',
        function: { name: call.name as string, arguments: JSON.stringify(isJsonObject(call.args) ? call.args : {}) },
        ...(typeof part.thoughtSignature === 'string'
          ? { [SIGNATURE_HOME]: { google: { thought_signature: part.thoughtSignature } } }
          : {}),
      })
    }
  }
  return { text, reasoning, toolCalls }
}

export function candidatesOf(response: JsonObject): JsonObject[] {
  return Array.isArray(response.candidates) ? (response.candidates as unknown[]).filter(isJsonObject) : []
}

export function indexOf(candidate: JsonObject, fallback: number): number {
  return typeof candidate.index === 'number' ? candidate.index : fallback
}

/** The chat completion for a whole generateContent response. */
export function chatCompletionOf(response: JsonObject, model: string, created: number): JsonObject {
  const candidates = candidatesOf(response)
  const choices = candidates.map((candidate, i) => {
    const said = partsOf(candidate)
    const message: JsonObject = {
      role: 'assistant',
      content: said.text === '' && said.toolCalls.length > 0 ? null : said.text,
    }
    if (said.reasoning !== '') message.reasoning_content = said.reasoning
    if (said.toolCalls.length > 0) message.tool_calls = said.toolCalls
    return {
      index: indexOf(candidate, i),
      message,
      finish_reason: finishReasonOf(candidate.finishReason, said.toolCalls.length > 0) ?? 'stop',
      logprobs: null,
    }
  })
  // A prompt Gemini blocked has no candidate at all: one empty choice, stopped by the filter.
  if (choices.length === 0 && isJsonObject(response.promptFeedback) && response.promptFeedback.blockReason)
    choices.push({
      index: 0,
      message: { role: 'assistant', content: '' },
      finish_reason: 'content_filter',
      logprobs: null,
    })
  const usage = usageOf(response.usageMetadata)
  return {
    id: completionIdOf(response),
    object: 'chat.completion',
    created,
    model: typeof response.modelVersion === 'string' ? response.modelVersion : model,
    choices,
    ...(usage === undefined ? {} : { usage }),
  }
}

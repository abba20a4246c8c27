// A chat completion (a chat-only deployment's reply) → the Responses API's `response`
// object: reasoning first (reasoning_content as a summary, an anthropic backend's signed
// thinking in encrypted_content: carrier.ts), then the assistant's message, then one
// function_call item per tool call. The usage is the upstream's, renamed: prompt_tokens →
// input_tokens (its cached_tokens kept in input_tokens_details), completion_tokens →
// output_tokens (reasoning_tokens in output_tokens_details), so the relay meters exactly
// what the upstream reported. The request's settings are echoed where OpenAI echoes them.
import { randomBytes } from 'node:crypto'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { carrierOf, signatureOfCall, type Carried } from './carrier.ts'

export const newId = (prefix: string): string => prefix + randomBytes(16).toString('hex')

const count = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.round(value) : 0

/** Chat's usage object as the Responses API's ResponseUsage, or null when there is none. */
export function responseUsageOf(usage: unknown): JsonObject | null {
  if (!isJsonObject(usage)) return null
  const input = count(usage.prompt_tokens)
  const output = count(usage.completion_tokens)
  const inputDetails = isJsonObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const outputDetails = isJsonObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {}
  return {
    input_tokens: input,
    input_tokens_details: { ...inputDetails, cached_tokens: count(inputDetails.cached_tokens) },
    output_tokens: output,
    output_tokens_details: { ...outputDetails, reasoning_tokens: count(outputDetails.reasoning_tokens) },
    total_tokens: input + output,
  }
}

/** How a chat finish_reason ends a response. */
export function endingOf(finish: unknown): { status: string; incomplete_details: JsonObject | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } }
  return { status: 'completed', incomplete_details: null }
}

export interface ResponseFields {
  readonly id: string
  readonly model: unknown
  readonly createdAt: number
  readonly status: string
  readonly incompleteDetails: JsonObject | null
  readonly output: readonly unknown[]
  readonly usage: JsonObject | null
}

/** A response object, echoing the request's settings where OpenAI does. Nothing is stored: `store` is false. */
export function responseObject(request: JsonObject, f: ResponseFields): JsonObject {
  const echo = (name: string, fallback: unknown): unknown => request[name] ?? fallback
  const reasoning = isJsonObject(request.reasoning) ? request.reasoning : {}
  return {
    id: f.id,
    object: 'response',
    created_at: f.createdAt,
    status: f.status,
    completed_at: f.status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    background: false,
    error: null,
    incomplete_details: f.incompleteDetails,
    instructions: echo('instructions', null),
    max_output_tokens: echo('max_output_tokens', null),
    model: f.model,
    output: f.output,
    parallel_tool_calls: echo('parallel_tool_calls', true),
    previous_response_id: null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
    service_tier: 'default',
    store: false,
    temperature: echo('temperature', 1),
    text: echo('text', { format: { type: 'text' } }),
    tool_choice: echo('tool_choice', 'auto'),
    tools: Array.isArray(request.tools) ? request.tools : [],
    top_p: echo('top_p', 1),
    truncation: 'disabled',
    usage: f.usage,
    user: echo('user', null),
    metadata: echo('metadata', {}),
  }
}

export const outputText = (text: string): JsonObject => ({ type: 'output_text', text, annotations: [], logprobs: [] })

export function reasoningItem(id: string, summary: string, carried: Carried): JsonObject {
  const content = carrierOf(carried)
  return {
    id,
    type: 'reasoning',
    summary: summary === '' ? [] : [{ type: 'summary_text', text: summary }],
    ...(content === undefined ? {} : { encrypted_content: content }),
  }
}

export function messageItem(id: string, status: string, content: readonly JsonObject[]): JsonObject {
  return { id, type: 'message', status, role: 'assistant', content }
}

export function functionCallItem(id: string, status: string, callId: string, name: string, args: string): JsonObject {
  return { id, type: 'function_call', status, arguments: args, call_id: callId, name }
}

/** The response object for a whole chat completion, answering `request`. */
export function responseOfChat(chat: unknown, request: JsonObject): JsonObject {
  const c = isJsonObject(chat) ? chat : {}
  const choice = Array.isArray(c.choices) && isJsonObject(c.choices[0]) ? c.choices[0] : {}
  const message = isJsonObject(choice.message) ? choice.message : {}
  const ending = endingOf(choice.finish_reason)
  const itemStatus = ending.status === 'completed' ? 'completed' : 'incomplete'
  const output: JsonObject[] = []
  const calls = (Array.isArray(message.tool_calls) ? message.tool_calls : []).filter(isJsonObject)
  const callIds = calls.map((call) => (typeof call.id === 'string' ? call.id : newId('call_')))
  const signatures: Record<string, string> = {}
  for (const [i, call] of calls.entries()) {
    const signature = signatureOfCall(call)
    if (signature !== undefined) signatures[callIds[i] ?? ''] = signature
  }
  const thinking = Array.isArray(message.thinking_blocks) ? message.thinking_blocks : []
  const summary = typeof message.reasoning_content === 'string' ? message.reasoning_content : ''
  if (summary !== '' || thinking.length > 0 || Object.keys(signatures).length > 0)
    output.push(reasoningItem(newId('rs_'), summary, { thinking, signatures }))
  const content: JsonObject[] = []
  if (typeof message.content === 'string' && message.content !== '') content.push(outputText(message.content))
  if (typeof message.refusal === 'string' && message.refusal !== '')
    content.push({ type: 'refusal', refusal: message.refusal })
  if (content.length > 0) output.push(messageItem(newId('msg_'), itemStatus, content))
  for (const [i, call] of calls.entries()) {
    const fn = isJsonObject(call.function) ? call.function : {}
    output.push(
      functionCallItem(
        newId('fc_'),
        itemStatus,
        callIds[i] ?? newId('call_'),
        typeof fn.name === 'string' ? fn.name : '',
        typeof fn.arguments === 'string' ? fn.arguments : '',
      ),
    )
  }
  return responseObject(request, {
    id: newId('resp_'),
    model: c.model ?? request.model,
    createdAt: typeof c.created === 'number' ? c.created : Math.floor(Date.now() / 1000),
    status: ending.status,
    incompleteDetails: ending.incomplete_details,
    output,
    usage: responseUsageOf(c.usage),
  })
}

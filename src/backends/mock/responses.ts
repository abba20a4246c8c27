// POST /responses: a `response` object holding one assistant message or the function
// calls of the tools called (see reply-plan.ts), or the event sequence OpenAI streams for
// it (created, in_progress, each item opening, its deltas and closing, then completed, or
// incomplete when max_output_tokens cut it). The SDK's ResponseStream checks that
// sequence, so the opening and closing events are not optional.
import {
  RESPONSES_DEFINITION_FIELDS,
  countChatTokens,
  countDefinitionTokens,
  responsesItems,
} from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { readGeneration } from './generation.ts'
import { newId, unixSeconds } from './ids.ts'
import { jsonBody, modelOf, optionalString } from './params.ts'
import { jsonResponse } from './reply.ts'
import { planReply } from './reply-plan.ts'
import { responsesToolRequest } from './request-tools.ts'
import { responseOutput, type OutputItem } from './response-output.ts'
import { namedFrame, type Frame } from './sse.ts'
import { seedOfMessages } from './text.ts'
import { responseUsage } from './usage.ts'

export async function responses(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const messages = inputMessages(body.input, optionalString(body, 'instructions'))
  const model = modelOf(body, request)
  const generation = readGeneration(
    body,
    { limits: ['max_output_tokens'], allowN: false },
    ctx.config.defaultCompletionTokens,
  )
  const plan = planReply(responsesToolRequest(body), 'tool_choice')
  const output = await responseOutput({
    plan,
    seed: seedOfMessages(messages),
    generation,
    proseTokens: ctx.config.defaultCompletionTokens,
  })
  const createdAt = unixSeconds(ctx.now())
  const inProgress = responseObject(body, {
    id: newId('resp_'),
    model,
    createdAt,
    status: 'in_progress',
    completedAt: null,
    output: [],
    usage: null,
  })
  // Counted from the items themselves (a function call's arguments are prompt too), with
  // the tool definitions and the output schema, which are rendered into the prompt.
  const [itemTokens, definitionTokens] = await Promise.all([
    countChatTokens(responsesItems(body.input, body.instructions)),
    countDefinitionTokens(body, RESPONSES_DEFINITION_FIELDS),
  ])
  const finished = {
    ...inProgress,
    status: output.cut ? 'incomplete' : 'completed',
    // OpenAI sets completed_at only on a completed response.
    completed_at: output.cut ? null : createdAt,
    incomplete_details: output.cut ? { reason: 'max_output_tokens' } : null,
    output: output.items.map((o) => o.item),
    usage: responseUsage(itemTokens + definitionTokens, output.tokens),
  }

  if (!generation.stream) return jsonResponse(200, finished)
  return ctx.stream(events(inProgress, finished, output.items), request.signal)
}

/**
 * The input as chat messages, for counting and seeding: instructions come first as a
 * developer message; a string is one user message; items without a role (such as tool
 * outputs) count by their text.
 */
function inputMessages(input: unknown, instructions: string | undefined): unknown[] {
  const messages: unknown[] = instructions === undefined ? [] : [{ role: 'developer', content: instructions }]
  if (input === undefined || input === null) throw missingParameter('input')
  if (typeof input === 'string') return [...messages, { role: 'user', content: input }]
  if (!Array.isArray(input))
    throw invalidRequest(
      "Invalid type for 'input': expected a string or an array of input items.",
      'input',
      'invalid_type',
    )
  for (const [i, item] of input.entries()) {
    if (!item || typeof item !== 'object' || Array.isArray(item)) {
      throw invalidRequest(`Invalid type for 'input[${i}]': expected an object.`, `input[${i}]`, 'invalid_type')
    }
    const { role, content, output } = item as Record<string, unknown>
    messages.push({ role: typeof role === 'string' ? role : 'tool', content: content ?? output })
  }
  return messages
}

interface ResponseFields {
  readonly id: string
  readonly model: string
  readonly createdAt: number
  readonly status: 'in_progress' | 'completed'
  readonly completedAt: number | null
  readonly output: readonly unknown[]
  readonly usage: unknown
}

/** A response object, echoing the request's settings where OpenAI does. */
function responseObject(body: Readonly<Record<string, unknown>>, f: ResponseFields): Record<string, unknown> {
  const echo = (name: string, fallback: unknown): unknown => body[name] ?? fallback
  return {
    id: f.id,
    object: 'response',
    created_at: f.createdAt,
    status: f.status,
    completed_at: f.completedAt,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: echo('instructions', null),
    max_output_tokens: echo('max_output_tokens', null),
    model: f.model,
    output: f.output,
    parallel_tool_calls: echo('parallel_tool_calls', true),
    previous_response_id: echo('previous_response_id', null),
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: echo('store', true),
    temperature: echo('temperature', 1),
    text: echo('text', { format: { type: 'text' } }),
    tool_choice: echo('tool_choice', 'auto'),
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_p: echo('top_p', 1),
    truncation: 'disabled',
    usage: f.usage,
    user: null,
    metadata: echo('metadata', {}),
  }
}

function* events(
  inProgress: Record<string, unknown>,
  finished: Record<string, unknown>,
  items: readonly OutputItem[],
): Generator<Frame> {
  let sequence = 0
  const event = (type: string, fields: Record<string, unknown>, paced = false): Frame =>
    namedFrame(type, { type, ...fields, sequence_number: sequence++ }, paced)

  yield event('response.created', { response: inProgress })
  yield event('response.in_progress', { response: inProgress })
  for (const [outputIndex, item] of items.entries()) {
    for (const e of item.events(outputIndex)) yield event(e.type, e.fields, e.paced)
  }
  yield event(finished.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: finished })
}

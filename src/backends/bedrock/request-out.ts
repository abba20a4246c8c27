// The corridor's upstream request (an OpenAI chat completions body) → a Bedrock Converse
// request (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html; the
// same body for ConverseStream). What the body asks for is carried over or refused with a
// 400 naming it (untranslatable_feature), never dropped.
//
// Carried: system and developer messages (→ system text blocks), user turns of text and
// images (base64 data URLs → image blocks of bytes; Converse takes no web address), assistant
// text and tool_calls (→ toolUse blocks), tool messages (→ toolResult blocks in a user turn),
// tools (→ toolConfig.tools, strict included) and tool_choice (auto, required → any, a named
// function → tool), max_tokens / max_completion_tokens, temperature, top_p and stop
// (→ inferenceConfig), top_k (→ additionalModelRequestFields, where the models that have it
// read it), response_format json_schema (→ outputConfig.textFormat, Converse's structured
// output) and extended thinking as an Anthropic caller's translation carries it: `thinking`
// into additionalModelRequestFields (Claude on Bedrock reads it there), and an assistant
// message's thinking_blocks put back first in its turn as reasoningContent, signatures
// intact. Consecutive turns of one role are merged: Converse wants them alternating.
// `user` and `metadata` are the caller's bookkeeping and change nothing upstream.
import { gatewayError, type GatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import {
  conversationOf,
  DATA_URL,
  invalid,
  jsonSchemaFormatOf,
  refuseUnlessInert,
  stopsOf,
  toolChoiceOf,
  toolFunctionsOf,
  type TurnBlocks,
} from '../chat-request.ts'

/** Members that change nothing upstream: stream_options (a ConverseStream always ends with its usage). */
const IGNORED = new Set(['model', 'stream', 'stream_options', 'user', 'metadata'])
/** Image formats Converse takes, by media type. */
const IMAGE_FORMATS: Readonly<Record<string, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/jpg': 'jpeg',
  'image/gif': 'gif',
  'image/webp': 'webp',
}

export const refuse = (what: string, why = "Bedrock's Converse API has no equivalent"): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported by this model's upstream (Amazon Bedrock): ${why}.`,
    param: what.split(' ')[0] ?? what,
  })

/** Converse's content blocks. */
const BLOCKS: TurnBlocks = {
  refuse,
  text: (text) => ({ text }),
  image: imageOf,
  thinking: reasoningOf,
  toolUse: (toolUseId, name, input) => ({ toolUse: { toolUseId, name, input } }),
  toolResult: (toolUseId, text) => ({ toolResult: { toolUseId, content: [{ text }] } }),
}

/** The Converse body (modelId goes in the path) for a chat completions body, or a refusal (a GatewayError). */
export function converseRequestOf(chat: JsonObject): JsonObject {
  let system: string[] = []
  let turns: JsonObject[] = []
  const inference: JsonObject = {}
  const extra: JsonObject = {}
  const out: JsonObject = {}
  let tools: JsonObject[] | undefined
  let toolChoice: JsonObject | undefined
  for (const [name, value] of Object.entries(chat)) {
    if (value === undefined || value === null || IGNORED.has(name)) continue
    switch (name) {
      case 'messages':
        ;({ system, turns } = conversationOf(value, BLOCKS))
        break
      case 'max_tokens':
      case 'max_completion_tokens':
        if (!Number.isInteger(value) || (value as number) < 1) throw invalid(name, 'Input should be a positive integer')
        inference.maxTokens = value
        break
      case 'temperature':
        inference.temperature = value
        break
      case 'top_p':
        inference.topP = value
        break
      case 'top_k':
        extra.top_k = value
        break
      case 'stop': {
        const stops = stopsOf(value)
        if (stops.length > 0) inference.stopSequences = stops
        break
      }
      case 'tools':
        tools = toolFunctionsOf(value, refuse).map(({ name, description, parameters, strict }) => ({
          toolSpec: {
            name,
            ...(description === undefined ? {} : { description }),
            inputSchema: { json: parameters },
            ...(strict === undefined ? {} : { strict }),
          },
        }))
        break
      case 'tool_choice': {
        const choice = toolChoiceOf(value)
        if (choice === 'none')
          throw refuse("tool_choice 'none'", 'Converse cannot forbid calls to the tools it is given (send no tools)')
        toolChoice = choice === 'auto' ? { auto: {} } : choice === 'required' ? { any: {} } : { tool: choice }
        break
      }
      case 'parallel_tool_calls':
        if (value !== true) throw refuse('parallel_tool_calls: false', 'Converse cannot keep a model to one call')
        break
      case 'response_format':
        Object.assign(out, formatOf(value))
        break
      case 'thinking':
        if (!isJsonObject(value)) throw invalid('thinking', 'Input should be a valid object')
        extra.thinking = value
        break
      case 'store':
        if (value !== false) throw refuse('store', 'the completion cannot be stored upstream')
        break
      default:
        refuseUnlessInert(name, value, refuse, 'a Converse call has one reply')
    }
  }
  out.messages = turns
  if (system.length > 0) out.system = system.map((text) => ({ text }))
  if (Object.keys(inference).length > 0) out.inferenceConfig = inference
  if (tools !== undefined && tools.length > 0)
    out.toolConfig = { tools, ...(toolChoice === undefined ? {} : { toolChoice }) }
  else if (toolChoice !== undefined) throw invalid('tool_choice', 'tool_choice needs tools')
  if (Object.keys(extra).length > 0) out.additionalModelRequestFields = extra
  return out
}

/** An image_url part as an image block of bytes (base64 in Converse's JSON). */
function imageOf(url: string, at: string): JsonObject {
  const data = DATA_URL.exec(url)
  if (data === null)
    throw refuse(`${at} (a web address)`, 'Converse takes an image as its bytes (send a base64 data URL)')
  const format = IMAGE_FORMATS[(data[1] ?? '').toLowerCase()]
  if (format === undefined) throw refuse(`${at} (an image of type ${data[1]})`, 'Converse takes png, jpeg, gif or webp')
  return { image: { format, source: { bytes: data[2] } } }
}

/** An Anthropic thinking block (as the caller's translation carries it) as Converse's reasoningContent. */
function reasoningOf(block: unknown, at: string): JsonObject {
  if (isJsonObject(block) && block.type === 'thinking' && typeof block.thinking === 'string')
    return {
      reasoningContent: {
        reasoningText: {
          text: block.thinking,
          ...(typeof block.signature === 'string' ? { signature: block.signature } : {}),
        },
      },
    }
  if (isJsonObject(block) && block.type === 'redacted_thinking' && typeof block.data === 'string')
    return { reasoningContent: { redactedContent: block.data } }
  throw invalid(at, 'Input should be a thinking or redacted_thinking block')
}

/** response_format: a JSON schema is Converse's outputConfig.textFormat; plain JSON mode has no counterpart. */
function formatOf(format: unknown): JsonObject {
  const spec = jsonSchemaFormatOf(
    format,
    refuse,
    'Converse constrains replies to a JSON schema only (send json_schema)',
  )
  if (spec === undefined) return {}
  const { schema, ...named } = spec
  // Converse takes the schema as a string of JSON.
  return {
    outputConfig: {
      textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), ...named } } },
    },
  }
}

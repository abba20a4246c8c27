// The corridor's upstream request (an OpenAI chat completions body) → Anthropic's Messages
// request: the reverse of src/protocols/anthropic/request-in.ts. What the body asks for is
// either carried over or refused with a 400 that names it (untranslatable_feature), never
// dropped: a caller who asked for n=3 or logprobs must not get an answer that did without.
//
// Carried: system and developer messages (→ system, joined by a blank line), user turns of
// text and images (data URLs → base64 sources, http(s) URLs → url sources), assistant text
// and tool_calls (→ tool_use blocks), tool messages (→ tool_result blocks in a user turn),
// tools and tool_choice, parallel_tool_calls: false, stop, user (→ metadata.user_id),
// temperature, top_p, top_k, max_tokens / max_completion_tokens, stream,
// response_format json_schema (→ output_config.format). Consecutive turns of one role are
// merged into one, which the Messages API expects of a conversation. Extended thinking, as
// an Anthropic caller's translation carries it (request-in.ts): `thinking` as it is, and an
// assistant message's thinking_blocks put back first in its turn, signatures intact; an
// OpenAI caller's reasoning_effort as thinking with a budget by effort (thinking.ts). What an
// Anthropic caller asked that chat has no member for comes in the body's private member
// (protocols/anthropic/carried.ts): its output_config.effort goes back as it came (and its
// reasoning_effort, the same effort for chat's sake, asks no thinking budget), and so does
// its context_management.
import type { AnthropicBackendConfig } from '../../config/schema.ts'
import { gatewayError, type GatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { anthropicCarriedOf, ANTHROPIC_CARRIED, type AnthropicCarried } from '../../protocols/anthropic/carried.ts'
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
import { thinkingOfEffort } from './thinking.ts'

/** Members that change nothing upstream: stream_options (Anthropic always reports a stream's usage). */
const IGNORED = new Set(['model', 'stream_options'])

const refuse = (what: string, why = "Anthropic's Messages API has no equivalent"): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported by this model's upstream: ${why}.`,
    param: what.split(' ')[0] ?? what,
  })

/** Anthropic's content blocks. */
const BLOCKS: TurnBlocks = {
  refuse,
  text: (text) => ({ type: 'text', text }),
  image: imageOf,
  thinking: (block, at) => {
    if (!isJsonObject(block) || (block.type !== 'thinking' && block.type !== 'redacted_thinking'))
      throw invalid(at, 'Input should be a thinking or redacted_thinking block')
    return block
  },
  toolUse: (id, name, input) => ({ type: 'tool_use', id, name, input }),
  toolResult: (toolCallId, text) => ({ type: 'tool_result', tool_use_id: toolCallId, content: text }),
}

type Settings = Pick<AnthropicBackendConfig, 'defaultMaxTokens'>

/** The Messages body for a chat completions body sent to model `model`, or a refusal (a GatewayError). */
export function messagesRequestOf(chat: JsonObject, model: string, settings: Settings): JsonObject {
  const out: JsonObject = { model }
  let maxTokens: unknown
  let system: string[] = []
  let turns: JsonObject[] = []
  let toolChoice: JsonObject | undefined
  let parallel: unknown
  let effort: unknown
  let carried: AnthropicCarried | undefined
  for (const [name, value] of Object.entries(chat)) {
    if (value === undefined || value === null || IGNORED.has(name)) continue
    switch (name) {
      case 'messages':
        ;({ system, turns } = conversationOf(value, BLOCKS))
        break
      case 'max_tokens':
      case 'max_completion_tokens':
        maxTokens = value
        break
      case 'temperature':
      case 'top_p':
      case 'top_k':
        out[name] = value
        break
      case 'stream':
        if (value === true) out.stream = true
        break
      case 'stop': {
        const stops = stopsOf(value)
        if (stops.length > 0) out.stop_sequences = stops
        break
      }
      case 'user':
        if (typeof value !== 'string') throw invalid('user', 'Input should be a valid string')
        out.metadata = { user_id: value }
        break
      case 'tools':
        out.tools = toolFunctionsOf(value, refuse).map(({ name, description, parameters, strict }) => ({
          name,
          ...(description === undefined ? {} : { description }),
          input_schema: parameters,
          ...(strict === undefined ? {} : { strict }),
        }))
        break
      case 'tool_choice': {
        const choice = toolChoiceOf(value)
        toolChoice =
          choice === 'auto' || choice === 'none'
            ? { type: choice }
            : choice === 'required'
              ? { type: 'any' }
              : { type: 'tool', name: choice.name }
        break
      }
      case 'parallel_tool_calls':
        parallel = value
        break
      case 'response_format': {
        const format = jsonSchemaFormatOf(value, refuse, 'the Messages API constrains replies to a JSON schema only')
        if (format !== undefined) out.output_config = { format: { type: 'json_schema', schema: format.schema } }
        break
      }
      case 'thinking':
        if (!isJsonObject(value)) throw invalid('thinking', 'Input should be a valid object')
        out.thinking = value
        break
      case 'reasoning_effort':
        effort = value
        break
      case ANTHROPIC_CARRIED:
        carried = anthropicCarriedOf(chat)
        break
      default:
        refuseUnlessInert(name, value, refuse, 'a message has one reply')
    }
  }
  if (system.length > 0) out.system = system.join('\n\n')
  out.messages = turns
  out.max_tokens = Number.isInteger(maxTokens) && (maxTokens as number) > 0 ? maxTokens : settings.defaultMaxTokens
  if (carried?.effort !== undefined) {
    // An Anthropic caller's effort goes back as it came (its reasoning_effort is the same, for chat).
    out.output_config = { ...(isJsonObject(out.output_config) ? out.output_config : {}), effort: carried.effort }
  } else {
    // An OpenAI caller's reasoning effort is extended thinking, unless it asked for that itself.
    const thinking = out.thinking ?? thinkingOfEffort(effort, out.max_tokens, 'reasoning_effort')
    if (thinking !== undefined) out.thinking = thinking
  }
  if (carried?.context_management !== undefined) out.context_management = carried.context_management
  if (parallel === false && out.tools !== undefined)
    toolChoice = { type: 'auto', ...toolChoice, disable_parallel_tool_use: true }
  if (toolChoice !== undefined) out.tool_choice = toolChoice
  return out
}

/** An image_url part as an image block: a data URL as a base64 source, anything else as a url source. */
function imageOf(url: string, at: string): JsonObject {
  const data = DATA_URL.exec(url)
  if (data !== null) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } }
  if (!/^https?:\/\//i.test(url)) throw invalid(`${at}.url`, 'Input should be an http(s) URL or a base64 data URL')
  return { type: 'image', source: { type: 'url', url } }
}

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
import { gatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { anthropicCarriedOf, ANTHROPIC_CARRIED, type AnthropicCarried } from '../../protocols/anthropic/carried.ts'
import { describeType, plain } from '../../protocols/anthropic/request-in.ts'
import { thinkingOfEffort } from './thinking.ts'
import { toolInputOf } from '../tool-arguments.ts'

/** Members that change nothing upstream: stream_options (Anthropic always reports a stream's usage). */
const IGNORED = new Set(['model', 'stream_options'])

const refuse = (what: string, why = "Anthropic's Messages API has no equivalent"): Error =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported by this model's upstream: ${why}.`,
    param: what.split(' ')[0] ?? what,
  })
const invalid = (param: string, what: string): Error =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

type Settings = Pick<AnthropicBackendConfig, 'defaultMaxTokens'>

/** The Messages body for a chat completions body sent to model `model`, or a refusal (a GatewayError). */
export function messagesRequestOf(chat: JsonObject, model: string, settings: Settings): JsonObject {
  const out: JsonObject = { model }
  let maxTokens: unknown
  const system: string[] = []
  const turns: JsonObject[] = []
  let toolChoice: JsonObject | undefined
  let parallel: unknown
  let effort: unknown
  let carried: AnthropicCarried | undefined
  for (const [name, value] of Object.entries(chat)) {
    if (value === undefined || value === null || IGNORED.has(name)) continue
    switch (name) {
      case 'messages':
        if (!Array.isArray(value)) throw invalid('messages', 'Input should be a valid list')
        for (const [i, message] of value.entries()) addTurn(turns, system, message, `messages.${i}`)
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
        const stops = typeof value === 'string' ? [value] : value
        if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
          throw invalid('stop', 'Input should be a string or a list of strings')
        if (stops.length > 0) out.stop_sequences = stops
        break
      }
      case 'user':
        if (typeof value !== 'string') throw invalid('user', 'Input should be a valid string')
        out.metadata = { user_id: value }
        break
      case 'tools':
        out.tools = toolsOf(value)
        break
      case 'tool_choice':
        toolChoice = toolChoiceOf(value)
        break
      case 'parallel_tool_calls':
        parallel = value
        break
      case 'response_format':
        Object.assign(out, formatOf(value))
        break
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
      case 'n':
        if (value !== 1) throw refuse('n', 'a message has one reply')
        break
      case 'presence_penalty':
      case 'frequency_penalty':
        if (value !== 0) throw refuse(name)
        break
      case 'logprobs':
        if (value !== false) throw refuse(name)
        break
      default:
        throw refuse(plain(name))
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

/** Adds one chat message to the turns (or the system prompt), merging it into the last turn when the role is the same. */
function addTurn(turns: JsonObject[], system: string[], message: unknown, at: string): void {
  if (!isJsonObject(message)) throw invalid(at, 'Input should be a valid object')
  let role: 'user' | 'assistant'
  let blocks: JsonObject[]
  switch (message.role) {
    case 'system':
    case 'developer':
      system.push(textOf(message.content, `${at}.content`))
      return
    case 'user':
      role = 'user'
      blocks = userBlocks(message.content, `${at}.content`)
      break
    case 'assistant':
      role = 'assistant'
      blocks = assistantBlocks(message, at)
      break
    case 'tool':
      role = 'user'
      if (typeof message.tool_call_id !== 'string')
        throw invalid(`${at}.tool_call_id`, 'Input should be a valid string')
      blocks = [
        { type: 'tool_result', tool_use_id: message.tool_call_id, content: textOf(message.content, `${at}.content`) },
      ]
      break
    default:
      throw invalid(`${at}.role`, "Input should be 'system', 'developer', 'user', 'assistant' or 'tool'")
  }
  const last = turns.at(-1)
  if (last !== undefined && last.role === role) (last.content as JsonObject[]).push(...blocks)
  else turns.push({ role, content: blocks })
}

/** A string, or text parts, as one string. */
function textOf(content: unknown, at: string): string {
  if (typeof content === 'string') return content
  if (content === null || content === undefined) return ''
  if (!Array.isArray(content)) throw invalid(at, 'Input should be a string or a list of text parts')
  return content
    .map((part, i) => {
      if (!isJsonObject(part) || part.type !== 'text' || typeof part.text !== 'string')
        throw refuse(
          `${at}.${i} (a ${describeType(isJsonObject(part) ? part.type : undefined)} part)`,
          'only text is carried here',
        )
      return part.text
    })
    .join('')
}

function userBlocks(content: unknown, at: string): JsonObject[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  if (!Array.isArray(content)) throw invalid(at, 'Input should be a string or a list of content parts')
  return content.map((part, i) => {
    const here = `${at}.${i}`
    if (!isJsonObject(part)) throw invalid(here, 'Input should be a content part')
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw invalid(`${here}.text`, 'Input should be a valid string')
      return { type: 'text', text: part.text }
    }
    if (part.type === 'image_url') return imageOf(part.image_url, `${here}.image_url`)
    throw refuse(`${here} (a ${describeType(part.type)} part)`)
  })
}

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s

/** An image_url part as an image block: a data URL as a base64 source, anything else as a url source. */
function imageOf(image: unknown, at: string): JsonObject {
  if (!isJsonObject(image) || typeof image.url !== 'string')
    throw invalid(`${at}.url`, 'Input should be a valid string')
  const data = DATA_URL.exec(image.url)
  if (data !== null) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } }
  if (!/^https?:\/\//i.test(image.url))
    throw invalid(`${at}.url`, 'Input should be an http(s) URL or a base64 data URL')
  return { type: 'image', source: { type: 'url', url: image.url } }
}

function assistantBlocks(message: JsonObject, at: string): JsonObject[] {
  const blocks: JsonObject[] = []
  if (Array.isArray(message.thinking_blocks)) {
    for (const [i, block] of message.thinking_blocks.entries()) {
      if (!isJsonObject(block) || (block.type !== 'thinking' && block.type !== 'redacted_thinking'))
        throw invalid(`${at}.thinking_blocks.${i}`, 'Input should be a thinking or redacted_thinking block')
      blocks.push(block)
    }
  }
  const text = textOf(message.content, `${at}.content`)
  if (text !== '') blocks.push({ type: 'text', text })
  if (Array.isArray(message.tool_calls)) {
    for (const [i, call] of message.tool_calls.entries()) {
      const here = `${at}.tool_calls.${i}`
      if (!isJsonObject(call) || !isJsonObject(call.function) || typeof call.id !== 'string')
        throw invalid(here, 'A tool call needs an id and a function')
      const { name, arguments: args } = call.function
      if (typeof name !== 'string') throw invalid(`${here}.function.name`, 'Input should be a valid string')
      blocks.push({ type: 'tool_use', id: call.id, name, input: toolInputOf(args, `${here}.function.arguments`) })
    }
  }
  return blocks
}

function toolsOf(tools: unknown): JsonObject[] {
  if (!Array.isArray(tools)) throw invalid('tools', 'Input should be a valid list')
  return tools.map((tool, i) => {
    const at = `tools.${i}`
    if (!isJsonObject(tool) || tool.type !== 'function' || !isJsonObject(tool.function))
      throw refuse(`${at} (a tool of type ${describeType(isJsonObject(tool) ? tool.type : undefined)})`)
    const fn = tool.function
    if (typeof fn.name !== 'string') throw invalid(`${at}.function.name`, 'Input should be a valid string')
    const schema = fn.parameters ?? { type: 'object', properties: {} }
    if (!isJsonObject(schema)) throw invalid(`${at}.function.parameters`, 'Input should be a valid object')
    return {
      name: fn.name,
      ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
      input_schema: schema,
      ...(typeof fn.strict === 'boolean' ? { strict: fn.strict } : {}),
    }
  })
}

function toolChoiceOf(choice: unknown): JsonObject {
  switch (choice) {
    case 'auto':
      return { type: 'auto' }
    case 'required':
      return { type: 'any' }
    case 'none':
      return { type: 'none' }
  }
  if (isJsonObject(choice) && choice.type === 'function' && isJsonObject(choice.function)) {
    if (typeof choice.function.name !== 'string')
      throw invalid('tool_choice.function.name', 'Input should be a valid string')
    return { type: 'tool', name: choice.function.name }
  }
  throw invalid('tool_choice', "Input should be 'auto', 'required', 'none' or a named function")
}

/** response_format: a JSON schema is Anthropic's output_config.format; plain JSON mode has no counterpart. */
function formatOf(format: unknown): JsonObject {
  if (!isJsonObject(format)) throw invalid('response_format', 'Input should be a valid object')
  if (format.type === 'text') return {}
  if (format.type === 'json_schema' && isJsonObject(format.json_schema) && isJsonObject(format.json_schema.schema))
    return { output_config: { format: { type: 'json_schema', schema: format.json_schema.schema } } }
  throw refuse(
    `response_format (of type ${describeType(format.type)})`,
    'the Messages API constrains replies to a JSON schema only',
  )
}

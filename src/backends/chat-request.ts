// One reading of a chat completions request for the translators whose upstream speaks turns
// of blocks (Anthropic's Messages, Bedrock's Converse): the conversation walked, checked and
// merged into alternating turns, the tools and tool_choice read, stop and a JSON-schema
// response_format read. What is read, and what is refused as malformed, is the same for every
// such upstream; each translator gives the builders of its own block shapes and its own
// refusal (which names the upstream), and puts the pieces where its request wants them.
import { gatewayError, type GatewayError } from '../errors.ts'
import { isJsonObject, type JsonObject } from '../json.ts'
import { describeType, plain } from '../protocols/anthropic/request-in.ts'
import { toolInputOf } from './tool-arguments.ts'

/** What the upstream cannot take, named; `why` defaults to the upstream's "no equivalent". */
export type Refuse = (what: string, why?: string) => GatewayError

/** A malformed body: the caller's fault whatever the upstream. */
export const invalid = (param: string, what: string): GatewayError =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

/** A data URL's media type and base64 payload. */
export const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s

/** The builders of one upstream's content blocks. */
export interface TurnBlocks {
  readonly refuse: Refuse
  readonly text: (text: string) => JsonObject
  /** An image_url part's url (checked to be a string), at `at`. */
  readonly image: (url: string, at: string) => JsonObject
  /** One of an assistant message's thinking_blocks, as the caller's translation carried it. */
  readonly thinking: (block: unknown, at: string) => JsonObject
  readonly toolUse: (id: string, name: string, input: JsonObject) => JsonObject
  readonly toolResult: (toolCallId: string, text: string) => JsonObject
}

export interface Conversation {
  /** The system and developer messages' texts, in order (empty ones left out). */
  readonly system: string[]
  /** Alternating turns `{role: 'user' | 'assistant', content: blocks}`: consecutive turns of one role merged. */
  readonly turns: JsonObject[]
}

/** The conversation of a chat body's `messages`, in one upstream's blocks. */
export function conversationOf(messages: unknown, blocks: TurnBlocks): Conversation {
  if (!Array.isArray(messages)) throw invalid('messages', 'Input should be a valid list')
  const conversation: Conversation = { system: [], turns: [] }
  for (const [i, message] of messages.entries()) addTurn(conversation, message, `messages.${i}`, blocks)
  return conversation
}

/** Adds one chat message to the turns (or the system prompt), merging it into the last turn when the role is the same. */
function addTurn({ system, turns }: Conversation, message: unknown, at: string, build: TurnBlocks): void {
  if (!isJsonObject(message)) throw invalid(at, 'Input should be a valid object')
  let role: 'user' | 'assistant'
  let blocks: JsonObject[]
  switch (message.role) {
    case 'system':
    case 'developer': {
      const text = textOf(message.content, `${at}.content`, build.refuse)
      if (text !== '') system.push(text)
      return
    }
    case 'user':
      role = 'user'
      blocks = userBlocks(message.content, `${at}.content`, build)
      break
    case 'assistant':
      role = 'assistant'
      blocks = assistantBlocks(message, at, build)
      break
    case 'tool':
      role = 'user'
      if (typeof message.tool_call_id !== 'string')
        throw invalid(`${at}.tool_call_id`, 'Input should be a valid string')
      blocks = [build.toolResult(message.tool_call_id, textOf(message.content, `${at}.content`, build.refuse))]
      break
    default:
      throw invalid(`${at}.role`, "Input should be 'system', 'developer', 'user', 'assistant' or 'tool'")
  }
  // A turn with nothing in it (an assistant message of empty text, no calls) is refused by both APIs.
  if (blocks.length === 0) return
  const last = turns.at(-1)
  if (last !== undefined && last.role === role) (last.content as JsonObject[]).push(...blocks)
  else turns.push({ role, content: blocks })
}

/** A string, or text parts, as one string. */
export function textOf(content: unknown, at: string, refuse: Refuse): string {
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

function userBlocks(content: unknown, at: string, build: TurnBlocks): JsonObject[] {
  if (typeof content === 'string') return [build.text(content)]
  if (!Array.isArray(content)) throw invalid(at, 'Input should be a string or a list of content parts')
  return content.map((part, i) => {
    const here = `${at}.${i}`
    if (!isJsonObject(part)) throw invalid(here, 'Input should be a content part')
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw invalid(`${here}.text`, 'Input should be a valid string')
      return build.text(part.text)
    }
    if (part.type === 'image_url') {
      const image = part.image_url
      if (!isJsonObject(image) || typeof image.url !== 'string')
        throw invalid(`${here}.image_url.url`, 'Input should be a valid string')
      return build.image(image.url, `${here}.image_url`)
    }
    throw build.refuse(`${here} (a ${describeType(part.type)} part)`)
  })
}

function assistantBlocks(message: JsonObject, at: string, build: TurnBlocks): JsonObject[] {
  const blocks: JsonObject[] = []
  if (Array.isArray(message.thinking_blocks))
    for (const [i, block] of message.thinking_blocks.entries())
      blocks.push(build.thinking(block, `${at}.thinking_blocks.${i}`))
  const text = textOf(message.content, `${at}.content`, build.refuse)
  if (text !== '') blocks.push(build.text(text))
  if (Array.isArray(message.tool_calls)) {
    for (const [i, call] of message.tool_calls.entries()) {
      const here = `${at}.tool_calls.${i}`
      if (!isJsonObject(call) || !isJsonObject(call.function) || typeof call.id !== 'string')
        throw invalid(here, 'A tool call needs an id and a function')
      const { name, arguments: args } = call.function
      if (typeof name !== 'string') throw invalid(`${here}.function.name`, 'Input should be a valid string')
      blocks.push(build.toolUse(call.id, name, toolInputOf(args, `${here}.function.arguments`)))
    }
  }
  return blocks
}

/** A function tool as the body declares it. */
export interface ToolFunction {
  readonly name: string
  readonly description?: string
  /** Its parameters' JSON schema (an empty object schema when it declares none). */
  readonly parameters: JsonObject
  readonly strict?: boolean
}

/** The body's `tools`: function tools only (any other kind is refused by name). */
export function toolFunctionsOf(tools: unknown, refuse: Refuse): ToolFunction[] {
  if (!Array.isArray(tools)) throw invalid('tools', 'Input should be a valid list')
  return tools.map((tool, i) => {
    const at = `tools.${i}`
    if (!isJsonObject(tool) || tool.type !== 'function' || !isJsonObject(tool.function))
      throw refuse(`${at} (a tool of type ${describeType(isJsonObject(tool) ? tool.type : undefined)})`)
    const fn = tool.function
    if (typeof fn.name !== 'string') throw invalid(`${at}.function.name`, 'Input should be a valid string')
    const parameters = fn.parameters ?? { type: 'object', properties: {} }
    if (!isJsonObject(parameters)) throw invalid(`${at}.function.parameters`, 'Input should be a valid object')
    return {
      name: fn.name,
      parameters,
      ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
      ...(typeof fn.strict === 'boolean' ? { strict: fn.strict } : {}),
    }
  })
}

/** The body's `tool_choice`: a mode, or the one function the model must call. */
export type ToolChoice = 'auto' | 'required' | 'none' | { readonly name: string }

export function toolChoiceOf(choice: unknown): ToolChoice {
  if (choice === 'auto' || choice === 'required' || choice === 'none') return choice
  if (isJsonObject(choice) && choice.type === 'function' && isJsonObject(choice.function)) {
    if (typeof choice.function.name !== 'string')
      throw invalid('tool_choice.function.name', 'Input should be a valid string')
    return { name: choice.function.name }
  }
  throw invalid('tool_choice', "Input should be 'auto', 'required', 'none' or a named function")
}

/** The body's `stop`: a string or a list of strings, as a list. */
export function stopsOf(value: unknown): string[] {
  const stops = typeof value === 'string' ? [value] : value
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
    throw invalid('stop', 'Input should be a string or a list of strings')
  return stops
}

/** A json_schema response_format's schema (with its name and description), or undefined for `text`. */
export function jsonSchemaFormatOf(
  format: unknown,
  refuse: Refuse,
  why: string,
): { readonly schema: JsonObject; readonly name?: string; readonly description?: string } | undefined {
  if (!isJsonObject(format)) throw invalid('response_format', 'Input should be a valid object')
  if (format.type === 'text') return undefined
  const spec = format.json_schema
  if (format.type === 'json_schema' && isJsonObject(spec) && isJsonObject(spec.schema))
    return {
      schema: spec.schema,
      ...(typeof spec.name === 'string' ? { name: spec.name } : {}),
      ...(typeof spec.description === 'string' ? { description: spec.description } : {}),
    }
  throw refuse(`response_format (of type ${describeType(format.type)})`, why)
}

/**
 * Any other member of the body: carried when it asks for nothing these upstreams lack (`n: 1`,
 * a zero penalty, `logprobs: false`), refused by its name otherwise, never dropped.
 */
export function refuseUnlessInert(name: string, value: unknown, refuse: Refuse, oneReply: string): void {
  switch (name) {
    case 'n':
      if (value !== 1) throw refuse('n', oneReply)
      return
    case 'presence_penalty':
    case 'frequency_penalty':
      if (value !== 0) throw refuse(name)
      return
    case 'logprobs':
      if (value !== false) throw refuse(name)
      return
    default:
      throw refuse(plain(name))
  }
}

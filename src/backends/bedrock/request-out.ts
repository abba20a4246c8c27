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
import { toolInputOf } from '../tool-arguments.ts'

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
const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s

export const refuse = (what: string, why = "Bedrock's Converse API has no equivalent"): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported by this model's upstream (Amazon Bedrock): ${why}.`,
    param: what.split(' ')[0] ?? what,
  })
const invalid = (param: string, what: string): GatewayError =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

type Role = 'user' | 'assistant'

/** The Converse body (modelId goes in the path) for a chat completions body, or a refusal (a GatewayError). */
export function converseRequestOf(chat: JsonObject): JsonObject {
  const system: JsonObject[] = []
  const turns: JsonObject[] = []
  const inference: JsonObject = {}
  const extra: JsonObject = {}
  const out: JsonObject = {}
  let tools: JsonObject[] | undefined
  let toolChoice: JsonObject | undefined
  for (const [name, value] of Object.entries(chat)) {
    if (value === undefined || value === null || IGNORED.has(name)) continue
    switch (name) {
      case 'messages':
        if (!Array.isArray(value)) throw invalid('messages', 'Input should be a valid list')
        for (const [i, message] of value.entries()) addTurn(turns, system, message, `messages.${i}`)
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
        const stops = typeof value === 'string' ? [value] : value
        if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
          throw invalid('stop', 'Input should be a string or a list of strings')
        if (stops.length > 0) inference.stopSequences = stops
        break
      }
      case 'tools':
        tools = toolsOf(value)
        break
      case 'tool_choice':
        toolChoice = toolChoiceOf(value)
        break
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
      case 'n':
        if (value !== 1) throw refuse('n', 'a Converse call has one reply')
        break
      case 'presence_penalty':
      case 'frequency_penalty':
        if (value !== 0) throw refuse(name)
        break
      case 'logprobs':
        if (value !== false) throw refuse(name)
        break
      case 'store':
        if (value !== false) throw refuse('store', 'the completion cannot be stored upstream')
        break
      default:
        throw refuse(name)
    }
  }
  out.messages = turns
  if (system.length > 0) out.system = system
  if (Object.keys(inference).length > 0) out.inferenceConfig = inference
  if (tools !== undefined && tools.length > 0)
    out.toolConfig = { tools, ...(toolChoice === undefined ? {} : { toolChoice }) }
  else if (toolChoice !== undefined) throw invalid('tool_choice', 'tool_choice needs tools')
  if (Object.keys(extra).length > 0) out.additionalModelRequestFields = extra
  return out
}

/** Adds one chat message to the turns (or the system prompt), merging it into the last turn when the role is the same. */
function addTurn(turns: JsonObject[], system: JsonObject[], message: unknown, at: string): void {
  if (!isJsonObject(message)) throw invalid(at, 'Input should be a valid object')
  let role: Role
  let blocks: JsonObject[]
  switch (message.role) {
    case 'system':
    case 'developer': {
      const text = textOf(message.content, `${at}.content`)
      if (text !== '') system.push({ text })
      return
    }
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
        {
          toolResult: {
            toolUseId: message.tool_call_id,
            content: [{ text: textOf(message.content, `${at}.content`) }],
          },
        },
      ]
      break
    default:
      throw invalid(`${at}.role`, "Input should be 'system', 'developer', 'user', 'assistant' or 'tool'")
  }
  if (blocks.length === 0) return
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
        throw refuse(`${at}.${i} (a ${typeName(part)} part)`, 'only text is carried here')
      return part.text
    })
    .join('')
}

function userBlocks(content: unknown, at: string): JsonObject[] {
  if (typeof content === 'string') return [{ text: content }]
  if (!Array.isArray(content)) throw invalid(at, 'Input should be a string or a list of content parts')
  return content.map((part, i) => {
    const here = `${at}.${i}`
    if (!isJsonObject(part)) throw invalid(here, 'Input should be a content part')
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw invalid(`${here}.text`, 'Input should be a valid string')
      return { text: part.text }
    }
    if (part.type === 'image_url') return imageOf(part.image_url, `${here}.image_url`)
    throw refuse(`${here} (a ${typeName(part)} part)`)
  })
}

/** An image_url part as an image block of bytes (base64 in Converse's JSON). */
function imageOf(image: unknown, at: string): JsonObject {
  if (!isJsonObject(image) || typeof image.url !== 'string')
    throw invalid(`${at}.url`, 'Input should be a valid string')
  const data = DATA_URL.exec(image.url)
  if (data === null)
    throw refuse(`${at} (a web address)`, 'Converse takes an image as its bytes (send a base64 data URL)')
  const format = IMAGE_FORMATS[(data[1] ?? '').toLowerCase()]
  if (format === undefined) throw refuse(`${at} (an image of type ${data[1]})`, 'Converse takes png, jpeg, gif or webp')
  return { image: { format, source: { bytes: data[2] } } }
}

function assistantBlocks(message: JsonObject, at: string): JsonObject[] {
  const blocks: JsonObject[] = []
  if (Array.isArray(message.thinking_blocks)) {
    for (const [i, block] of message.thinking_blocks.entries())
      blocks.push(reasoningOf(block, `${at}.thinking_blocks.${i}`))
  }
  const text = textOf(message.content, `${at}.content`)
  if (text !== '') blocks.push({ text })
  if (Array.isArray(message.tool_calls)) {
    for (const [i, call] of message.tool_calls.entries()) {
      const here = `${at}.tool_calls.${i}`
      if (!isJsonObject(call) || !isJsonObject(call.function) || typeof call.id !== 'string')
        throw invalid(here, 'A tool call needs an id and a function')
      const { name, arguments: args } = call.function
      if (typeof name !== 'string') throw invalid(`${here}.function.name`, 'Input should be a valid string')
      blocks.push({ toolUse: { toolUseId: call.id, name, input: toolInputOf(args, `${here}.function.arguments`) } })
    }
  }
  return blocks
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

function toolsOf(tools: unknown): JsonObject[] {
  if (!Array.isArray(tools)) throw invalid('tools', 'Input should be a valid list')
  return tools.map((tool, i) => {
    const at = `tools.${i}`
    if (!isJsonObject(tool) || tool.type !== 'function' || !isJsonObject(tool.function))
      throw refuse(`${at} (a tool of type ${isJsonObject(tool) ? String(tool.type) : 'unknown'})`)
    const fn = tool.function
    if (typeof fn.name !== 'string') throw invalid(`${at}.function.name`, 'Input should be a valid string')
    const schema = fn.parameters ?? { type: 'object', properties: {} }
    if (!isJsonObject(schema)) throw invalid(`${at}.function.parameters`, 'Input should be a valid object')
    return {
      toolSpec: {
        name: fn.name,
        ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
        inputSchema: { json: schema },
        ...(typeof fn.strict === 'boolean' ? { strict: fn.strict } : {}),
      },
    }
  })
}

function toolChoiceOf(choice: unknown): JsonObject {
  switch (choice) {
    case 'auto':
      return { auto: {} }
    case 'required':
      return { any: {} }
    case 'none':
      throw refuse("tool_choice 'none'", 'Converse cannot forbid calls to the tools it is given (send no tools)')
  }
  if (isJsonObject(choice) && choice.type === 'function' && isJsonObject(choice.function)) {
    if (typeof choice.function.name !== 'string')
      throw invalid('tool_choice.function.name', 'Input should be a valid string')
    return { tool: { name: choice.function.name } }
  }
  throw invalid('tool_choice', "Input should be 'auto', 'required', 'none' or a named function")
}

/** response_format: a JSON schema is Converse's outputConfig.textFormat; plain JSON mode has no counterpart. */
function formatOf(format: unknown): JsonObject {
  if (!isJsonObject(format)) throw invalid('response_format', 'Input should be a valid object')
  if (format.type === 'text') return {}
  const spec = format.json_schema
  if (format.type === 'json_schema' && isJsonObject(spec) && isJsonObject(spec.schema))
    return {
      outputConfig: {
        textFormat: {
          type: 'json_schema',
          structure: {
            jsonSchema: {
              // Converse takes the schema as a string of JSON.
              schema: JSON.stringify(spec.schema),
              ...(typeof spec.name === 'string' ? { name: spec.name } : {}),
              ...(typeof spec.description === 'string' ? { description: spec.description } : {}),
            },
          },
        },
      },
    }
  throw refuse(
    `response_format (of type ${String(format.type)})`,
    'Converse constrains replies to a JSON schema only (send json_schema)',
  )
}

function typeName(part: unknown): string {
  return isJsonObject(part) && typeof part.type === 'string' ? part.type : 'unknown'
}

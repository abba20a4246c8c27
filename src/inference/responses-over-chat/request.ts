// A Responses API request → the chat completion a chat-only deployment is sent (an
// anthropic or gemini backend: one whose adapter supports chat.completions and not
// responses). What the request asks for is carried over or refused with a 400 that names
// it (untranslatable_feature), never dropped: the backends then translate that chat
// completion to their upstream as they do for a chat caller, and refuse in turn what
// their upstream cannot do.
//
// Carried: `input` (a string; message items with input_text / output_text / input_image
// parts; function_call and function_call_output items, the tool round trip; a reasoning
// item this translation handed out, whose encrypted_content holds an anthropic backend's
// signed thinking), `instructions` (a system message first), function tools, tool_choice,
// parallel_tool_calls, text.format (json_schema, json_object), reasoning.effort (an
// anthropic backend's extended thinking, with a budget by effort), max_output_tokens,
// temperature, top_p, stream, user / safety_identifier. Echoed in the reply and not sent:
// metadata. Refused: what needs OpenAI's own store or servers (previous_response_id,
// conversation, item_reference, `store: true`, built-in tools such as web_search and
// file_search, a file_id image or an input_file), and the rest this file does not name.
import { gatewayError, type GatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { describeType, plain } from '../../protocols/anthropic/request-in.ts'
import { thinkingOfEffort } from '../../backends/anthropic/thinking.ts'
import { carriedOf, signatureHome } from './carrier.ts'

/** What the translation needs to know of the deployment: its adapter's type, and the cap it is sent. */
export interface ChatTarget {
  readonly type: string
  /** The output cap of a call that set none (Estimate.sentCap), when the deployment is sent one. */
  readonly sentCap?: number
}

export const refuse = (what: string, why: string): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported for this model, whose upstream speaks chat completions and not the Responses API: ${why}.`,
    param: what.split(' ')[0] ?? what,
  })
const invalid = (param: string, what: string): GatewayError =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

const NEEDS_STORE = 'it needs responses stored upstream, which this upstream has no store for'

/** Members read elsewhere (the gateway's own) or that change nothing upstream. */
const IGNORED = new Set(['model', 'stream_options', 'metadata', 'background', 'service_tier', 'prompt_cache_key'])

/** The chat completion body for a Responses body, or a refusal (a GatewayError). */
export function chatRequestOf(body: JsonObject, target: ChatTarget): JsonObject {
  const out: JsonObject = { model: body.model }
  const messages: JsonObject[] = []
  let effort: string | undefined
  for (const [name, value] of Object.entries(body)) {
    if (value === undefined || value === null || IGNORED.has(name)) continue
    switch (name) {
      case 'input':
      case 'instructions':
        break // below, in order: instructions first
      case 'max_output_tokens':
        out.max_tokens = value
        break
      case 'temperature':
      case 'top_p':
      case 'parallel_tool_calls':
        out[name] = value
        break
      case 'stream':
        if (value === true) out.stream = true
        break
      case 'user':
      case 'safety_identifier':
        out.user = value
        break
      case 'tools':
        if (!Array.isArray(value)) throw invalid('tools', 'Input should be a valid list')
        if (value.length > 0) out.tools = value.map((tool, i) => toolOf(tool, i))
        break
      case 'tool_choice':
        out.tool_choice = toolChoiceOf(value)
        break
      case 'text':
        Object.assign(out, textFormatOf(value))
        break
      case 'reasoning':
        effort = effortOf(value)
        break
      case 'include':
        checkIncludes(value)
        break
      case 'store':
        if (value !== false) throw refuse('store', `${NEEDS_STORE}; send 'store: false' or leave it out`)
        break
      case 'previous_response_id':
      case 'conversation':
        throw refuse(name, `${NEEDS_STORE}; send the conversation's items in 'input' instead`)
      case 'truncation':
        if (value !== 'disabled')
          throw refuse(`truncation ${JSON.stringify(plain(String(value)))}`, 'nothing is cut from a prompt here')
        break
      case 'top_logprobs':
        if (value !== 0) throw refuse(name, 'the reply carries no log probabilities')
        break
      default:
        throw refuse(plain(name), 'there is no counterpart in a chat completion')
    }
  }
  if (body.instructions !== undefined && body.instructions !== null) {
    if (typeof body.instructions !== 'string') throw invalid('instructions', 'Input should be a valid string')
    messages.push({ role: 'system', content: body.instructions })
  }
  messages.push(...messagesOf(body.input))
  out.messages = messages
  if (out.max_tokens === undefined && target.sentCap !== undefined) out.max_tokens = target.sentCap
  if (effort !== undefined) Object.assign(out, reasoningOf(effort, target, out.max_tokens))
  return out
}

/** `input` as chat messages: one user message for a string, else item by item. */
function messagesOf(input: unknown): JsonObject[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }]
  if (!Array.isArray(input)) throw invalid('input', 'Input should be a string or a list of input items')
  const messages: JsonObject[] = []
  /** Thought signatures reasoning items carried, for the function calls they belong to. */
  const signatures = new Map<string, string>()
  const assistant = (): JsonObject => {
    const last = messages.at(-1)
    if (last !== undefined && last.role === 'assistant') return last
    const turn: JsonObject = { role: 'assistant', content: null }
    messages.push(turn)
    return turn
  }
  for (const [i, item] of input.entries()) {
    const at = `input[${i}]`
    if (!isJsonObject(item)) throw invalid(at, 'Input should be a valid object')
    const type = item.type ?? 'message'
    switch (type) {
      case 'message': {
        const message = messageOf(item, at)
        if (message.role === 'assistant') {
          const turn = assistant()
          turn.content = joinText(turn.content, message.content)
        } else messages.push(message)
        break
      }
      case 'function_call': {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string')
          throw invalid(at, 'a function_call item needs call_id, name and arguments as strings')
        const turn = assistant()
        const calls = Array.isArray(turn.tool_calls) ? turn.tool_calls : (turn.tool_calls = [])
        const signature = signatures.get(item.call_id)
        calls.push({
          id: item.call_id,
          type: 'function',
          function: { name: item.name, arguments: item.arguments },
          ...(signature === undefined ? {} : signatureHome(signature)),
        })
        break
      }
      case 'function_call_output':
        if (typeof item.call_id !== 'string') throw invalid(`${at}.call_id`, 'Input should be a valid string')
        messages.push({ role: 'tool', tool_call_id: item.call_id, content: outputTextOf(item.output, `${at}.output`) })
        break
      case 'reasoning': {
        // Its summary is what the model said of its thinking, not something to tell it back;
        // what the upstream needs back rides in encrypted_content (carrier.ts). Signed
        // thinking opens the assistant turn that takes the calls and text that follow.
        const carried = carriedOf(item.encrypted_content)
        if (carried === undefined) break
        for (const [id, signature] of Object.entries(carried.signatures)) signatures.set(id, signature)
        if (carried.thinking.length > 0)
          messages.push({ role: 'assistant', content: null, thinking_blocks: [...carried.thinking] })
        break
      }
      case 'item_reference':
        throw refuse(`${at} (an item_reference)`, NEEDS_STORE)
      default:
        throw refuse(`${at}.type ${describeType(type)}`, 'only messages, function calls and their outputs can be sent')
    }
  }
  return messages
}

/** A message item (EasyInputMessage or a stored message's shape) as a chat message. */
function messageOf(item: JsonObject, at: string): JsonObject {
  const role = item.role
  if (role !== 'user' && role !== 'system' && role !== 'developer' && role !== 'assistant')
    throw invalid(`${at}.role`, "Input should be 'user', 'system', 'developer' or 'assistant'")
  const content = item.content
  if (typeof content === 'string') return { role, content }
  if (!Array.isArray(content)) throw invalid(`${at}.content`, 'Input should be a string or a list of content parts')
  const parts = content.map((part, j) => partOf(part, `${at}.content[${j}]`))
  if (role !== 'user') {
    if (!parts.every((p) => p.type === 'text'))
      throw refuse(`${at}.content (an image in a ${role} message)`, 'only a user message can carry an image')
    return { role, content: parts.map((p) => p.text as string).join('') }
  }
  return { role, content: parts }
}

function partOf(part: unknown, at: string): JsonObject {
  if (!isJsonObject(part)) throw invalid(at, 'Input should be a valid object')
  switch (part.type) {
    case 'input_text':
    case 'output_text':
      if (typeof part.text !== 'string') throw invalid(`${at}.text`, 'Input should be a valid string')
      return { type: 'text', text: part.text }
    case 'refusal':
      if (typeof part.refusal !== 'string') throw invalid(`${at}.refusal`, 'Input should be a valid string')
      return { type: 'text', text: part.refusal }
    case 'input_image': {
      if (typeof part.image_url !== 'string')
        throw refuse(
          `${at}.file_id (an image by file id)`,
          'send the image as image_url (a data: URL or a web address)',
        )
      const detail = typeof part.detail === 'string' && part.detail !== 'auto' ? { detail: part.detail } : {}
      return { type: 'image_url', image_url: { url: part.image_url, ...detail } }
    }
    default:
      throw refuse(`${at}.type ${describeType(part.type)}`, 'only text and images can be sent')
  }
}

/** Assistant text said over several items, as one turn's content. */
function joinText(before: unknown, more: unknown): unknown {
  if (typeof before !== 'string' || before === '') return more
  return typeof more === 'string' ? before + more : before
}

/** A function call's output: a string, or input_text parts (joined). */
function outputTextOf(output: unknown, at: string): string {
  if (typeof output === 'string') return output
  if (Array.isArray(output)) {
    return output
      .map((part, j) => {
        if (isJsonObject(part) && part.type === 'input_text' && typeof part.text === 'string') return part.text
        throw refuse(`${at}[${j}] (a part other than input_text)`, 'a tool result is text here')
      })
      .join('')
  }
  throw invalid(at, 'Input should be a string or a list of content parts')
}

/** A Responses function tool as a chat tool; a built-in tool (web_search, file_search, …) is refused by name. */
function toolOf(tool: unknown, i: number): JsonObject {
  if (!isJsonObject(tool)) throw invalid(`tools[${i}]`, 'Input should be a valid object')
  if (tool.type !== 'function')
    throw refuse(`tools[${i}] (the built-in tool ${describeType(tool.type)})`, "built-in tools run on OpenAI's servers")
  if (typeof tool.name !== 'string') throw invalid(`tools[${i}].name`, 'Input should be a valid string')
  const fn: JsonObject = { name: tool.name }
  if (typeof tool.description === 'string') fn.description = tool.description
  if (tool.parameters !== undefined && tool.parameters !== null) fn.parameters = tool.parameters
  if (typeof tool.strict === 'boolean') fn.strict = tool.strict
  return { type: 'function', function: fn }
}

function toolChoiceOf(choice: unknown): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice
  if (isJsonObject(choice) && choice.type === 'function' && typeof choice.name === 'string')
    return { type: 'function', function: { name: choice.name } }
  throw refuse(
    `tool_choice ${isJsonObject(choice) ? describeType(choice.type) : 'value'}`,
    'only auto, none, required or one function can be chosen',
  )
}

/** text.format as chat's response_format; text.verbosity has no counterpart. */
function textFormatOf(text: unknown): JsonObject {
  if (!isJsonObject(text)) throw invalid('text', 'Input should be a valid object')
  if (text.verbosity !== undefined && text.verbosity !== null && text.verbosity !== 'medium')
    throw refuse('text.verbosity', 'the upstream takes no verbosity')
  const format = text.format
  if (format === undefined || format === null) return {}
  if (!isJsonObject(format)) throw invalid('text.format', 'Input should be a valid object')
  switch (format.type) {
    case 'text':
      return {}
    case 'json_object':
      return { response_format: { type: 'json_object' } }
    case 'json_schema': {
      const schema: JsonObject = { name: format.name, schema: format.schema }
      if (typeof format.description === 'string') schema.description = format.description
      if (typeof format.strict === 'boolean') schema.strict = format.strict
      return { response_format: { type: 'json_schema', json_schema: schema } }
    }
    default:
      throw refuse(
        `text.format ${describeType(format.type)}`,
        'only text, json_object and json_schema can be asked for',
      )
  }
}

function effortOf(reasoning: unknown): string | undefined {
  if (!isJsonObject(reasoning)) throw invalid('reasoning', 'Input should be a valid object')
  const effort = reasoning.effort
  if (effort === undefined || effort === null || effort === 'none') return undefined
  if (typeof effort !== 'string') throw invalid('reasoning.effort', 'Input should be a valid string')
  return effort
}

/** The efforts a gemini backend carries as chat's reasoning_effort (backends/gemini/thinking-out.ts). */
const GEMINI_EFFORTS = new Set(['minimal', 'low', 'medium', 'high'])

/**
 * reasoning.effort where the upstream can think: an anthropic backend's extended thinking,
 * with a budget by effort held below the reply's cap (backends/anthropic/thinking.ts), or a
 * gemini backend's reasoning_effort, which it asks Gemini for as a thinkingConfig.
 * Elsewhere it is refused, not dropped.
 */
function reasoningOf(effort: string, target: ChatTarget, maxTokens: unknown): JsonObject {
  if (target.type === 'gemini') {
    if (!GEMINI_EFFORTS.has(effort))
      throw invalid('reasoning.effort', "Input should be 'none', 'minimal', 'low', 'medium' or 'high'")
    return { reasoning_effort: effort }
  }
  if (target.type !== 'anthropic')
    throw refuse(
      'reasoning.effort',
      `this model's ${plain(target.type)} upstream is not asked to think by this gateway`,
    )
  const thinking = thinkingOfEffort(effort, maxTokens, 'reasoning.effort')
  return thinking === undefined ? {} : { thinking }
}

/** include: what the reply can hold; encrypted reasoning is always there when there is thinking. */
function checkIncludes(include: unknown): void {
  if (!Array.isArray(include)) throw invalid('include', 'Input should be a valid list')
  for (const [i, what] of include.entries())
    if (what !== 'reasoning.encrypted_content')
      throw refuse(`include[${i}] ${JSON.stringify(plain(String(what)))}`, 'the reply cannot carry it')
}

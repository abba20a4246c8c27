// Anthropic's Messages request → the corridor's one internal call, an OpenAI chat
// completions request (envoy ai-gateway's request translator, the other way round). What
// the caller asked for is either carried over or refused with a 400 that names it
// (untranslatable_feature): never dropped, since a caller who asked for a PDF to be read or
// for extended thinking must not get an answer that silently did without.
//
// Carried: system (a string or text blocks), turns of text, images (base64 and url) and
// tool_use / tool_result blocks, tools and tool_choice, stop_sequences (→ stop),
// metadata.user_id (→ user), temperature, top_p, top_k, max_tokens, stream.
// output_config.format (a JSON schema) becomes response_format; output_config.effort "low" /
// "medium" becomes reasoning_effort (the upstream's adapter carries or refuses it).
// Accepted as no-ops, because they do not change what the model is asked: cache_control,
// on blocks, tools or the request, whatever its ttl or scope (an OpenAI-compatible server
// caches prompt prefixes by itself), `thinking` of type "disabled", and "adaptive" where the
// model cannot think (adaptive thinking lets the model decide, and this one thinks not at
// all), output_config.effort "high" (Anthropic's default), service_tier "auto" /
// "standard_only", speed "standard", a tool's eager_input_streaming (tool input streams as
// it comes anyway), `diagnostics` (the client's telemetry), and `context_management`
// (Anthropic's server-side trimming of a long context: the upstream is sent the whole
// conversation, as the caller sent it). Claude Code sends the last five on every request.
// output_config.effort and context_management also travel as they came in the chat body's
// private member (carried.ts), which only an anthropic backend reads: it sends them on as
// Anthropic has them, where reasoning_effort would have become a thinking budget.
// Extended thinking is carried only to a model whose every deployment can think (an
// anthropic backend or the built-in mock: options.thinking): `thinking` as it came, and an
// assistant turn's thinking and redacted_thinking blocks, signatures intact, as the message's
// thinking_blocks (the name LiteLLM gives them), which the anthropic backend puts back in
// place and the mock checks are its own.
import { gatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { ANTHROPIC_CARRIED } from './carried.ts'

/** Top-level members read (or accepted as no-ops) below; anything else is refused by name. */
const KNOWN = new Set([
  'model',
  'max_tokens',
  'messages',
  'system',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'metadata',
  'tools',
  'tool_choice',
  'thinking',
  'service_tier',
  'cache_control',
  'output_config',
  'speed',
  'context_management',
  'diagnostics',
])

/** Members of a custom tool (Anthropic's `Tool`) that have an OpenAI counterpart or change nothing. */
const TOOL_MEMBERS = new Set([
  'name',
  'description',
  'input_schema',
  'cache_control',
  'type',
  'strict',
  'eager_input_streaming',
])

const refuse = (
  what: string,
  why = 'the upstream of this model speaks OpenAI chat completions, which has no equivalent',
): Error =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported through this gateway: ${why}.`,
    param: what.split(' ')[0] ?? what,
  })
const invalid = (param: string, what: string): Error =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })
const required = (param: string): Error => gatewayError('missing_field', { message: `${param}: Field required`, param })

/** Which request: a message to create, or only its tokens to count (no max_tokens then). */
export type MessagesRequestKind = 'create' | 'count_tokens'

export interface InboundOptions {
  /** Every deployment of the model can think (routes.ts): extended thinking can be carried. */
  readonly thinking?: boolean
}

/** The chat completions body for a Messages request, or a refusal (a GatewayError). */
export function chatRequestOf(
  body: JsonObject,
  kind: MessagesRequestKind = 'create',
  options: InboundOptions = {},
): JsonObject {
  const thinking = options.thinking === true
  for (const name of Object.keys(body))
    if (!KNOWN.has(name)) throw refuse(plain(name), 'it has no OpenAI chat completions equivalent')
  const out: JsonObject = {}
  if (body.model === undefined) throw required('model')
  if (typeof body.model !== 'string' || body.model === '') throw invalid('model', 'Input should be a non-empty string')
  out.model = body.model

  if (kind === 'create') {
    if (body.max_tokens === undefined) throw required('max_tokens')
    if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1)
      throw invalid('max_tokens', 'Input should be an integer of at least 1')
    out.max_tokens = body.max_tokens
  }

  const messages: JsonObject[] = []
  if (body.system !== undefined) messages.push({ role: 'system', content: textOf(body.system, 'system') })
  if (body.messages === undefined) throw required('messages')
  if (!Array.isArray(body.messages)) throw invalid('messages', 'Input should be a valid list')
  for (const [i, message] of body.messages.entries()) messages.push(...turnOf(message, `messages.${i}`, thinking))
  out.messages = messages

  if (body.stream !== undefined) {
    if (typeof body.stream !== 'boolean') throw invalid('stream', 'Input should be a valid boolean')
    // Anthropic's message_delta carries the usage: the chat stream must report it (and the relay must not hide it).
    if (body.stream && kind === 'create') Object.assign(out, { stream: true, stream_options: { include_usage: true } })
  }
  for (const name of ['temperature', 'top_p', 'top_k'] as const) {
    const value = body[name]
    if (value === undefined) continue
    if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(name, 'Input should be a valid number')
    out[name] = value
  }
  if (body.stop_sequences !== undefined) {
    const stops = body.stop_sequences
    if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string'))
      throw invalid('stop_sequences', 'Input should be a valid list of strings')
    if (stops.length > 0) out.stop = stops
  }
  if (body.metadata !== undefined && body.metadata !== null) {
    if (!isJsonObject(body.metadata)) throw invalid('metadata', 'Input should be a valid object')
    for (const name of Object.keys(body.metadata)) if (name !== 'user_id') throw refuse(`metadata.${plain(name)}`)
    const user = body.metadata.user_id
    if (user !== undefined && user !== null) {
      if (typeof user !== 'string') throw invalid('metadata.user_id', 'Input should be a valid string')
      out.user = user
    }
  }
  Object.assign(out, thinkingOf(body.thinking, thinking))
  if (body.speed !== undefined && body.speed !== null && body.speed !== 'standard') throw refuse('speed')
  Object.assign(out, outputOf(body.output_config))
  const context = body.context_management
  if (context !== undefined && context !== null && !isJsonObject(context))
    throw invalid('context_management', 'Input should be a valid object')
  const effort = isJsonObject(body.output_config) ? body.output_config.effort : undefined
  const carried = {
    ...(typeof effort === 'string' ? { effort } : {}),
    ...(isJsonObject(context) ? { context_management: context } : {}),
  }
  if (Object.keys(carried).length > 0) out[ANTHROPIC_CARRIED] = carried
  if (body.service_tier !== undefined && body.service_tier !== 'auto' && body.service_tier !== 'standard_only')
    throw invalid('service_tier', "Input should be 'auto' or 'standard_only'")
  Object.assign(out, toolsOf(body.tools, body.tool_choice))
  return out
}

/**
 * Extended thinking cannot be asked of an OpenAI-compatible upstream (routes.ts says which
 * can): "enabled" is refused there, "adaptive" (think if and as much as the model sees fit)
 * asks nothing of a model that does not think; "disabled" asks nothing anywhere.
 */
function thinkingOf(thinking: unknown, carried: boolean): JsonObject {
  if (thinking === undefined || thinking === null) return {}
  if (isJsonObject(thinking) && thinking.type === 'disabled') return {}
  if (!carried && isJsonObject(thinking) && thinking.type === 'adaptive') return {}
  if (carried) {
    if (!isJsonObject(thinking) || typeof thinking.type !== 'string')
      throw invalid('thinking', 'Input should be a valid object with a type')
    return { thinking }
  }
  throw refuse(
    'thinking',
    'extended thinking needs an upstream that can think (an anthropic backend or the built-in mock), and this model is served by an OpenAI-compatible one',
  )
}

/**
 * output_config: a JSON schema for the reply is chat's response_format; an effort below
 * "high" is chat's reasoning_effort, "high" is Anthropic's default and asks nothing.
 */
function outputOf(config: unknown): JsonObject {
  if (config === undefined || config === null) return {}
  if (!isJsonObject(config)) throw invalid('output_config', 'Input should be a valid object')
  const out: JsonObject = {}
  for (const [name, value] of Object.entries(config)) {
    if (value === null || value === undefined) continue
    if (name === 'effort') {
      if (value === 'low' || value === 'medium') out.reasoning_effort = value
      else if (value !== 'high') throw refuse(`output_config.effort ${describeType(value)}`)
      continue
    }
    if (name !== 'format') throw refuse(`output_config.${plain(name)}`)
    if (!isJsonObject(value) || value.type !== 'json_schema' || !isJsonObject(value.schema))
      throw invalid('output_config.format', "Input should be {type: 'json_schema', schema: {...}}")
    out.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: value.schema, strict: true } }
  }
  return out
}

/** A string, or text blocks (cache_control allowed), as one string. */
function textOf(value: unknown, param: string): string {
  if (typeof value === 'string') return value
  if (!Array.isArray(value)) throw invalid(param, 'Input should be a string or a list of text blocks')
  return value
    .map((block, i) => {
      if (!isJsonObject(block) || block.type !== 'text' || typeof block.text !== 'string')
        throw invalid(`${param}.${i}`, 'Input should be a text block')
      checkTextBlock(block, `${param}.${i}`)
      return block.text
    })
    .join('\n\n')
}

function checkTextBlock(block: JsonObject, param: string): void {
  const citations = block.citations
  if (citations !== undefined && citations !== null && !(Array.isArray(citations) && citations.length === 0))
    throw refuse(`${param}.citations`)
}

/** One Anthropic turn as the chat messages that say the same: tool results become `tool` messages. */
function turnOf(message: unknown, param: string, thinking: boolean): JsonObject[] {
  if (!isJsonObject(message)) throw invalid(param, 'Input should be a valid object')
  const { role, content } = message
  if (role !== 'user' && role !== 'assistant' && role !== 'system')
    throw invalid(`${param}.role`, "Input should be 'user' or 'assistant'")
  if (role === 'system') return [{ role: 'system', content: textOf(content, `${param}.content`) }]
  if (typeof content === 'string') return [{ role, content }]
  if (!Array.isArray(content)) throw invalid(`${param}.content`, 'Input should be a string or a list of content blocks')
  return role === 'user'
    ? userTurn(content, `${param}.content`)
    : [assistantTurn(content, `${param}.content`, thinking)]
}

function userTurn(blocks: readonly unknown[], param: string): JsonObject[] {
  const results: JsonObject[] = []
  const parts: JsonObject[] = []
  for (const [i, block] of blocks.entries()) {
    const at = `${param}.${i}`
    if (!isJsonObject(block)) throw invalid(at, 'Input should be a content block')
    switch (block.type) {
      case 'text':
        if (typeof block.text !== 'string') throw invalid(`${at}.text`, 'Input should be a valid string')
        checkTextBlock(block, at)
        parts.push({ type: 'text', text: block.text })
        break
      case 'image':
        parts.push(imagePartOf(block, at))
        break
      case 'tool_result':
        results.push(toolResultOf(block, at))
        break
      default:
        throw refuse(`${at} (a ${describeType(block.type)} block)`)
    }
  }
  // Chat wants each tool's result right after the assistant's call, before any new user text.
  if (parts.length === 0) return results
  const onlyText = parts.every((p) => p.type === 'text')
  const content = onlyText && parts.length === 1 ? (parts[0]?.text as string) : parts
  return [...results, { role: 'user', content }]
}

function assistantTurn(blocks: readonly unknown[], param: string, thinking: boolean): JsonObject {
  const texts: string[] = []
  const calls: JsonObject[] = []
  const thoughts: JsonObject[] = []
  for (const [i, block] of blocks.entries()) {
    const at = `${param}.${i}`
    if (!isJsonObject(block)) throw invalid(at, 'Input should be a content block')
    if (block.type === 'text') {
      if (typeof block.text !== 'string') throw invalid(`${at}.text`, 'Input should be a valid string')
      checkTextBlock(block, at)
      texts.push(block.text)
    } else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string')
        throw invalid(at, 'A tool_use block needs a string id and name')
      const input = block.input ?? {}
      if (!isJsonObject(input)) throw invalid(`${at}.input`, 'Input should be a valid object')
      calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(input) } })
    } else if (thinking && (block.type === 'thinking' || block.type === 'redacted_thinking')) {
      // Kept whole: the upstream checks each block's signature against its text.
      thoughts.push(block)
    } else {
      throw refuse(`${at} (a ${describeType(block.type)} block)`)
    }
  }
  return {
    role: 'assistant',
    content: texts.length === 0 ? null : texts.join(''),
    ...(calls.length === 0 ? {} : { tool_calls: calls }),
    ...(thoughts.length === 0 ? {} : { thinking_blocks: thoughts }),
  }
}

/** An image block as chat's image_url part: base64 as a data URL, a URL as it is. */
function imagePartOf(block: JsonObject, at: string): JsonObject {
  const source = block.source
  if (!isJsonObject(source)) throw invalid(`${at}.source`, 'Input should be a valid object')
  if (source.type === 'base64') {
    if (typeof source.media_type !== 'string' || typeof source.data !== 'string')
      throw invalid(`${at}.source`, 'A base64 image needs a string media_type and data')
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } }
  }
  if (source.type === 'url') {
    if (typeof source.url !== 'string') throw invalid(`${at}.source.url`, 'Input should be a valid string')
    return { type: 'image_url', image_url: { url: source.url } }
  }
  throw refuse(`${at}.source (an image of source type ${describeType(source.type)})`)
}

/** A tool_result block as a `tool` message; an error result says so in its text, which chat has no flag for. */
function toolResultOf(block: JsonObject, at: string): JsonObject {
  if (typeof block.tool_use_id !== 'string') throw invalid(`${at}.tool_use_id`, 'Input should be a valid string')
  const content = block.content
  let text: string
  if (content === undefined || content === null) text = ''
  else if (typeof content === 'string') text = content
  else if (Array.isArray(content)) {
    text = content
      .map((part, j) => {
        if (!isJsonObject(part) || part.type !== 'text' || typeof part.text !== 'string')
          throw refuse(
            `${at}.content.${j} (a ${describeType(isJsonObject(part) ? part.type : undefined)} block in a tool result)`,
            'an OpenAI chat tool message carries text only',
          )
        return part.text
      })
      .join('\n')
  } else throw invalid(`${at}.content`, 'Input should be a string or a list of content blocks')
  return { role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${text}` : text }
}

function toolsOf(tools: unknown, choice: unknown): JsonObject {
  const out: JsonObject = {}
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools)) throw invalid('tools', 'Input should be a valid list')
    out.tools = tools.map((tool, i) => {
      const at = `tools.${i}`
      if (!isJsonObject(tool)) throw invalid(at, 'Input should be a valid object')
      if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom')
        throw refuse(
          `${at} (the server tool ${describeType(tool.type)})`,
          "server tools run on Anthropic's servers, and this model is served by an OpenAI-compatible one",
        )
      for (const name of Object.keys(tool)) if (!TOOL_MEMBERS.has(name)) throw refuse(`${at}.${plain(name)}`)
      if (typeof tool.name !== 'string') throw invalid(`${at}.name`, 'Input should be a valid string')
      if (!isJsonObject(tool.input_schema)) throw invalid(`${at}.input_schema`, 'Input should be a valid object')
      return {
        type: 'function',
        function: {
          name: tool.name,
          ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
          parameters: tool.input_schema,
          ...(typeof tool.strict === 'boolean' ? { strict: tool.strict } : {}),
        },
      }
    })
  }
  if (choice === undefined || choice === null) return out
  if (!isJsonObject(choice)) throw invalid('tool_choice', 'Input should be a valid object')
  switch (choice.type) {
    case 'auto':
      out.tool_choice = 'auto'
      break
    case 'any':
      out.tool_choice = 'required'
      break
    case 'none':
      out.tool_choice = 'none'
      break
    case 'tool':
      if (typeof choice.name !== 'string') throw invalid('tool_choice.name', 'Input should be a valid string')
      out.tool_choice = { type: 'function', function: { name: choice.name } }
      break
    default:
      throw invalid('tool_choice.type', "Input should be 'auto', 'any', 'tool' or 'none'")
  }
  if (choice.disable_parallel_tool_use === true && out.tools !== undefined) out.parallel_tool_calls = false
  return out
}

/** A member's name from the body, echoed only when plain (a refusal must not carry arbitrary text back). */
export function plain(name: string): string {
  return /^[\w.-]{1,64}$/.test(name) ? name : '(an unprintable member)'
}

/** A block or source type, echoed only when plain. */
export function describeType(type: unknown): string {
  return typeof type === 'string' && /^[\w.-]{1,64}$/.test(type) ? `'${type}'` : 'unknown'
}

// An OpenAI chat completions request (what the corridor sends every backend) as Google's
// Gemini API takes it (`models/{model}:generateContent`, ai.google.dev/api/generate-content):
// system and developer messages become `systemInstruction`, the turns become `contents` with
// the roles user and model, images inline data, tools function declarations, tool_choice
// the function-calling config, the sampling members `generationConfig`, and reasoning_effort
// its thinkingConfig (thinking-out.ts). What Gemini
// cannot be asked for is refused with untranslatable_feature, naming it: never dropped.
import { gatewayError, type GatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'
import { geminiSchemaOf } from './schema-out.ts'
import { thinkingConfigOf } from './thinking-out.ts'

/**
 * Members of a chat completions request this translation carries, or that change nothing in
 * what the model generates: `user` and `metadata` are the caller's bookkeeping, and
 * `stream_options` only asks for the usage chunk, which every translated stream ends with.
 */
const KNOWN = new Set([
  'model',
  'messages',
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'n',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'seed',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  'reasoning_effort',
  'user',
  'metadata',
  'store',
])

/**
 * Members of a message this translation carries (`refusal` and `audio` only when empty), and
 * those of a reply a client sends back whole that tell the model nothing it needs:
 * `annotations` are citations shown to the user, `reasoning_content` the thoughts of an
 * earlier turn (Gemini takes its reasoning back by the calls' thought signatures, not as text).
 */
const MESSAGE_MEMBERS = new Set([
  'role',
  'content',
  'tool_calls',
  'tool_call_id',
  'refusal',
  'audio',
  'annotations',
  'reasoning_content',
])

/** Where the signature Gemini puts on a function call travels in OpenAI's shape (as Google's own OpenAI layer does). */
export const SIGNATURE_HOME = 'extra_content'

export const refuse = (what: string, why = 'Gemini has no equivalent'): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${what} is not supported by this model's upstream (Google Gemini): ${why}.`,
    param: what.split(' ')[0] ?? what,
  })
const invalid = (param: string, what: string): GatewayError =>
  gatewayError('invalid_body', { message: `${param}: ${what}`, param })

type Part = JsonObject
interface Content {
  readonly role: 'user' | 'model'
  readonly parts: Part[]
}

/**
 * The generateContent body for a chat completions body (the same for the streaming method);
 * `model` is the upstream's model, whose generation says how thinking is asked for.
 */
export function geminiRequestOf(body: JsonObject, model: string): JsonObject {
  for (const name of Object.keys(body)) if (!KNOWN.has(name)) throw refuse(name)
  if (body.store === true) throw refuse('store', 'the completion cannot be stored upstream')
  if (body.parallel_tool_calls === false)
    throw refuse('parallel_tool_calls: false', 'Gemini may always call several functions at once')
  const messages = body.messages
  if (!Array.isArray(messages)) throw invalid('messages', 'must be an array')
  const system: Part[] = []
  const contents: Content[] = []
  /** The function name of each tool call id the assistant made: a function response names it. */
  const callNames = new Map<string, string>()
  messages.forEach((message: unknown, i) => {
    if (!isJsonObject(message)) throw invalid(`messages[${i}]`, 'must be an object')
    const at = `messages[${i}]`
    for (const [member, value] of Object.entries(message))
      if (value !== null && !MESSAGE_MEMBERS.has(member))
        throw refuse(`${at}.${member}`, "Gemini's turns carry no such member")
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(...textParts(message.content, `${at}.content`))
        return
      case 'user':
        push(contents, 'user', userParts(message.content, `${at}.content`))
        return
      case 'assistant':
        push(contents, 'model', modelParts(message, at, callNames))
        return
      case 'tool':
        push(contents, 'user', [functionResponse(message, at, callNames)])
        return
      default:
        throw refuse(`${at}.role ${JSON.stringify(message.role)}`)
    }
  })
  const out: JsonObject = { contents }
  if (system.length > 0) out.systemInstruction = { parts: system }
  const tools = functionDeclarations(body.tools)
  if (tools !== undefined) out.tools = [{ functionDeclarations: tools }]
  const toolConfig = toolConfigOf(body.tool_choice)
  if (toolConfig !== undefined) out.toolConfig = toolConfig
  const generation = generationConfigOf(body)
  const thinking = thinkingConfigOf(body.reasoning_effort, model, generation.maxOutputTokens)
  if (thinking !== undefined) generation.thinkingConfig = thinking
  if (Object.keys(generation).length > 0) out.generationConfig = generation
  return out
}

/** Consecutive turns of one role are one content: Gemini's turns alternate. */
function push(contents: Content[], role: Content['role'], parts: Part[]): void {
  const last = contents.at(-1)
  if (last?.role === role) last.parts.push(...parts)
  else contents.push({ role, parts })
}

function textParts(content: unknown, at: string): Part[] {
  if (typeof content === 'string') return [{ text: content }]
  if (!Array.isArray(content)) throw invalid(at, 'must be a string or an array of parts')
  return content.map((part: unknown, j) => {
    if (!isJsonObject(part) || part.type !== 'text' || typeof part.text !== 'string')
      throw refuse(`${at}[${j}] (a part other than text)`, 'only text can be said here')
    return { text: part.text }
  })
}

function userParts(content: unknown, at: string): Part[] {
  if (typeof content === 'string') return [{ text: content }]
  if (!Array.isArray(content)) throw invalid(at, 'must be a string or an array of parts')
  return content.map((part: unknown, j) => {
    const where = `${at}[${j}]`
    if (!isJsonObject(part)) throw invalid(where, 'must be an object')
    if (part.type === 'text' && typeof part.text === 'string') return { text: part.text }
    if (part.type === 'image_url') return imagePart(part.image_url, where)
    if (part.type === 'input_audio') return audioPart(part.input_audio, where)
    throw refuse(`${where}.type ${JSON.stringify(part.type)}`)
  })
}

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+);base64,(.*)$/s

function imagePart(image: unknown, at: string): Part {
  const url = isJsonObject(image) ? image.url : undefined
  if (typeof url !== 'string') throw invalid(`${at}.image_url.url`, 'must be a string')
  const match = DATA_URL.exec(url)
  if (match === null)
    throw refuse(`${at}.image_url (a web address)`, 'its API takes images inline: send a base64 data: URL')
  return { inlineData: { mimeType: match[1], data: match[2] } }
}

function audioPart(audio: unknown, at: string): Part {
  if (!isJsonObject(audio) || typeof audio.data !== 'string' || (audio.format !== 'wav' && audio.format !== 'mp3'))
    throw invalid(`${at}.input_audio`, 'must have base64 data and a format of wav or mp3')
  return { inlineData: { mimeType: `audio/${audio.format}`, data: audio.data } }
}

function modelParts(message: JsonObject, at: string, callNames: Map<string, string>): Part[] {
  if (message.refusal !== undefined && message.refusal !== null) throw refuse(`${at}.refusal`)
  if (message.audio !== undefined && message.audio !== null) throw refuse(`${at}.audio`)
  const parts: Part[] =
    message.content === undefined || message.content === null ? [] : textParts(message.content, `${at}.content`)
  const calls = message.tool_calls
  if (calls !== undefined && calls !== null) {
    if (!Array.isArray(calls)) throw invalid(`${at}.tool_calls`, 'must be an array')
    calls.forEach((call: unknown, k) => parts.push(functionCall(call, `${at}.tool_calls[${k}]`, callNames)))
  }
  // An empty turn (content null, no calls) says nothing; Gemini refuses a content with no parts.
  return parts.length > 0 ? parts : [{ text: '' }]
}

function functionCall(call: unknown, at: string, callNames: Map<string, string>): Part {
  if (!isJsonObject(call) || call.type !== 'function' || !isJsonObject(call.function))
    throw refuse(`${at}.type (a tool call other than a function)`)
  const { name, arguments: args } = call.function
  if (typeof name !== 'string' || typeof args !== 'string')
    throw invalid(`${at}.function`, 'must have a name and arguments')
  let parsed: unknown
  try {
    parsed = args.trim() === '' ? {} : JSON.parse(args)
  } catch {
    throw invalid(`${at}.function.arguments`, 'must be a JSON object')
  }
  if (!isJsonObject(parsed)) throw invalid(`${at}.function.arguments`, 'must be a JSON object')
  if (typeof call.id === 'string') callNames.set(call.id, name)
  const part: Part = { functionCall: { name, args: parsed, ...(typeof call.id === 'string' ? { id: call.id } : {}) } }
  const signature = signatureOf(call)
  if (signature !== undefined) part.thoughtSignature = signature
  return part
}

/** The thought signature a reply put on a tool call (Gemini 3 wants it back with the call). */
function signatureOf(call: JsonObject): string | undefined {
  const extra = call[SIGNATURE_HOME]
  const google = isJsonObject(extra) ? extra.google : undefined
  const signature = isJsonObject(google) ? google.thought_signature : undefined
  return typeof signature === 'string' ? signature : undefined
}

function functionResponse(message: JsonObject, at: string, callNames: Map<string, string>): Part {
  const id = message.tool_call_id
  if (typeof id !== 'string') throw invalid(`${at}.tool_call_id`, 'must be a string')
  const name = callNames.get(id)
  if (name === undefined)
    throw invalid(`${at}.tool_call_id`, `no earlier assistant message made the tool call ${JSON.stringify(id)}`)
  const text = textParts(message.content, `${at}.content`)
    .map((p) => p.text as string)
    .join('')
  // Gemini takes a function's result as an object: JSON that is one stays one, anything else is the output.
  let response: JsonObject = { output: text }
  try {
    const parsed: unknown = JSON.parse(text)
    if (isJsonObject(parsed)) response = parsed
  } catch {
    // Plain text: the output member above.
  }
  return { functionResponse: { id, name, response } }
}

function functionDeclarations(tools: unknown): JsonObject[] | undefined {
  if (tools === undefined || tools === null) return undefined
  if (!Array.isArray(tools)) throw invalid('tools', 'must be an array')
  if (tools.length === 0) return undefined
  return tools.map((tool: unknown, i) => {
    if (!isJsonObject(tool) || tool.type !== 'function' || !isJsonObject(tool.function))
      throw refuse(`tools[${i}].type (a tool other than a function)`)
    const fn = tool.function
    if (typeof fn.name !== 'string') throw invalid(`tools[${i}].function.name`, 'must be a string')
    const declaration: JsonObject = { name: fn.name }
    if (typeof fn.description === 'string') declaration.description = fn.description
    // `strict` asks for arguments that match the schema, which Gemini's declared parameters already are.
    if (isJsonObject(fn.parameters) && Object.keys(fn.parameters).length > 0)
      declaration.parameters = geminiSchemaOf(fn.parameters, `tools[${i}].function.parameters`)
    return declaration
  })
}

function toolConfigOf(choice: unknown): JsonObject | undefined {
  if (choice === undefined || choice === null) return undefined
  const mode = (m: string, names?: string[]): JsonObject => ({
    functionCallingConfig: { mode: m, ...(names === undefined ? {} : { allowedFunctionNames: names }) },
  })
  if (choice === 'auto') return mode('AUTO')
  if (choice === 'none') return mode('NONE')
  if (choice === 'required') return mode('ANY')
  if (isJsonObject(choice) && choice.type === 'function' && isJsonObject(choice.function)) {
    const name = choice.function.name
    if (typeof name !== 'string') throw invalid('tool_choice.function.name', 'must be a string')
    return mode('ANY', [name])
  }
  throw refuse(`tool_choice ${JSON.stringify(choice)}`)
}

function generationConfigOf(body: JsonObject): JsonObject {
  const config: JsonObject = {}
  const number = (member: string, to: string): void => {
    const value = body[member]
    if (value === undefined || value === null) return
    if (typeof value !== 'number') throw invalid(member, 'must be a number')
    config[to] = value
  }
  number('temperature', 'temperature')
  number('top_p', 'topP')
  number('presence_penalty', 'presencePenalty')
  number('frequency_penalty', 'frequencyPenalty')
  number('seed', 'seed')
  number('n', 'candidateCount')
  // max_completion_tokens is the newer name; a caller that sends both means it.
  number('max_tokens', 'maxOutputTokens')
  number('max_completion_tokens', 'maxOutputTokens')
  const stop = body.stop
  if (typeof stop === 'string') config.stopSequences = [stop]
  else if (Array.isArray(stop) && stop.length > 0) config.stopSequences = stop
  Object.assign(config, responseFormatOf(body.response_format))
  return config
}

function responseFormatOf(format: unknown): JsonObject {
  if (format === undefined || format === null) return {}
  if (!isJsonObject(format)) throw invalid('response_format', 'must be an object')
  if (format.type === 'text') return {}
  if (format.type === 'json_object') return { responseMimeType: 'application/json' }
  if (format.type === 'json_schema' && isJsonObject(format.json_schema)) {
    const schema = format.json_schema.schema
    if (!isJsonObject(schema)) return { responseMimeType: 'application/json' }
    return {
      responseMimeType: 'application/json',
      responseSchema: geminiSchemaOf(schema, 'response_format.json_schema.schema'),
    }
  }
  throw refuse(`response_format.type ${JSON.stringify(format.type)}`)
}

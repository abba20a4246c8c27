// The tools, tool choice and output format of a request, read from either API's shape
// into reply-plan.ts's terms. Chat nests a function under `function` and puts the format
// in `response_format`; the Responses API flattens the function and puts the format in
// `text.format`. Chat's legacy `functions`/`function_call` are read too.
import { contentText } from '../../tokenizer/tokens.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { optionalBoolean, optionalObject } from './params.ts'
import type { FunctionTool, OutputFormat, PlanInput, ToolChoice } from './reply-plan.ts'

type Source = Readonly<Record<string, unknown>>

export interface ChatToolRequest extends PlanInput {
  /** The request used `functions`: the reply is a `function_call`, not `tool_calls`. */
  readonly legacy: boolean
  /** The parameter tool_choice came in, for refusals: "tool_choice" or "function_call". */
  readonly choiceParam: string
}

export function chatToolRequest(body: Source, messages: readonly unknown[]): ChatToolRequest {
  const tools = functionTools(body.tools, 'tools', (tool) => tool.function, '.function')
  const legacy = tools.length === 0 && body.functions !== undefined && body.functions !== null
  const offered = legacy ? functionTools(body.functions, 'functions', (f) => f, '') : tools
  const choiceParam = legacy ? 'function_call' : 'tool_choice'
  const selected = legacy ? legacyChoice(body.function_call, offered) : chatChoice(body.tool_choice, offered)
  const last = messages.at(-1)
  return {
    tools: selected.tools,
    choice: selected.choice,
    parallel: optionalBoolean(body, 'parallel_tool_calls') ?? true,
    afterToolResult: roleOf(last) === 'tool' || roleOf(last) === 'function',
    lastUserText: contentText(lastWithRole(messages, 'user')?.content),
    format: chatFormat(body),
    legacy,
    choiceParam,
  }
}

export function responsesToolRequest(body: Source): PlanInput {
  const input = body.input
  const items: readonly unknown[] =
    typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? input : []
  const last = items.at(-1)
  const lastType = isRecord(last) ? last.type : undefined
  const selected = responsesChoice(
    body.tool_choice,
    functionTools(body.tools, 'tools', (tool) => tool, ''),
  )
  return {
    tools: selected.tools,
    choice: selected.choice,
    parallel: optionalBoolean(body, 'parallel_tool_calls') ?? true,
    afterToolResult: lastType === 'function_call_output' || roleOf(last) === 'tool',
    lastUserText: contentText(lastWithRole(items, 'user')?.content),
    format: responsesFormat(body),
  }
}

function isRecord(value: unknown): value is Source {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function roleOf(message: unknown): unknown {
  return isRecord(message) ? message.role : undefined
}

function lastWithRole(messages: readonly unknown[], role: string): Source | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]
    if (isRecord(message) && message.role === role) return message
  }
  return undefined
}

/**
 * The function tools of a list, each read through `fn` (chat nests the function one level
 * down). Tools of other kinds (web_search, custom, ...) are skipped: the mock never calls them.
 */
function functionTools(value: unknown, param: string, fn: (tool: Source) => unknown, nested: string): FunctionTool[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value))
    throw invalidRequest(`Invalid type for '${param}': expected an array.`, param, 'invalid_type')
  const tools: FunctionTool[] = []
  for (const [i, tool] of value.entries()) {
    if (!isRecord(tool))
      throw invalidRequest(`Invalid type for '${param}[${i}]': expected an object.`, `${param}[${i}]`, 'invalid_type')
    // Legacy `functions` entries have no type; tools must say "function" to be one.
    if (param === 'tools' && tool.type !== 'function') continue
    const definition = fn(tool)
    if (!isRecord(definition)) throw missingParameter(`${param}[${i}]${nested}`)
    const name = definition.name
    if (typeof name !== 'string' || name === '') throw missingParameter(`${param}[${i}]${nested}.name`)
    tools.push({ name, parameters: definition.parameters })
  }
  return tools
}

interface Selection {
  readonly tools: readonly FunctionTool[]
  readonly choice: ToolChoice
}

function invalidChoice(param: string): Error {
  return invalidRequest(
    `Invalid value for '${param}': expected "none", "auto", "required", or an object naming a function.`,
    param,
  )
}

function chatChoice(value: unknown, tools: readonly FunctionTool[]): Selection {
  if (value === undefined || value === null) return { tools, choice: 'auto' }
  if (value === 'none' || value === 'auto' || value === 'required') return { tools, choice: value }
  if (
    isRecord(value) &&
    value.type === 'function' &&
    isRecord(value.function) &&
    typeof value.function.name === 'string'
  ) {
    return { tools, choice: { name: value.function.name } }
  }
  if (isRecord(value) && value.type === 'allowed_tools' && isRecord(value.allowed_tools)) {
    const { mode, tools: allowed } = value.allowed_tools
    return allowedTools(
      tools,
      mode,
      allowed,
      (t) => (isRecord(t.function) ? t.function.name : undefined),
      'tool_choice',
    )
  }
  throw invalidChoice('tool_choice')
}

function responsesChoice(value: unknown, tools: readonly FunctionTool[]): Selection {
  if (value === undefined || value === null) return { tools, choice: 'auto' }
  if (value === 'none' || value === 'auto' || value === 'required') return { tools, choice: value }
  if (isRecord(value) && value.type === 'function' && typeof value.name === 'string')
    return { tools, choice: { name: value.name } }
  if (isRecord(value) && value.type === 'allowed_tools') {
    return allowedTools(tools, value.mode, value.tools, (t) => t.name, 'tool_choice')
  }
  // A hosted tool (web search, file search, ...): the mock has none to call, so it answers.
  if (isRecord(value) && typeof value.type === 'string') return { tools, choice: 'none' }
  throw invalidChoice('tool_choice')
}

/** tool_choice "allowed_tools": the offered functions narrowed to those listed, with its mode. */
function allowedTools(
  tools: readonly FunctionTool[],
  mode: unknown,
  allowed: unknown,
  nameOf: (tool: Source) => unknown,
  param: string,
): Selection {
  if ((mode !== 'auto' && mode !== 'required') || !Array.isArray(allowed)) throw invalidChoice(param)
  const names = new Set(
    allowed
      .filter(isRecord)
      .map(nameOf)
      .filter((n): n is string => typeof n === 'string'),
  )
  return { tools: tools.filter((t) => names.has(t.name)), choice: mode }
}

function legacyChoice(value: unknown, tools: readonly FunctionTool[]): Selection {
  if (value === undefined || value === null || value === 'auto') return { tools, choice: 'auto' }
  if (value === 'none') return { tools, choice: 'none' }
  if (isRecord(value) && typeof value.name === 'string') return { tools, choice: { name: value.name } }
  throw invalidChoice('function_call')
}

function chatFormat(body: Source): OutputFormat {
  const format = optionalObject(body, 'response_format')
  if (format === undefined) return { type: 'text' }
  return readFormat(format, 'response_format', () => {
    const spec = optionalObject(format, 'json_schema')
    if (spec === undefined) throw missingParameter('response_format.json_schema')
    return spec.schema
  })
}

function responsesFormat(body: Source): OutputFormat {
  const text = optionalObject(body, 'text')
  const format = text === undefined ? undefined : optionalObject(text, 'format')
  if (format === undefined) return { type: 'text' }
  return readFormat(format, 'text.format', () => format.schema)
}

function readFormat(format: Source, param: string, schemaOf: () => unknown): OutputFormat {
  switch (format.type) {
    case 'text':
      return { type: 'text' }
    case 'json_object':
      return { type: 'json_object' }
    // No schema: any JSON would do; an object is what a client asking for JSON expects.
    case 'json_schema':
      return { type: 'json_schema', schema: schemaOf() ?? { type: 'object' } }
    default:
      throw invalidRequest(
        `Invalid value for '${param}.type': expected "text", "json_object" or "json_schema".`,
        `${param}.type`,
      )
  }
}

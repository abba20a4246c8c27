// What kind of reply the mock gives, decided from the request alone so that it is the
// same every time: plain text, JSON for a response format, or calls of the functions
// offered as tools. Reading the two APIs' ways of saying it is in request-tools.ts.
//
// The rule, in order:
// 1. Tools are offered and tool_choice is not "none":
//    - a named function (tool_choice {type: "function", ...}) is called;
//    - "required" calls a tool every time;
//    - "auto" (the default) calls a tool unless the conversation ends with a tool's
//      result, which it answers in text, as a model reporting back would. So an agent
//      loop (the SDK's runTools) ends after one round.
//    Which tools: those whose names the last user message mentions (in the order they
//    were offered), else the first one; only the first of them when parallel_tool_calls
//    is false.
// 2. Else a json_schema response format gets JSON valid against its schema, json_object
//    gets a JSON object.
// 3. Else text.
import { invalidRequest } from './errors.ts'

export interface FunctionTool {
  readonly name: string
  /** The JSON Schema of the arguments; absent means no arguments. */
  readonly parameters: unknown
}

export type ToolChoice = 'none' | 'auto' | 'required' | { readonly name: string }

export type OutputFormat =
  | { readonly type: 'text' }
  | { readonly type: 'json_object' }
  | { readonly type: 'json_schema'; readonly schema: unknown }

export interface PlanInput {
  /** Function tools only; other kinds (web search, ...) are offered but never called by the mock. */
  readonly tools: readonly FunctionTool[]
  readonly choice: ToolChoice
  readonly parallel: boolean
  /** The conversation ends with a tool's (or legacy function's) result. */
  readonly afterToolResult: boolean
  /** The text of the last user message, for tools named in it. */
  readonly lastUserText: string
  readonly format: OutputFormat
}

export type ReplyPlan =
  | { readonly kind: 'text' }
  | { readonly kind: 'json'; readonly format: Exclude<OutputFormat, { type: 'text' }> }
  | { readonly kind: 'tools'; readonly tools: readonly FunctionTool[] }

export function planReply(input: PlanInput, choiceParam: string): ReplyPlan {
  const { tools, choice } = input
  if (typeof choice === 'object') {
    const tool = tools.find((t) => t.name === choice.name)
    // OpenAI refuses a named function that is not among the tools; so does the mock.
    if (tool === undefined)
      throw invalidRequest(
        `Invalid value for '${choiceParam}': no function named in it is among the tools.`,
        choiceParam,
      )
    return { kind: 'tools', tools: [tool] }
  }
  if (tools.length > 0 && (choice === 'required' || (choice === 'auto' && !input.afterToolResult))) {
    const named = tools.filter((t) => mentions(input.lastUserText, t.name))
    const chosen = named.length > 0 ? named : tools.slice(0, 1)
    return { kind: 'tools', tools: input.parallel ? chosen : chosen.slice(0, 1) }
  }
  if (input.format.type !== 'text') return { kind: 'json', format: input.format }
  return { kind: 'text' }
}

/** The name as a word of its own ("get_weather" in "call get_weather, then..."), any case. */
function mentions(text: string, name: string): boolean {
  if (name === '') return false
  // A literal (escaped) between lookarounds: linear in the text, whatever the name holds.
  const literal = name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  return new RegExp(`(?<![\\w-])${literal}(?![\\w-])`, 'iu').test(text)
}

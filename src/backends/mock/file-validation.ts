// GET /files/validate/{id}: whether a file is a fine-tuning dataset the provider's
// fine-tuning guide asks for: JSONL, one chat example per line, in OpenAI's chat format
// (a `messages` list of system/user/assistant/tool messages, at least one from the
// assistant; `weight` 0 or 1 on assistant messages only). Every line is checked; the first
// MAX_REPORTED problems are listed with their line numbers, and all are counted.
//
// The file is read as a stream, line by line, so a large upload never sits whole in
// memory: a line longer than MAX_LINE_CHARS is reported and skipped unread.
import { createReadStream } from 'node:fs'
import type { FileValidationObject, ValidationProblem } from '../../api/files.ts'
import { isJsonObject } from '../../json.ts'

const MAX_REPORTED = 20
const MAX_LINE_CHARS = 8 * 1024 * 1024
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool'])
const MESSAGE_KEYS = new Set([
  'role',
  'content',
  'name',
  'weight',
  'tool_calls',
  'tool_call_id',
  'function_call',
  'refusal',
])

type Problem = ValidationProblem

/** What is wrong with one example (a parsed line), or null. */
function exampleProblem(line: number, example: unknown): Problem | null {
  const at = (code: string, message: string): Problem => ({ line, code, message })
  if (!isJsonObject(example)) return at('not_an_object', 'The line is not a JSON object.')
  const messages = example.messages
  if (!Array.isArray(messages) || messages.length === 0)
    return at('missing_messages', 'The example has no `messages` list (or it is empty).')
  let assistant = false
  for (const [index, message] of messages.entries()) {
    const where = `messages[${index}]`
    if (!isJsonObject(message)) return at('invalid_message', `${where} is not an object.`)
    const unknown = Object.keys(message).find((key) => !MESSAGE_KEYS.has(key))
    if (unknown !== undefined) return at('unrecognized_key', `${where} has a key the format does not know.`)
    if (typeof message.role !== 'string' || !ROLES.has(message.role))
      return at(
        'unrecognized_role',
        `${where} has no role, or one other than system, developer, user, assistant or tool.`,
      )
    const calls =
      message.role === 'assistant' && (message.tool_calls !== undefined || message.function_call !== undefined)
    const content = message.content
    const hasContent = typeof content === 'string' ? content !== '' : Array.isArray(content) && content.length > 0
    if (!hasContent && !calls) return at('missing_content', `${where} has no content.`)
    if (message.weight !== undefined) {
      if (message.role !== 'assistant') return at('invalid_weight', `${where}: only assistant messages take a weight.`)
      if (message.weight !== 0 && message.weight !== 1) return at('invalid_weight', `${where}: weight must be 0 or 1.`)
    }
    if (message.role === 'assistant') assistant = true
  }
  if (!assistant) return at('missing_assistant_message', 'The example has no assistant message to learn from.')
  return null
}

export async function validateDataset(
  path: string,
  file: { readonly id: string; readonly filename: string; readonly purpose: string },
): Promise<FileValidationObject> {
  const problems: Problem[] = []
  let problemCount = 0
  let examples = 0
  let line = 0
  const report = (problem: Problem): void => {
    problemCount++
    if (problems.length < MAX_REPORTED) problems.push(problem)
  }
  const check = (text: string): void => {
    line++
    if (text.trim() === '') return
    examples++
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      report({ line, code: 'invalid_json', message: 'The line is not valid JSON.' })
      return
    }
    const problem = exampleProblem(line, parsed)
    if (problem !== null) report(problem)
  }

  const decoder = new TextDecoder('utf-8', { fatal: true })
  let pending = ''
  /** The current line is over MAX_LINE_CHARS: the rest of it is skipped. */
  let skipping = false
  try {
    for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
      let text = decoder.decode(chunk, { stream: true })
      for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n')) {
        const rest = text.slice(0, newline)
        text = text.slice(newline + 1)
        if (skipping) {
          skipping = false
          pending = ''
          continue
        }
        check(pending + rest.replace(/\r$/, ''))
        pending = ''
      }
      if (skipping) continue
      pending += text
      if (pending.length > MAX_LINE_CHARS) {
        line++
        examples++
        report({ line, code: 'line_too_long', message: `The line is longer than ${MAX_LINE_CHARS} characters.` })
        pending = ''
        skipping = true
      }
    }
    decoder.decode()
    if (!skipping && pending !== '') check(pending.replace(/\r$/, ''))
  } catch (err) {
    if (!(err instanceof TypeError)) throw err
    // TextDecoder's fatal mode: the bytes are not UTF-8 (a binary file, a ZIP of documents).
    report({ line: line + 1, code: 'not_utf8', message: 'The file is not UTF-8 text: a JSONL dataset is.' })
  }
  if (examples === 0 && problemCount === 0)
    report({ line: 0, code: 'empty_file', message: 'The file has no examples.' })
  const valid = problemCount === 0
  return {
    id: file.id,
    object: 'file.validation',
    filename: file.filename,
    purpose: file.purpose,
    valid,
    examples,
    error_count: problemCount,
    errors: problems,
    message: valid
      ? `The file is a valid fine-tuning dataset: ${examples} chat example${examples === 1 ? '' : 's'} in JSONL.`
      : `The file is not a valid fine-tuning dataset: ${problemCount} problem${problemCount === 1 ? '' : 's'}${problemCount > problems.length ? ` (the first ${problems.length} listed)` : ''}.`,
  }
}

// Every place a request body carries text a person or a program wrote: the one table the
// guardrails walk. A call's body has the endpoint's own shape by the time it is checked
// (an Anthropic Messages body was translated to a chat body at the edge,
// protocols/anthropic/request-in.ts), so the table speaks OpenAI's request shapes only; a
// path in a refusal or an audit record is one of the translated body.
//
// The walk goes down only the branches that lead to a listed field: a 1 MB body of image
// parts pays for the text parts only. Paths are written as object-ids.ts writes them:
// `.field`, `[]` for an item of a list.

/** Fields whose string value is text to check, with what it holds. */
export const TEXT_FIELDS: Readonly<Record<string, string>> = {
  // Chat completions (and Anthropic Messages, translated).
  '.messages[].content': "a message's text (system, developer, user, assistant, a tool's result)",
  '.messages[].content[].text': 'a text part of a message (input or an assistant turn sent back)',
  '.messages[].content[].refusal': "an assistant's refusal part sent back",
  '.messages[].refusal': "an assistant's refusal sent back",
  '.messages[].tool_calls[].function.arguments': "a tool call's arguments, JSON in a string, sent back",
  '.messages[].function_call.arguments': "a (legacy) function call's arguments, sent back",
  '.prediction.content': 'predicted output: text the model is told to expect',
  '.prediction.content[].text': 'a text part of predicted output',
  // Legacy completions, image generations (`prompt`), embeddings and Responses (`input`).
  '.prompt': 'a completion prompt, or an image prompt',
  '.prompt[]': 'one prompt of a list of prompts',
  '.suffix': "text after a completion's insertion point",
  '.input': "embeddings' text, or a Responses input given as one string",
  '.input[]': 'one text of a list of texts to embed',
  '.instructions': "a Responses call's system instructions",
  '.input[].content': "a Responses message item's text",
  '.input[].content[].text': 'an input_text part (or an output_text part sent back)',
  '.input[].arguments': 'a function_call item sent back: its arguments, JSON in a string',
  '.input[].input': 'a custom tool call item sent back: its input',
  '.input[].output': "a tool's result (function_call_output, custom_tool_call_output)",
  '.input[].output[].text': "a text part of a tool's result",
}

/**
 * Text-bearing fields deliberately left out, with the reason; the table's test keeps the
 * two lists apart.
 */
export const NOT_CHECKED: Readonly<Record<string, string>> = {
  '.messages[].name': "a participant's name chosen by the developer, not content",
  '.tools': "the developer's tool definitions (names, descriptions, JSON schemas), part of the application",
  '.response_format': 'a JSON schema of the output, part of the application',
  '.metadata': "the client's own labels for the call, never sent to a model as text",
  '.user': "the client's end-user id, sent upstream for abuse tracking",
  '.stop': 'stop sequences',
  '.input[].summary[].text': 'a reasoning summary the model wrote, sent back as it was',
  '.input[].encrypted_content': 'reasoning the upstream encrypted; opaque',
  'multipart forms':
    'audio and images: not text; uploaded batch and fine-tuning JSONL is read line by line at upload (uploads.ts)',
}

/** Every prefix of a listed path: the walk goes down these only. */
const PREFIXES: ReadonlySet<string> = (() => {
  const out = new Set<string>()
  for (const path of Object.keys(TEXT_FIELDS)) {
    for (let i = 1; i < path.length; i++) if (path[i] === '.' || path[i] === '[') out.add(path.slice(0, i))
    out.add(path)
  }
  return out
})()

/** A text found, and where: as a `param` (`messages[2].content[0].text`) and as the steps to it. Read during the visit. */
export interface TextVisit {
  readonly text: string
  where(): string
  steps(): Array<string | number>
}

/** Calls `visit` for every text of a JSON body that TEXT_FIELDS lists, in the body's order. */
export function walkTexts(body: Readonly<Record<string, unknown>>, visit: (v: TextVisit) => void): void {
  const trail: Array<string | number> = []
  const where = (): string => {
    let out = ''
    for (const step of trail) out += typeof step === 'number' ? `[${step}]` : out === '' ? step : `.${step}`
    return out
  }
  const steps = (): Array<string | number> => [...trail]
  const at = (key: string | number, value: unknown, path: string): void => {
    if (typeof value === 'string') {
      if (!Object.hasOwn(TEXT_FIELDS, path)) return
      trail.push(key)
      visit({ text: value, where, steps })
      trail.pop()
      return
    }
    if (typeof value !== 'object' || value === null) return
    trail.push(key)
    walk(value, path)
    trail.pop()
  }
  const walk = (value: object, path: string): void => {
    if (Array.isArray(value)) {
      const items = `${path}[]`
      if (!PREFIXES.has(items)) return
      for (let i = 0; i < value.length; i++) at(i, value[i] as unknown, items)
      return
    }
    const record = value as Record<string, unknown>
    for (const name in record) {
      if (!Object.hasOwn(record, name)) continue
      const child = `${path}.${name}`
      if (PREFIXES.has(child)) at(name, record[name], child)
    }
  }
  walk(body, '')
}

/**
 * `body` with the texts at `edits` replaced, copied on write: only the objects and lists on
 * the way to an edit are new, the rest is shared (a parsed body is never changed in place:
 * http/body.ts may send its bytes as they came).
 */
export function withTexts(
  body: Readonly<Record<string, unknown>>,
  edits: ReadonlyArray<{ readonly steps: ReadonlyArray<string | number>; readonly text: string }>,
): Record<string, unknown> {
  const copies = new Map<object, Record<string | number, unknown>>()
  const copyOf = (o: object): Record<string | number, unknown> => {
    let copy = copies.get(o)
    if (copy === undefined)
      copies.set(o, (copy = (Array.isArray(o) ? [...o] : { ...o }) as Record<string | number, unknown>))
    return copy
  }
  const root = copyOf(body)
  for (const { steps, text } of edits) {
    let original = body as Record<string | number, unknown>
    let copy = root
    for (let i = 0; i < steps.length - 1; i++) {
      const step = steps[i]!
      const child = original[step] as Record<string | number, unknown>
      const childCopy = copyOf(child)
      copy[step] = childCopy
      original = child
      copy = childCopy
    }
    copy[steps[steps.length - 1]!] = text
  }
  return root
}

// A reply as the cache keeps it: one JSON object, the shape the endpoint answers without
// streaming (chat.completion, text_completion, response, the embeddings list). A reply
// that came as a stream is assembled into that shape from its events; one that did not
// end (no [DONE], no response.completed, a choice without its finish_reason) is not kept.
import { SseParser } from '../proxy/sse.ts'
import type { CachedEndpoint } from './key-fields.ts'

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The whole reply in its non-streaming shape, or undefined when it is not one to keep. */
export function assembled(endpoint: CachedEndpoint, contentType: string, bytes: Buffer): Json | undefined {
  if (contentType.startsWith('text/event-stream')) return fromStream(endpoint, bytes)
  try {
    const body: unknown = JSON.parse(bytes.toString('utf8'))
    return isObject(body) && (body.error === undefined || body.error === null) ? body : undefined
  } catch {
    return undefined
  }
}

function fromStream(endpoint: CachedEndpoint, bytes: Buffer): Json | undefined {
  const parser = new SseParser()
  const events = [...parser.push(bytes), ...parser.end()]
  const datas: Json[] = []
  let done = false
  for (const event of events) {
    if (event.data === undefined) continue
    if (event.data.trim() === '[DONE]') {
      done = true
      continue
    }
    try {
      const data: unknown = JSON.parse(event.data)
      if (isObject(data)) datas.push(data)
    } catch {
      return undefined
    }
  }
  if (endpoint === 'responses') {
    const completed = datas.find((d) => d.type === 'response.completed')
    return isObject(completed?.response) ? completed.response : undefined
  }
  if (!done || datas.length === 0 || datas.some((d) => d.error !== undefined && d.error !== null)) return undefined
  return endpoint === 'chat.completions' ? chatOf(datas) : endpoint === 'completions' ? completionOf(datas) : undefined
}

interface ChoiceSoFar {
  role: string
  content: string | null
  refusal: string | null
  toolCalls: Array<{ id?: unknown; type?: unknown; name: string; arguments: string }>
  finish: unknown
}

/** What the chunks of a chat or completions stream add up to: each choice in index order, the usage, the first chunk. */
interface Folded<S> {
  readonly choices: ReadonlyArray<readonly [number, S]>
  readonly usage: unknown
  readonly first: Json
}

/**
 * Folds the chunks' choices by index (`add` puts one chunk's choice into its state) and picks
 * up the usage; undefined when a choice has no index, there are none, or one never finished.
 */
function foldChoices<S extends { finish: unknown }>(
  chunks: readonly Json[],
  fresh: () => S,
  add: (so: S, choice: Json) => void,
): Folded<S> | undefined {
  const choices = new Map<number, S>()
  let usage: unknown
  for (const chunk of chunks) {
    if (isObject(chunk.usage)) usage = chunk.usage
    for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (!isObject(c) || typeof c.index !== 'number') return undefined
      const so = choices.get(c.index) ?? fresh()
      choices.set(c.index, so)
      add(so, c)
      if (c.finish_reason !== null && c.finish_reason !== undefined) so.finish = c.finish_reason
    }
  }
  if (choices.size === 0 || [...choices.values()].some((c) => c.finish === null)) return undefined
  return { choices: [...choices.entries()].sort(([a], [b]) => a - b), usage, first: chunks[0] ?? {} }
}

/** The envelope both endpoints share around their choices. */
function envelope(object: string, { usage, first }: Folded<unknown>, extra: Json, choices: unknown[]): Json {
  return {
    id: first.id,
    object,
    created: first.created,
    model: first.model,
    ...extra,
    choices,
    ...(usage === undefined ? {} : { usage }),
  }
}

function chatOf(chunks: readonly Json[]): Json | undefined {
  const folded = foldChoices<ChoiceSoFar>(
    chunks,
    () => ({ role: 'assistant', content: null, refusal: null, toolCalls: [], finish: null }),
    (so, c) => {
      const delta = isObject(c.delta) ? c.delta : {}
      if (typeof delta.role === 'string') so.role = delta.role
      if (typeof delta.content === 'string') so.content = (so.content ?? '') + delta.content
      if (typeof delta.refusal === 'string') so.refusal = (so.refusal ?? '') + delta.refusal
      for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
        if (!isObject(call)) continue
        const at = typeof call.index === 'number' ? call.index : so.toolCalls.length
        const fn = isObject(call.function) ? call.function : {}
        const was = so.toolCalls[at] ?? { name: '', arguments: '' }
        so.toolCalls[at] = {
          id: call.id ?? was.id,
          type: call.type ?? was.type ?? 'function',
          name: was.name + (typeof fn.name === 'string' ? fn.name : ''),
          arguments: was.arguments + (typeof fn.arguments === 'string' ? fn.arguments : ''),
        }
      }
    },
  )
  if (folded === undefined) return undefined
  const fingerprint = folded.first.system_fingerprint
  return envelope(
    'chat.completion',
    folded,
    typeof fingerprint === 'string' ? { system_fingerprint: fingerprint } : {},
    folded.choices.map(([index, c]) => ({
      index,
      message: {
        role: c.role,
        content: c.content,
        refusal: c.refusal,
        ...(c.toolCalls.length > 0
          ? {
              tool_calls: c.toolCalls.map((t) => ({
                id: t.id,
                type: t.type,
                function: { name: t.name, arguments: t.arguments },
              })),
            }
          : {}),
      },
      logprobs: null,
      finish_reason: c.finish,
    })),
  )
}

function completionOf(chunks: readonly Json[]): Json | undefined {
  const folded = foldChoices(
    chunks,
    (): { text: string; finish: unknown } => ({ text: '', finish: null }),
    (so, c) => {
      if (typeof c.text === 'string') so.text += c.text
    },
  )
  if (folded === undefined) return undefined
  return envelope(
    'text_completion',
    folded,
    {},
    folded.choices.map(([index, c]) => ({ index, text: c.text, logprobs: null, finish_reason: c.finish })),
  )
}

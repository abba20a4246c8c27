// One chat completions SSE event's data, read once for the translators that turn a chat
// stream into another protocol's events (the Responses API over chat, the Messages API):
// the end, the relay's own error event (an upstream that broke off mid-stream), or a chunk
// with its first choice and that choice's delta. Data that is not a JSON object is nothing.
import { isJsonObject, type JsonObject } from '../json.ts'

export type ChatEvent =
  | { readonly kind: 'done' }
  | { readonly kind: 'error'; readonly body: JsonObject; readonly error: JsonObject }
  | {
      readonly kind: 'chunk'
      readonly chunk: JsonObject
      /** The first choice, when the chunk has one (a usage-only chunk has none). */
      readonly choice: JsonObject | undefined
      /** The choice's delta ({} when it has none). */
      readonly delta: JsonObject
    }

export function chatEventOf(text: string): ChatEvent | undefined {
  if (text === '[DONE]') return { kind: 'done' }
  let chunk: unknown
  try {
    chunk = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isJsonObject(chunk)) return undefined
  if (isJsonObject(chunk.error)) return { kind: 'error', body: chunk, error: chunk.error }
  const choice = Array.isArray(chunk.choices) && isJsonObject(chunk.choices[0]) ? chunk.choices[0] : undefined
  return { kind: 'chunk', chunk, choice, delta: choice !== undefined && isJsonObject(choice.delta) ? choice.delta : {} }
}

// What the relay needs of a JSON reply, read without parsing all of it: its usage and the
// model it names. Replies put `usage` at or near the end (embeddings: after megabytes of
// vectors) and `model` near the start (chat) or just before `usage` (embeddings), so each
// is read from a bounded window at either end and parsed alone.
//
// Why a window parses only when it should: the exact bytes `"usage"` never occur inside a
// JSON string (a quote in a string is escaped), so a match is a member name or a whole
// string value. The text from a member name to the end of the document, after a `{`, is a
// JSON object only if that member is at the top level: a nested one leaves more closing
// brackets than the one opening brace. Likewise the text from the start to the end of a
// member's string value, with a `}` after it, is an object only if that member is at the
// top level. Anything else (no match, a match deeper in, a window too large) is
// undefined, and the relay parses the whole reply as before.
import type { Usage } from '../backends/port.ts'
import { isSpace, stringEnd } from '../http/json-bytes.ts'
import { isJsonObject } from '../json.ts'
import { usageOf } from './usage-tap.ts'

/** The most a window holds: usage objects and the members around them are far smaller. */
export const SCAN_WINDOW_BYTES = 16 * 1024

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return isJsonObject(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** The top-level members from the last `"name"` to the end, when that is one and within the window. */
function membersFrom(bytes: Buffer, name: string): Record<string, unknown> | undefined {
  const at = bytes.lastIndexOf(`"${name}"`)
  if (at < 0 || bytes.length - at > SCAN_WINDOW_BYTES) return undefined
  return parseObject(`{${bytes.toString('utf8', at)}`)
}

/** The top-level members up to the first `"name"` and its string value, when that is one and within the window. */
function membersUntil(bytes: Buffer, name: string): Record<string, unknown> | undefined {
  const at = bytes.indexOf(`"${name}"`)
  if (at < 0 || at > SCAN_WINDOW_BYTES) return undefined
  let next = at + name.length + 2
  while (isSpace(bytes[next])) next++
  if (bytes[next] !== 0x3a) return undefined
  next++
  while (isSpace(bytes[next])) next++
  if (bytes[next] !== 0x22) return undefined
  const close = stringEnd(bytes, next)
  if (close > SCAN_WINDOW_BYTES) return undefined
  return parseObject(`${bytes.toString('utf8', 0, close + 1)}}`)
}

/** What a scan found: the reply's usage, and the model it names at the top level (null: none). */
export interface Scanned {
  readonly usage: Usage
  readonly model: string | null
}

/**
 * Usage and top-level model of a JSON reply read whole (valid JSON or not: what does not
 * parse is not found). Undefined when either cannot be read this way, or the reply has a
 * `response` member (a model inside it is renamed too: public-model.ts); the caller then
 * parses the reply.
 */
export function scanReply(bytes: Buffer): Scanned | undefined {
  const after = membersFrom(bytes, 'usage')
  const usage = after === undefined ? undefined : usageOf(after.usage)
  if (after === undefined || usage === undefined || bytes.includes('"response"')) return undefined
  if (typeof after.model === 'string') return { usage, model: after.model }
  const first = bytes.indexOf('"model"')
  if (first < 0) return { usage, model: null }
  // Read from the start only when the name occurs once: of two top-level members, the last counts.
  const named =
    first === bytes.lastIndexOf('"model"')
      ? (membersUntil(bytes, 'model') ?? membersFrom(bytes, 'model'))
      : membersFrom(bytes, 'model')
  return typeof named?.model === 'string' ? { usage, model: named.model } : undefined
}

/** Usage of a JSON reply from its last bytes (a reply too large to read whole), when they show it. */
export function usageInTail(tail: Buffer): Usage | undefined {
  const after = membersFrom(tail, 'usage')
  return after === undefined ? undefined : usageOf(after.usage)
}

/** The last SCAN_WINDOW_BYTES (or a little more) of a body that goes by in chunks. */
export class TailWindow {
  #chunks: Buffer[] = []
  #size = 0

  push(chunk: Buffer): void {
    this.#chunks.push(chunk)
    this.#size += chunk.length
    while (this.#chunks.length > 1 && this.#size - (this.#chunks[0]?.length ?? 0) >= SCAN_WINDOW_BYTES) {
      this.#size -= this.#chunks.shift()?.length ?? 0
    }
  }

  bytes(): Buffer {
    return Buffer.concat(this.#chunks, this.#size)
  }
}

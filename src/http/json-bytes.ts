// A JSON request body forwarded as the bytes the client sent, or patched at the byte level
// where the gateway must change a top-level member (the model's name, a stream's
// stream_options): no parse-and-serialise of the whole body on the way out.
//
// Bytes go out as they came only when they say exactly what the gateway checked: the
// parsed value. Two ways they could say more are ruled out. Invalid UTF-8 (JSON.parse saw
// U+FFFD where the upstream may see something else) keeps a body on the serialised path.
// So does a duplicated member name at any depth: JSON.parse keeps the last, an upstream
// may keep the first, and an object id checked against its owner (tenant isolation) must
// be the one the upstream acts on. Counting members is enough to see a duplicate: the
// bytes hold more members than the parsed value.
import { isUtf8 } from 'node:buffer'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const COMMA = 0x2c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d

/** A member of the top-level object: its name and where its value's text lies. */
export interface TopMember {
  readonly name: string
  /** Offset of the value's first byte. */
  readonly start: number
  /** Offset just past the value's last byte. */
  readonly end: number
}

/** Where a JSON object's text keeps what a patch needs. */
export interface JsonLayout {
  /** Object members at every depth. */
  readonly members: number
  /** The top-level object's members, in order. */
  readonly top: readonly TopMember[]
  /** Offset of the top-level object's closing brace. */
  readonly close: number
}

/** Offset of the quote that closes the string opening at `open`. */
export function stringEnd(bytes: Buffer, open: number): number {
  let at = bytes.indexOf(QUOTE, open + 1)
  for (;;) {
    if (at < 0) throw new SyntaxError('unterminated string')
    let slashes = 0
    while (bytes[at - 1 - slashes] === BACKSLASH) slashes++
    if (slashes % 2 === 0) return at
    at = bytes.indexOf(QUOTE, at + 1)
  }
}

/** JSON's whitespace. */
export const isSpace = (b: number | undefined): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09

function nameAt(bytes: Buffer, open: number, close: number): string {
  const text = bytes.toString('utf8', open, close + 1)
  return text.includes('\\') ? (JSON.parse(text) as string) : text.slice(1, -1)
}

/**
 * The layout of JSON text whose top level is an object. The text must be valid JSON (it
 * has been parsed already): this reads its structure, it does not check it. Strings are
 * skipped with indexOf, so the cost is in the bytes between strings.
 */
export function layoutOf(bytes: Buffer): JsonLayout {
  const top: TopMember[] = []
  let members = 0
  let depth = 0
  let close = -1
  let nameOpen = -1
  let nameClose = -1
  let valueStart = -1
  const endMember = (at: number): void => {
    if (valueStart < 0) return
    let end = at
    while (end > valueStart && isSpace(bytes[end - 1])) end--
    top.push({ name: nameAt(bytes, nameOpen, nameClose), start: valueStart, end })
    valueStart = -1
  }
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]
    if (b === QUOTE) {
      const end = stringEnd(bytes, i)
      // At depth 1 a string before its colon is a member's name.
      if (depth === 1 && valueStart < 0) {
        nameOpen = i
        nameClose = end
      }
      i = end
    } else if (b === COLON) {
      members++
      if (depth === 1) {
        let start = i + 1
        while (isSpace(bytes[start])) start++
        valueStart = start
      }
    } else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      depth++
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      if (depth === 1) {
        endMember(i)
        close = i
      }
      depth--
    } else if (b === COMMA && depth === 1) {
      endMember(i)
    }
  }
  if (close < 0) throw new SyntaxError('not a JSON object')
  return { members, top, close }
}

const layouts = new WeakMap<Buffer, JsonLayout | null>()

/**
 * The bytes to send for a received body with these top-level members changed (name → new
 * value): the received bytes, patched; undefined when they may not go as they are (the
 * body is serialised instead). The layout is read once per body (failover sends it again).
 */
export function wireBytes(
  received: { readonly bytes: Buffer; readonly members: number },
  changes: ReadonlyMap<string, unknown>,
): Buffer | undefined {
  let layout = layouts.get(received.bytes)
  if (layout === undefined) {
    layout = forwardableLayout(received.bytes, received.members) ?? null
    layouts.set(received.bytes, layout)
  }
  if (layout === null) return undefined
  if (changes.size === 0) return received.bytes
  const texts = new Map<string, string>()
  for (const [name, value] of changes) texts.set(name, JSON.stringify(value))
  return patchTopLevel(received.bytes, layout, texts)
}

/**
 * The layout of bytes that may go upstream as they are for `members` parsed members:
 * valid UTF-8 and no member name twice in any object. Undefined otherwise.
 */
export function forwardableLayout(bytes: Buffer, members: number): JsonLayout | undefined {
  if (!isUtf8(bytes)) return undefined
  const layout = layoutOf(bytes)
  return layout.members === members ? layout : undefined
}

/**
 * `bytes` with top-level members replaced by new JSON text (the last member of that name;
 * a forwardable body has one) or, when absent, added at the end.
 */
export function patchTopLevel(bytes: Buffer, layout: JsonLayout, changes: ReadonlyMap<string, string>): Buffer {
  const replaced: { start: number; end: number; text: string }[] = []
  const added: string[] = []
  for (const [name, text] of changes) {
    const member = layout.top.findLast((m) => m.name === name)
    if (member === undefined) added.push(`${JSON.stringify(name)}:${text}`)
    else replaced.push({ start: member.start, end: member.end, text })
  }
  replaced.sort((a, b) => a.start - b.start)
  const parts: Buffer[] = []
  let at = 0
  for (const r of replaced) {
    parts.push(bytes.subarray(at, r.start), Buffer.from(r.text, 'utf8'))
    at = r.end
  }
  if (added.length > 0) {
    const lead = layout.top.length > 0 ? ',' : ''
    parts.push(bytes.subarray(at, layout.close), Buffer.from(lead + added.join(','), 'utf8'))
    at = layout.close
  }
  parts.push(bytes.subarray(at))
  return Buffer.concat(parts)
}

// Text that is itself JSON (a tool call's `arguments`, a tool's result, any field a client
// fills with serialised JSON) may spell its strings with escapes: `\u0041KIA…` is `AKIA…`
// to whoever parses it, the upstream's tool included, but not to a detector reading the
// raw characters. Such a text is checked as it means: its `\uXXXX` and `\/` escapes are
// written as the characters they stand for, and a mask is applied to that spelling, which
// is then what is sent (the same JSON value, placeholders in).
//
// Decoded in place, not through JSON.parse and JSON.stringify: member names stay beside
// their values (the `password` detector reads `"password": "…"`), numbers keep every digit,
// and a text that is not quite JSON is still read. Escapes that must stay escapes in JSON
// stay: a quote, a backslash, control characters and a lone surrogate. Only a text that
// starts like JSON (an object, a list, a string) and holds a backslash is looked at.
// One level: a JSON text inside a string of a JSON text keeps its doubled escapes.

/** A backslash pair first (`\\` stays, so `\\u0041` is not read as an escape), then `\uXXXX` or `\/`. */
const ESCAPES = /\\(?:\\|u([0-9A-Fa-f]{4})(?:\\u([0-9A-Fa-f]{4}))?|\/)/g

/** The character an escape stands for, or the escape itself when JSON needs it escaped. */
function decoded(escape: string, hex?: string, low?: string): string {
  if (escape === '\\/') return '/'
  if (hex === undefined) return escape
  const code = parseInt(hex, 16)
  const lowCode = low === undefined ? undefined : parseInt(low, 16)
  if (code >= 0xd800 && code <= 0xdbff) {
    // A surrogate pair is one character; a lone one stays escaped (it is not well-formed text).
    if (lowCode !== undefined && lowCode >= 0xdc00 && lowCode <= 0xdfff) return String.fromCharCode(code, lowCode)
    return `\\u${hex}${low === undefined ? '' : decoded(`\\u${low}`, low)}`
  }
  const first =
    code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xdc00 && code <= 0xdfff)
      ? `\\u${hex}`
      : String.fromCharCode(code)
  return low === undefined ? first : first + decoded(`\\u${low}`, low)
}

/** `text` with its JSON escapes written out when it is JSON-like and has any; undefined: read it as it stands. */
export function unescapedJson(text: string): string | undefined {
  if (!text.includes('\\')) return undefined
  const first = /\S/.exec(text)?.[0]
  if (first !== '{' && first !== '[' && first !== '"') return undefined
  const out = text.replace(ESCAPES, (escape: string, hex?: string, low?: string) => decoded(escape, hex, low))
  return out === text ? undefined : out
}

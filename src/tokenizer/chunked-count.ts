// Exact counting that stays linear: byte-pair encoding is superlinear in the length of one
// pre-token, and a run of one character (or of emoji) is a single pre-token as long as
// the run; 200,000 'a's took 11 s in one call. So a text is handed to the encoder in pieces
// of at most CHUNK characters, cut before a space where there is one (a space that starts
// a word begins a pre-token of its own, so ordinary text counts exactly as if it were
// whole), and past a budget of characters the rest is estimated. The budget is in
// characters, not time, so that a count is the same on a busy machine as on an idle one;
// a piece costs at most about a millisecond, so the budget bounds the time too.
import { estimateTextTokens } from './estimate-text.ts'

/** Longest text given to the BPE in one call: its cost grows with the square of this. */
export const CHUNK = 256

export interface Encoder {
  /** The exact count, in one synchronous call: only for short text. */
  count(text: string): number
}

const isSpace = (unit: number): boolean =>
  unit === 0x20 || (unit >= 0x09 && unit <= 0x0d) || unit === 0xa0 || unit === 0x3000

/** End of the piece that starts at `start`: at most CHUNK long, cut before a space if it can be. */
export function cutPoint(text: string, start: number): number {
  const limit = start + CHUNK
  if (limit >= text.length) return text.length
  // Only a space after a non-space starts a word: inside a run of whitespace the
  // pre-tokens depend on the whole run. Looked for in the second half of the window only:
  // the search must stay as short as the piece, or a text without spaces would be
  // scanned again for every piece.
  for (let i = limit - 1; i > start + CHUNK / 2; i--) {
    if (text.charCodeAt(i) === 0x20 && !isSpace(text.charCodeAt(i - 1))) return i
  }
  // No space: a long run of one kind, where the count is approximate anyway. Never split
  // a surrogate pair.
  const unit = text.charCodeAt(limit - 1)
  return unit >= 0xd800 && unit <= 0xdbff ? limit - 1 : limit
}

export interface CountResult {
  readonly tokens: number
  /** False when the budget ran out and part of the text was estimated. */
  readonly exact: boolean
}

/** Tokens of all `texts`: the first `budgetChars` characters counted, the rest estimated. */
export function countInPieces(encoder: Encoder, texts: readonly string[], budgetChars: number): CountResult {
  let tokens = 0
  let left = budgetChars
  let exact = true
  for (const text of texts) {
    let start = 0
    while (start < text.length) {
      const end = cutPoint(text, start)
      if (end - start > left) {
        exact = false
        tokens += estimateTextTokens(text, start)
        break
      }
      tokens += encoder.count(start === 0 && end === text.length ? text : text.slice(start, end))
      left -= end - start
      start = end
    }
  }
  return { tokens, exact }
}

// Cutting a file's text into overlapping chunks of about N tokens, as OpenAI's static
// chunking does (`auto` is 800 tokens overlapping by 400). Chunks end between words. Sizes
// are measured with the gateway's linear estimate, not the tokenizer: one pass, never
// superlinear, and a file can be large; the tokens a chunk really costs are counted
// afterwards, off the event loop, for usage. A file of megabytes has millions of words:
// the pass yields the event loop every so many of them, so other requests go on meanwhile.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { estimateTokenHundredths } from '../../tokenizer/estimate-text.ts'

export interface ChunkSizes {
  readonly maxTokens: number
  readonly overlapTokens: number
  /** A text estimated above this many tokens is not chunked: chunkText answers undefined. */
  readonly textLimitTokens?: number
}

/** A word with the space after it, or a run of space (at the start). */
const PIECE = /\S+\s*|\s+/gu
/** Longer words are cut, so that one piece never outgrows a chunk. */
const MAX_PIECE = 64

/** Pieces read, or chunks cut (each walks some hundreds of pieces), per turn of the event loop: a few milliseconds' work. */
const PIECES_PER_TURN = 20_000
const CHUNKS_PER_TURN = 100

const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff

export async function chunkText(text: string, sizes: ChunkSizes): Promise<string[] | undefined> {
  const starts: number[] = []
  const costs: number[] = []
  const limit = (sizes.textLimitTokens ?? Infinity) * 100
  let total = 0
  let seen = 0
  for (const match of text.matchAll(PIECE)) {
    if (++seen % PIECES_PER_TURN === 0) await nextTurn()
    const end = match.index + match[0].length
    for (let at = match.index; at < end;) {
      let next = Math.min(at + MAX_PIECE, end)
      // Never split a surrogate pair: an emoji stays whole in one chunk.
      if (next < end && isLowSurrogate(text.charCodeAt(next))) next--
      const cost = estimateTokenHundredths(text, at, next)
      starts.push(at)
      costs.push(cost)
      total += cost
      at = next
    }
    if (total > limit) return undefined
  }
  const max = sizes.maxTokens * 100
  const overlap = sizes.overlapTokens * 100
  const chunks: string[] = []
  for (let start = 0, cut = 0; start < starts.length; cut++) {
    if (cut % CHUNKS_PER_TURN === CHUNKS_PER_TURN - 1) await nextTurn()
    let end = start
    let size = 0
    // At least one piece, however large: every chunk moves the text on.
    while (end < starts.length && (end === start || size + (costs[end] ?? 0) <= max)) size += costs[end++] ?? 0
    const chunk = text.slice(starts[start], end < starts.length ? starts[end] : text.length).trim()
    if (chunk.length > 0) chunks.push(chunk)
    if (end >= starts.length) break
    // The next chunk starts as many pieces back as fit in the overlap, and after this one's start.
    let next = end
    let shared = 0
    while (next - 1 > start && shared + (costs[next - 1] ?? 0) <= overlap) shared += costs[--next] ?? 0
    start = next
  }
  return chunks
}

// Ingesting one file into a vector store, in two steps. prepare() runs while the attach
// request waits: it reads and decodes the file, cuts it into chunks and counts their
// tokens (the embedding tokens the attach reply reports as usage, so the gateway can meter
// them). embed() runs after the reply, in slices that yield the event loop, and turns
// each chunk into the mock's deterministic embedding; the file is `in_progress` until it
// is done.
import { readFile } from 'node:fs/promises'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { countInputTokens } from '../../limits/tokens.ts'
import { chunkText } from './chunking.ts'
import { embedVector } from './embeddings.ts'
import type { ChunkSizing, IndexedChunk, LastError } from './vector-store-records.ts'

/** Dimensions of the mock's chunk and query vectors (its embeddings' default). */
export const VECTOR_DIMENSIONS = 256
/** Files larger than this are not read: the mock holds a file's text and chunks in memory. */
export const MAX_FILE_BYTES = 64 * 1024 * 1024
/** OpenAI's limit per vector store file. */
export const MAX_FILE_TOKENS = 5_000_000
/**
 * Characters of one file's chunks the tokenizer counts (in the worker, a few seconds at
 * most) before the rest is estimated: the chunks of about 4 MB of text, overlap included.
 */
const COUNT_BUDGET_CHARS = 8_000_000
/** Chunks embedded per turn of the event loop. */
const SLICE = 32

export type Prepared =
  | { readonly ok: true; readonly chunks: readonly string[]; readonly tokens: number }
  | { readonly ok: false; readonly error: LastError }

const failed = (code: LastError['code'], message: string): Prepared => ({ ok: false, error: { code, message } })

export async function prepare(path: string, bytes: number, sizing: ChunkSizing): Promise<Prepared> {
  if (bytes > MAX_FILE_BYTES) return failed('invalid_file', `The file is larger than the mock backend ingests (${MAX_FILE_BYTES} bytes).`)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(await readFile(path))
  } catch {
    return failed('unsupported_file', 'The file is not UTF-8 text: the mock backend ingests text files only.')
  }
  if (text.includes('\u0000')) return failed('unsupported_file', 'The file is binary: the mock backend ingests text files only.')
  if (text.trim() === '') return failed('invalid_file', 'The file has no text.')
  const chunks = await chunkText(text, { maxTokens: sizing.max_chunk_size_tokens, overlapTokens: sizing.chunk_overlap_tokens, textLimitTokens: MAX_FILE_TOKENS })
  if (chunks === undefined) return failed('invalid_file', `The file has more than ${MAX_FILE_TOKENS} tokens.`)
  return { ok: true, chunks, tokens: await countInputTokens(chunks, COUNT_BUDGET_CHARS) }
}

/** The bytes the mock keeps for a chunk: its text and its vector. */
export function chunkBytes(text: string): number {
  return Buffer.byteLength(text, 'utf8') + VECTOR_DIMENSIONS * 4
}

/** Embeds the chunks a slice at a time; undefined if `stillWanted` turns false on the way. */
export async function embed(chunks: readonly string[], stillWanted: () => boolean): Promise<IndexedChunk[] | undefined> {
  const cache = new Map<string, Float32Array>()
  const indexed: IndexedChunk[] = []
  for (let i = 0; i < chunks.length; i += SLICE) {
    await nextTurn()
    if (!stillWanted()) return undefined
    for (const text of chunks.slice(i, i + SLICE)) indexed.push({ text, vector: embedVector(text, VECTOR_DIMENSIONS, cache) })
  }
  await nextTurn()
  return stillWanted() ? indexed : undefined
}

// Ingesting one file into a vector store, in two steps. prepare() runs while the attach
// request waits: it reads and decodes the file, cuts it into chunks and counts their
// tokens (the embedding tokens the attach reply reports as usage, so the gateway can meter
// them). embed() runs after the reply, in slices that yield the event loop, and turns
// each chunk into the mock's deterministic embedding; the file is `in_progress` until it
// is done.
//
// Visual RAG: with a vision embedding model, a PNG is indexed as one page image. The
// mock cannot see, so the image's vector is made from the words of its file name
// ("q1-revenue-chart.png": "q1 revenue chart"); search answers it as the image itself.
import { readFile } from 'node:fs/promises'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { countInputTokens } from '../../tokenizer/tokens.ts'
import { chunkText } from './chunking.ts'
import { embedVector } from './embeddings.ts'
import { INPUT_TOKENS_PER_IMAGE } from './images.ts'
import type { FileChunking, IndexedChunk, LastError } from './vector-store-records.ts'

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
/**
 * A page image larger than this is not indexed: search answers images whole, as data URLs,
 * and a page scan is well under it.
 */
export const MAX_IMAGE_BYTES = 4 * 1024 * 1024
/** Chunks embedded per turn of the event loop. */
const SLICE = 32

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

export type Prepared =
  | {
      readonly ok: true
      readonly chunks: readonly string[]
      readonly tokens: number
      /** Visual RAG: the file is a page image. */
      readonly image?: { readonly dataUrl: string; readonly words: string }
    }
  | { readonly ok: false; readonly error: LastError }

const failed = (code: LastError['code'], message: string): Prepared => ({ ok: false, error: { code, message } })

/** "Q1_revenue-chart.png" → "Q1 revenue chart". */
function wordsOf(filename: string): string {
  const words = filename
    .replace(/\.[^.]*$/, '')
    .replace(/[\s_.-]+/g, ' ')
    .trim()
  return words === '' ? 'image' : words
}

function prepareImage(bytes: Buffer, filename: string, chunking: FileChunking): Prepared {
  if (chunking.models.vision === undefined) {
    return failed(
      'unsupported_file',
      'The file is an image: it is indexed only with a vision_embedding_model (Visual RAG); the mock backend ingests text otherwise.',
    )
  }
  if (bytes.length > MAX_IMAGE_BYTES)
    return failed('invalid_file', `The image is larger than the mock backend indexes (${MAX_IMAGE_BYTES} bytes).`)
  return {
    ok: true,
    chunks: [],
    tokens: INPUT_TOKENS_PER_IMAGE,
    image: { dataUrl: `data:image/png;base64,${bytes.toString('base64')}`, words: wordsOf(filename) },
  }
}

export async function prepare(
  path: string,
  file: { readonly bytes: number; readonly filename: string },
  chunking: FileChunking,
): Promise<Prepared> {
  if (file.bytes > MAX_FILE_BYTES)
    return failed('invalid_file', `The file is larger than the mock backend ingests (${MAX_FILE_BYTES} bytes).`)
  let bytes: Buffer
  try {
    bytes = await readFile(path)
  } catch {
    return failed('server_error', 'The file could not be read.')
  }
  if (bytes.subarray(0, PNG_SIGNATURE.length).equals(PNG_SIGNATURE)) return prepareImage(bytes, file.filename, chunking)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    return failed(
      'unsupported_file',
      'The file is not UTF-8 text: the mock backend ingests text files (and PNG page images, for Visual RAG) only.',
    )
  }
  if (text.includes('\u0000'))
    return failed(
      'unsupported_file',
      'The file is binary: the mock backend ingests text files (and PNG page images, for Visual RAG) only.',
    )
  if (text.trim() === '') return failed('invalid_file', 'The file has no text.')
  const { sizing } = chunking
  const chunks = await chunkText(text, {
    maxTokens: sizing.max_chunk_size_tokens,
    overlapTokens: sizing.chunk_overlap_tokens,
    textLimitTokens: MAX_FILE_TOKENS,
  })
  if (chunks === undefined) return failed('invalid_file', `The file has more than ${MAX_FILE_TOKENS} tokens.`)
  return { ok: true, chunks, tokens: await countInputTokens(chunks, COUNT_BUDGET_CHARS) }
}

/** The bytes the mock keeps for a chunk: its text, its vector, and its image. */
export function chunkBytes(chunk: IndexedChunk): number {
  return Buffer.byteLength(chunk.text, 'utf8') + VECTOR_DIMENSIONS * 4 + (chunk.image?.dataUrl.length ?? 0)
}

/** Embeds the chunks a slice at a time; undefined if `stillWanted` turns false on the way. */
export async function embed(
  prepared: Extract<Prepared, { ok: true }>,
  stillWanted: () => boolean,
): Promise<IndexedChunk[] | undefined> {
  const { chunks, image } = prepared
  const cache = new Map<string, Float32Array>()
  const indexed: IndexedChunk[] = []
  for (let i = 0; i < chunks.length; i += SLICE) {
    await nextTurn()
    if (!stillWanted()) return undefined
    for (const text of chunks.slice(i, i + SLICE))
      indexed.push({ text, vector: embedVector(text, VECTOR_DIMENSIONS, cache) })
  }
  if (image !== undefined)
    indexed.push({
      text: image.words,
      vector: embedVector(image.words, VECTOR_DIMENSIONS, cache),
      image: { dataUrl: image.dataUrl, page: 1 },
    })
  await nextTurn()
  return stillWanted() ? indexed : undefined
}

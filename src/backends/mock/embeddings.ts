// POST /embeddings: one deterministic unit vector per input. Each word of the input has a
// vector of its own, drawn from a generator seeded by the word; the input's vector is the
// sum of its words' (a bag of words), L2-normalised. So texts that share words point the
// same way, and vector-store search (vector-store-search.ts) ranks the chunk holding a
// query's words first, as a real embedding model would. Text without a word (punctuation
// only) is drawn from a generator seeded by the whole text. Asking for fewer dimensions
// gives the normalised prefix of the same sum. Values are rounded to float32 first, so the
// `float` and `base64` (little-endian float32) encodings agree exactly. A model whose
// configuration gives its dimension (meta.hidden_size: 768 for jina-embeddings-v2-base-de,
// 1024 for text-embedding-bge-m3) has vectors that long, as the real model has, and
// `dimensions` may shorten them but not lengthen them; other models have DEFAULT_DIMENSIONS.
import { countInputTokens } from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { randomFrom, seedOf } from './hash.ts'
import { jsonBody, modelOf, optionalEnum, optionalInteger } from './params.ts'
import { jsonResponse } from './reply.ts'

export const DEFAULT_DIMENSIONS = 256
const MAX_DIMENSIONS = 4096
const MAX_INPUTS = 2048

/** `native`: each model's own dimension, by the name the backend knows it by. */
export async function embeddings(
  request: UpstreamRequest,
  native: ReadonlyMap<string, number> = new Map(),
): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const inputs = inputSeeds(body.input)
  const model = modelOf(body, request)
  const own = native.get(model)
  const dimensions =
    optionalInteger(body, 'dimensions', { min: 1, max: own ?? MAX_DIMENSIONS }) ?? own ?? DEFAULT_DIMENSIONS
  const format = optionalEnum(body, 'encoding_format', ['float', 'base64'] as const) ?? 'float'

  const data = inputs.map((seed, index) => {
    const vector = embed(seed, dimensions)
    return {
      object: 'embedding',
      index,
      embedding: format === 'base64' ? vector.toString('base64') : floats(vector),
    }
  })
  const promptTokens = await countInputTokens(body.input)
  return jsonResponse(200, {
    object: 'list',
    data,
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  })
}

/** One seed per input: strings by their text, token-id arrays by their ids. */
function inputSeeds(input: unknown): string[] {
  if (input === undefined || input === null) throw missingParameter('input')
  const invalid = invalidRequest(
    "Invalid 'input': expected a non-empty string, an array of non-empty strings, an array of token ids or an array of such arrays.",
    'input',
  )
  if (typeof input === 'string') {
    if (input === '') throw invalid
    return [input]
  }
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_INPUTS) throw invalid
  if (input.every((item) => Number.isInteger(item))) return [JSON.stringify(input)]
  return input.map((item: unknown) => {
    if (typeof item === 'string' && item !== '') return item
    if (Array.isArray(item) && item.length > 0 && item.every((id) => Number.isInteger(id))) return JSON.stringify(item)
    throw invalid
  })
}

/** Letters and digits in a run: a word. */
const WORD = /[\p{L}\p{N}]+/gu

/** One word's vector; the same word always draws the same one. */
function wordVector(word: string, dimensions: number): Float32Array {
  const random = randomFrom(seedOf(word))
  const vector = new Float32Array(dimensions)
  for (let i = 0; i < dimensions; i++) vector[i] = random() * 2 - 1
  return vector
}

/** Word vectors a cache keeps at most (1 KB each at 256 dimensions). */
const CACHE_WORDS = 20_000

/** The unit vector of a text, as float32 values. `cache` keeps word vectors between calls of one batch. */
export function embedVector(text: string, dimensions: number, cache?: Map<string, Float32Array>): Float32Array {
  const sum = new Float64Array(dimensions)
  const counts = new Map<string, number>()
  for (const match of text.toLowerCase().matchAll(WORD)) counts.set(match[0], (counts.get(match[0]) ?? 0) + 1)
  if (counts.size === 0) {
    const random = randomFrom(seedOf(text))
    for (let i = 0; i < dimensions; i++) sum[i] = random() * 2 - 1
  }
  for (const [word, count] of counts) {
    let vector = cache?.get(word)
    if (vector === undefined) {
      vector = wordVector(word, dimensions)
      if (cache !== undefined) {
        if (cache.size >= CACHE_WORDS) cache.clear()
        cache.set(word, vector)
      }
    }
    for (let i = 0; i < dimensions; i++) sum[i] = (sum[i] ?? 0) + count * (vector[i] ?? 0)
  }
  let norm = 0
  for (const value of sum) norm += value * value
  norm = Math.sqrt(norm) || 1
  return Float32Array.from(sum, (value) => value / norm)
}

/** The unit vector of `seed`, as little-endian float32 bytes. */
export function embed(seed: string, dimensions: number): Buffer {
  const vector = embedVector(seed, dimensions)
  const bytes = Buffer.alloc(dimensions * 4)
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4))
  return bytes
}

function floats(bytes: Buffer): number[] {
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
}

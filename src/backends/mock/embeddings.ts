// POST /embeddings: one deterministic unit vector per input. The vector's components are
// drawn from a generator seeded by the input, then L2-normalised; asking for fewer
// dimensions gives the normalised prefix of the same draw. Values are rounded to float32
// first, so the `float` and `base64` (little-endian float32) encodings agree exactly.
import { countInputTokens } from '../../limits/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { randomFrom, seedOf } from './hash.ts'
import { jsonBody, modelOf, optionalEnum, optionalInteger } from './params.ts'
import { jsonResponse } from './reply.ts'

export const DEFAULT_DIMENSIONS = 256
const MAX_DIMENSIONS = 4096
const MAX_INPUTS = 2048

export function embeddings(request: UpstreamRequest): UpstreamResponse {
  const body = jsonBody(request)
  const inputs = inputSeeds(body.input)
  const model = modelOf(body, request)
  const dimensions = optionalInteger(body, 'dimensions', { min: 1, max: MAX_DIMENSIONS }) ?? DEFAULT_DIMENSIONS
  const format = optionalEnum(body, 'encoding_format', ['float', 'base64'] as const) ?? 'float'

  const data = inputs.map((seed, index) => {
    const vector = embed(seed, dimensions)
    return {
      object: 'embedding',
      index,
      embedding: format === 'base64' ? vector.toString('base64') : floats(vector),
    }
  })
  const promptTokens = countInputTokens(body.input)
  return jsonResponse(200, { object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } })
}

/** One seed per input: strings by their text, token-id arrays by their ids. */
function inputSeeds(input: unknown): string[] {
  if (input === undefined || input === null) throw missingParameter('input')
  const invalid = invalidRequest("Invalid 'input': expected a non-empty string, an array of non-empty strings, an array of token ids or an array of such arrays.", 'input')
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

/** The unit vector of `seed`, as little-endian float32 bytes. */
export function embed(seed: string, dimensions: number): Buffer {
  const random = randomFrom(seedOf(seed))
  const raw = Array.from({ length: dimensions }, () => random() * 2 - 1)
  const norm = Math.sqrt(raw.reduce((sum, value) => sum + value * value, 0)) || 1
  const bytes = Buffer.alloc(dimensions * 4)
  raw.forEach((value, i) => bytes.writeFloatLE(value / norm, i * 4))
  return bytes
}

function floats(bytes: Buffer): number[] {
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
}

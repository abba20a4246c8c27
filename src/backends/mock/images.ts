// POST /images/generations (JSON) and /images/edits (multipart): `n` small PNGs whose
// colours come from a hash of the prompt (and, for edits, of the uploaded images' sizes),
// so a glance at the picture tells which request made it. The size is always 16x16,
// whatever `size` asks for: the mock proves the plumbing, not the pixels.
import { countTextTokens } from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { missingParameter } from './errors.ts'
import { digest } from './hash.ts'
import { unixSeconds } from './ids.ts'
import { formBody, jsonBody, optionalEnum, optionalInteger, requiredString } from './params.ts'
import { encodePng, type Rgb } from './png.ts'
import { jsonResponse } from './reply.ts'

export const IMAGE_SIZE = 16
/** Output tokens billed per image: what gpt-image-1 charges for a low-quality square image. */
export const OUTPUT_TOKENS_PER_IMAGE = 272
/** Input tokens billed per uploaded image, a flat price like the low-detail vision rate. */
export const INPUT_TOKENS_PER_IMAGE = 85
const MAX_IMAGES = 10

export async function imageGenerations(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const body = jsonBody(request)
  const prompt = requiredString(body, 'prompt')
  const n = optionalInteger(body, 'n', { min: 1, max: MAX_IMAGES }) ?? 1
  const format = optionalEnum(body, 'response_format', ['url', 'b64_json'] as const) ?? 'b64_json'
  return imagesResponse(ctx, { seed: prompt, n, format, textTokens: await countTextTokens(prompt), imageTokens: 0 })
}

export async function imageEdits(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const form = formBody(request)
  const prompt = requiredString(form.fields, 'prompt')
  const n = optionalInteger(form.fields, 'n', { min: 1, max: MAX_IMAGES }) ?? 1
  const format = optionalEnum(form.fields, 'response_format', ['url', 'b64_json'] as const) ?? 'b64_json'
  const images = form.files.filter((f) => f.field === 'image' || f.field === 'image[]')
  if (images.length === 0) throw missingParameter('image')
  return imagesResponse(ctx, {
    seed: `${prompt}\u0000${images.map((f) => f.size).join(',')}`,
    n,
    format,
    textTokens: await countTextTokens(prompt),
    imageTokens: images.length * INPUT_TOKENS_PER_IMAGE,
  })
}

interface ImageRequest {
  readonly seed: string
  readonly n: number
  readonly format: 'url' | 'b64_json'
  readonly textTokens: number
  readonly imageTokens: number
}

function imagesResponse(
  ctx: MockContext,
  { seed, n, format, textTokens, imageTokens }: ImageRequest,
): UpstreamResponse {
  const data = Array.from({ length: n }, (_, i) => {
    const png = picture(`${i}\u0000${seed}`).toString('base64')
    // No server holds the image, so a "url" is a data: URL of the same PNG.
    return format === 'url' ? { url: `data:image/png;base64,${png}` } : { b64_json: png }
  })
  const outputTokens = n * OUTPUT_TOKENS_PER_IMAGE
  return jsonResponse(200, {
    created: unixSeconds(ctx.now()),
    data,
    background: 'opaque',
    output_format: 'png',
    usage: {
      input_tokens: textTokens + imageTokens,
      input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
      output_tokens: outputTokens,
      total_tokens: textTokens + imageTokens + outputTokens,
    },
  })
}

/** Two colours from the hash, in a diagonal split: visibly a picture, and cheap to make. */
function picture(seed: string): Buffer {
  const h = digest(seed)
  const first: Rgb = [h[0] ?? 0, h[1] ?? 0, h[2] ?? 0]
  const second: Rgb = [255 - first[0], 255 - first[1], 255 - first[2]]
  return encodePng(IMAGE_SIZE, IMAGE_SIZE, (x, y) => (x + y < IMAGE_SIZE ? first : second))
}

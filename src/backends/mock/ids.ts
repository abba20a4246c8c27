// Object ids in OpenAI's style ("chatcmpl-…", "file-…", "resp_…"). Unlike the content,
// ids are random: two identical requests are still two objects.
import { randomBytes } from 'node:crypto'

/** Constant: the mock's "configuration" never changes between releases of a reply. */
export const SYSTEM_FINGERPRINT = 'fp_tollgate_mock'

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

export function newId(prefix: string, length = 24): string {
  const bytes = randomBytes(length)
  let id = prefix
  // 256 % 62 leaves a slight bias towards the first letters; harmless for ids.
  for (const byte of bytes) id += ALPHABET[byte % ALPHABET.length]
  return id
}

export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000)
}

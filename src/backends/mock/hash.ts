// Deterministic randomness. Every "random" thing the mock makes (words, vectors, colours)
// is drawn from a hash of the request, so the same request always gets the same answer.
import { createHash } from 'node:crypto'

export function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest()
}

export function seedOf(text: string): number {
  return digest(text).readUInt32LE(0)
}

/** mulberry32: a tiny, well-mixed 32-bit generator; uniform in [0, 1). */
export function randomFrom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

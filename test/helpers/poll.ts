// Polling a status the way the provider's guides do (ask, look, ask again), bounded: at
// most `tries` reads `everyMs` apart. What a test waits on is the condition, not the time.

export interface Polled<T> {
  /** The last value read: the one that met the condition, unless `met` is false. */
  readonly value: T
  /** Every value read, in order (a test checks the states came in their order). */
  readonly seen: readonly T[]
  readonly met: boolean
}

export async function pollUntil<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  tries = 1000,
  everyMs = 10,
): Promise<Polled<T>> {
  const seen: T[] = []
  for (let i = 0; i < tries; i++) {
    const value = await read()
    seen.push(value)
    if (done(value)) return { value, seen, met: true }
    await new Promise((wait) => setTimeout(wait, everyMs))
  }
  if (seen.length === 0) throw new Error('pollUntil: tries must be at least 1')
  return { value: seen[seen.length - 1] as T, seen, met: false }
}

/** The distinct values of a sequence in the order they first came (queued, queued, ingesting → queued, ingesting). */
export function transitions<T>(seen: readonly T[]): T[] {
  return seen.filter((v, i) => i === 0 || v !== seen[i - 1])
}

// The queue's adapter tests open stores and runners in a "space" (a data directory, a
// Redis namespace) that outlives them: this opens a fresh one and the adapters a test
// wants in it, and at the test's end closes the adapters before it cleans the space up.
import type { Test } from 'tap'

interface Closable {
  close(): Promise<void>
}

/**
 * A fresh space from `makeSpace` and what `open` opens in it (a tuple of stores or
 * runners); when the test ends they close in order, then the space is cleaned up.
 */
export async function openInFreshSpace<S extends { cleanup(): Promise<void> }, O extends readonly Closable[]>(
  t: Test,
  makeSpace: () => Promise<S>,
  open: (space: S) => Promise<O>,
): Promise<{ space: S; opened: O }> {
  const space = await makeSpace()
  const opened = await open(space)
  t.teardown(async () => {
    for (const adapter of opened) await adapter.close()
    await space.cleanup()
  })
  return { space, opened }
}

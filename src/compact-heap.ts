// One compacting garbage collection once the gateway is built, before it listens, when the
// start command exposes it (`--expose-gc`, which `npm start` and the Dockerfile pass).
// Booting allocates far more than it keeps (the configuration parsed and validated, every
// module compiled, the young generation grown to its largest), and V8 keeps the heap it
// grew to until its memory reducer sees a low allocation rate: an average that still holds
// the boot's samples, so at rest that takes minutes. This hands it back at once (about
// 18 MB of RSS on the default configuration, bench/results.md) for 0.1–0.3 s of a thread
// that serves nothing yet. Without the flag it does nothing: tests start gateways without it.

/** Runs the collection if `gc` is exposed; says whether it ran. */
export function compactHeap(): boolean {
  if (typeof globalThis.gc !== 'function') return false
  // last-resort: full collections that shrink the young generation and compact the old,
  // as V8 does under memory pressure; a regular one hands nothing back.
  globalThis.gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  return true
}

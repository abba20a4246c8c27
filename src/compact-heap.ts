// Compacting garbage collections, when the start command exposes them (`--expose-gc`, which
// `npm start` and the Dockerfile pass); without the flag nothing here runs, and tests start
// gateways without it unless they test this.
//
// Once the gateway is built, before it listens: booting allocates far more than it keeps
// (the configuration parsed and validated, every module compiled, the young generation grown
// to its largest), and V8 keeps the heap it grew to until its memory reducer sees a low
// allocation rate: an average that still holds the boot's samples, so at rest that takes
// minutes. This hands it back at once (about 18 MB of RSS on the default configuration,
// bench/results.md) for 0.1–0.3 s of a thread that serves nothing yet.
//
// After a burst, once nothing has been in flight for a while: under load V8 lets the old
// generation grow to a few times what is live before it collects (bench/results.md saw 167 MB
// of heap, most of it garbage, 3 s after a load run), and an idle gateway never hands that
// memory back. One collection when the gateway has gone quiet, and only when its memory has
// grown by enough since the last, returns it while no request can wait on the pause.
import { performance } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import type { Logger } from 'pino'
import type { Metrics } from './observability/metrics.ts'

/** Runs the collection if `gc` is exposed; says whether it ran. */
export function compactHeap(): boolean {
  if (typeof globalThis.gc !== 'function') return false
  // last-resort: full collections that shrink the young generation and compact the old,
  // as V8 does under memory pressure; a regular one hands nothing back.
  globalThis.gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  return true
}

export interface IdleCompactionOptions {
  /** How long no request may have been in flight before the collection runs; 0 turns it off. */
  readonly quietMs: number
  /** How much the resident memory must have grown since the last collection for one to be worth it. */
  readonly minGrowthBytes: number
}

/**
 * After each burst: a compacting collection once `idleForMs()` has reached quietMs and the
 * process's resident memory has grown by minGrowthBytes since the last (the boot's, at first).
 * Resident memory, not the heap's size: V8's own idle collection shrinks the heap it reports
 * some 10 s after a burst but keeps the memory, which only a collection like this one (it
 * also releases the pages V8 pools) hands back. Checked a few times per quietMs on an
 * unref'd timer; nothing is added to a request's path. Each is logged, and counted in
 * `metrics` when given (its pause, the memory handed back). Returns the stop.
 */
export function compactAfterBursts(
  idleForMs: () => number,
  options: IdleCompactionOptions,
  log: Pick<Logger, 'info'>,
  metrics?: Pick<Metrics, 'heapCompactions' | 'heapCompactionReleased'>,
): () => void {
  if (typeof globalThis.gc !== 'function' || options.quietMs === 0) return () => {}
  let baseline = process.memoryUsage.rss()
  const timer = setInterval(
    () => {
      if (idleForMs() < options.quietMs) return
      const rssBefore = process.memoryUsage.rss()
      if (rssBefore < baseline + options.minGrowthBytes) return
      const heapBefore = getHeapStatistics().total_heap_size
      const started = performance.now()
      compactHeap()
      const pauseMs = Math.round(performance.now() - started)
      baseline = process.memoryUsage.rss()
      metrics?.heapCompactions.observe(pauseMs / 1000)
      metrics?.heapCompactionReleased.inc(Math.max(0, rssBefore - baseline))
      log.info(
        { rssBefore, rssAfter: baseline, heapBefore, heapAfter: getHeapStatistics().total_heap_size, pauseMs },
        'heap compacted after a burst',
      )
    },
    Math.max(20, Math.round(options.quietMs / 4)),
  )
  timer.unref()
  return () => clearInterval(timer)
}

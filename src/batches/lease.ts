// A batch is driven by the instance holding its lease (runner.ts). The runner renews it at
// each look; work that can outlast a lease (writing the output files of a large batch) runs
// with the lease renewed beside it, so no other instance takes the batch on meanwhile. The
// writes themselves are conditional on the lease (BatchStore.update's holder), so an
// instance that lost it anyway (stalled longer than the lease) writes nothing over the
// instance that took the batch on.
import type { BatchStore } from './port.ts'

/** How long a lease lasts without renewal: another instance takes the batch after it. */
export const LEASE_MS = 30_000

export interface LeaseOptions {
  readonly store: Pick<BatchStore, 'lease'>
  readonly id: string
  readonly instance: string
  readonly ttlMs?: number
}

/**
 * Runs `work` with the lease renewed every third of its life. `held()` turns false once a
 * renewal found another instance holding it (a store that did not answer proves nothing).
 */
export async function whileLeased<T>(options: LeaseOptions, work: (held: () => boolean) => Promise<T>): Promise<T> {
  const ttlMs = options.ttlMs ?? LEASE_MS
  let held = true
  const timer = setInterval(() => {
    options.store.lease(options.id, options.instance, ttlMs).then(
      (ok) => {
        if (!ok) held = false
      },
      () => undefined,
    )
  }, ttlMs / 3)
  timer.unref()
  try {
    return await work(() => held)
  } finally {
    clearInterval(timer)
  }
}

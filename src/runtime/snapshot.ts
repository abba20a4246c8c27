// The runtime configuration: everything a call needs that `tollgate reload` may change
// (plans and tiers, the models and their deployments, the backends' adapters, the
// deployments' declared capacity, the RAG services and their rules), as one immutable
// snapshot. A reload builds the next snapshot whole beside the running one and swaps it
// in with one assignment; nothing in a snapshot is ever changed after it is built.
//
// Each call reads `current` once, when it starts, and keeps that snapshot to its end: a
// call in flight finishes on the configuration it started with, the next one gets the
// new one, and no call ever sees half of each. Settings a reload cannot change (ports,
// store, limiter, queue: config/live-settings.ts) are read from the snapshot's config as
// well; they are the same in every snapshot of one process.
import type { BackendRegistry } from '../backends/registry.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { Config } from '../config/schema.ts'
import type { ModelCatalogue } from '../inference/models.ts'
import type { RagBackends } from '../rag/backends.ts'

export interface Runtime {
  /** The whole validated configuration this snapshot was built from. */
  readonly config: Config
  /** sha256 (hex) of the configuration file's bytes, as `sha256sum` prints it. */
  readonly hash: string
  /** sha256 of the plans file, when `plans:` names one; null when the plans are inline. */
  readonly plansHash: string | null
  /** When it was loaded (epoch ms). */
  readonly loadedAt: number
  /** Which adapters serve which public model. */
  readonly registry: BackendRegistry
  /** The deployments' declared capacity, over the store every snapshot shares. */
  readonly capacity: DeploymentCapacity
  /** What GET /models shows. */
  readonly catalogue: ModelCatalogue
  /** Where each RAG service's requests go. */
  readonly rag: RagBackends
}

/** Where a call finds the snapshot in force: read `current` once, at the call's start. */
export interface RuntimeSource<R = Runtime> {
  readonly current: R
}

export interface RuntimeHolder<R = Runtime> extends RuntimeSource<R> {
  /** Puts `next` in force for every call that starts from now on; returns the one it replaces. */
  swap(next: R): R
}

/**
 * The one place the snapshot in force is kept. `current` is a plain data property (not a
 * getter), so reading it on the hot path costs one property load.
 */
export function holdRuntime<R>(first: R): RuntimeHolder<R> {
  const holder = {
    current: first,
    swap(next: R): R {
      const previous = holder.current
      holder.current = next
      return previous
    },
  }
  return holder
}

// Builds a runtime snapshot (snapshot.ts) from a loaded configuration: at boot, and beside
// the running one for each reload. What did not change is shared with the previous
// snapshot rather than made again: a backend whose settings are the same keeps its adapter
// (its connections, and a mock's files and jobs), a RAG service its target, and the
// deployments' capacity keeps its store and what this instance has learned. `retire` then
// closes what only the previous snapshot used, once the calls on it are done.
import { embeddingDimensions } from '../backends/create.ts'
import type { BackendAdapter } from '../backends/port.ts'
import { createRegistry } from '../backends/registry.ts'
import type { CapacityFactory } from '../capacity/create.ts'
import type { LoadedConfig } from '../config/load.ts'
import type { BackendConfig, Config } from '../config/schema.ts'
import { createModelCatalogue } from '../inference/models.ts'
import { startRagBackends } from '../rag/backends.ts'
import type { Runtime } from './snapshot.ts'

export interface RuntimeParts {
  /** Makes the adapter of one backend (backends/create.ts with the process's secrets and data directory). */
  readonly adapterOf: (name: string, backend: BackendConfig, config: Config) => BackendAdapter
  /** The deployments' capacity of a configuration, over the one store (capacity/create.ts). */
  readonly capacityOf: CapacityFactory
  /** Unix seconds reported as the models' `created`. */
  readonly startedAt: number
  readonly now?: () => number
}

export async function buildRuntime(loaded: LoadedConfig, parts: RuntimeParts, previous?: Runtime): Promise<Runtime> {
  const { config } = loaded
  const reusable = new Map<string, BackendAdapter>()
  if (previous !== undefined) {
    for (const adapter of previous.registry.adapters()) {
      if (fingerprint(previous.config, adapter.name) === fingerprint(config, adapter.name))
        reusable.set(adapter.name, adapter)
    }
  }
  const registry = createRegistry(
    config,
    (name, backend) => reusable.get(name) ?? parts.adapterOf(name, backend, config),
  )
  const rag = await startRagBackends(config.rag, previous?.rag)
  try {
    await registry.ready()
  } catch (error) {
    await retireAdapters(registry.adapters(), previous?.registry.adapters() ?? [])
    rag.retire(previous?.rag ?? rag)
    throw error
  }
  return Object.freeze({
    config,
    hash: loaded.hash,
    plansHash: loaded.plansHash,
    loadedAt: (parts.now ?? Date.now)(),
    registry,
    capacity: parts.capacityOf(config.models),
    catalogue: createModelCatalogue(registry, parts.startedAt, config.plans.catalogue?.models),
    rag,
  })
}

/** Closes what `previous` used and `next` does not: call it once no call holds `previous`. */
export async function retireRuntime(previous: Runtime, next: Runtime): Promise<void> {
  previous.rag.retire(next.rag)
  await retireAdapters(previous.registry.adapters(), next.registry.adapters())
}

async function retireAdapters(retiring: readonly BackendAdapter[], staying: readonly BackendAdapter[]): Promise<void> {
  const kept = new Set(staying)
  await Promise.allSettled(retiring.filter((a) => !kept.has(a)).map((a) => a.close()))
}

/** What an adapter is made from: the same fingerprint, the same adapter. */
function fingerprint(config: Config, name: string): string | undefined {
  const backend = config.backends[name]
  if (backend === undefined) return undefined
  // A mock answers embeddings in the dimension of the models deployed on it.
  const dimensions = backend.type === 'mock' ? [...embeddingDimensions(name, config.models)] : []
  return JSON.stringify([backend, dimensions])
}

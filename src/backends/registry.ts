// Which adapters serve which public model, from the configuration.
import type { Config, ModelConfig, ModelKind } from '../config/schema.ts'
import type { BackendAdapter } from './port.ts'

export interface Deployment {
  readonly adapter: BackendAdapter
  /** The model name the upstream knows, or null for model-less calls. */
  readonly upstreamModel: string | null
  readonly weight: number
  readonly deploymentIndex: number
}

export interface ModelRoute {
  readonly config: ModelConfig
  readonly deployments: readonly Deployment[]
}

export interface BackendRegistry {
  model(name: string): ModelRoute | undefined
  models(): readonly ModelConfig[]
  modelsOfKind(kind: ModelKind): readonly ModelConfig[]
  /** The backend for files and fine-tuning jobs. */
  readonly resources: Deployment
  adapters(): readonly BackendAdapter[]
  /** The ready() of every adapter a model or the resource backend uses. */
  ready(): Promise<void>
  close(): Promise<void>
}

export type AdapterFactory = (name: string, config: Config['backends'][string]) => BackendAdapter

export function createRegistry(
  config: Pick<Config, 'backends' | 'models' | 'resourceBackend'>,
  factory: AdapterFactory,
): BackendRegistry {
  const adapters = new Map<string, BackendAdapter>()
  for (const [name, backend] of Object.entries(config.backends)) adapters.set(name, factory(name, backend))
  const adapter = (name: string): BackendAdapter => {
    const found = adapters.get(name)
    if (!found) throw new Error(`unknown backend ${name}`) // the schema already refused this
    return found
  }
  const routes = new Map<string, ModelRoute>()
  for (const model of config.models) {
    routes.set(model.name, {
      config: model,
      deployments: model.deployments.map((d, i) => ({
        adapter: adapter(d.backend),
        upstreamModel: d.model ?? model.name,
        weight: d.weight,
        deploymentIndex: i,
      })),
    })
  }
  const resources: Deployment = {
    adapter: adapter(config.resourceBackend),
    upstreamModel: null,
    weight: 1,
    deploymentIndex: 0,
  }
  return {
    model: (name) => routes.get(name),
    models: () => config.models,
    modelsOfKind: (kind) => config.models.filter((m) => m.kind === kind),
    resources,
    adapters: () => [...adapters.values()],
    async ready() {
      // Only adapters something routes to: a backend declared but unused loads nothing.
      const used = new Set([
        resources.adapter,
        ...[...routes.values()].flatMap((r) => r.deployments.map((d) => d.adapter)),
      ])
      await Promise.all([...used].map((a) => a.ready?.()))
    },
    async close() {
      await Promise.allSettled([...adapters.values()].map((a) => a.close()))
    },
  }
}

// GET /models, /models/{id} and /audio/models: answered by the gateway from its
// configuration, listing only what the key may use.
import type { BackendRegistry } from '../backends/registry.ts'
import type { CatalogueFacts, ModelConfig, ModelKind } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { Principal } from '../keys/record.ts'
import { modelMetaData, type ModelMetaData } from './model-meta.ts'
import { mayUseModel } from './scopes.ts'

export interface ModelObject {
  readonly id: string
  readonly object: 'model'
  readonly created: number
  readonly owned_by: string
  /** The provider's extra field (OpenAI's Model has no such field; its SDK keeps it). */
  readonly meta_data: ModelMetaData
}

export type ModelCatalogue = ReturnType<typeof createModelCatalogue>

/** `facts`: the plans' catalogue block (display names, regions of the provider's export). */
export function createModelCatalogue(
  registry: BackendRegistry,
  created: number,
  facts: Readonly<Record<string, CatalogueFacts>> = {},
) {
  // A catalogue is built per runtime snapshot, whose configuration never changes: each model's object is built once.
  const views = new Map<string, ModelObject>()
  const view = (m: ModelConfig): ModelObject => {
    let object = views.get(m.name)
    if (object === undefined) {
      object = {
        id: m.name,
        object: 'model',
        created,
        owned_by: m.ownedBy,
        meta_data: modelMetaData(m, Object.hasOwn(facts, m.name) ? facts[m.name] : undefined),
      }
      views.set(m.name, object)
    }
    return object
  }
  const visible = (principal: Principal, kind?: ModelKind): ModelObject[] =>
    registry
      .models()
      .filter((m) => (kind === undefined || m.kind === kind) && mayUseModel(principal, m.name))
      .map(view)
  return {
    list: (principal: Principal, kind?: ModelKind) => ({ object: 'list' as const, data: visible(principal, kind) }),
    get(principal: Principal, id: string): ModelObject {
      const route = registry.model(id)
      if (!route || !mayUseModel(principal, id)) {
        throw gatewayError('model_not_found', {
          message:
            'The model does not exist or you do not have access to it. GET /v2/models lists the models this key may use.',
          param: 'model',
        })
      }
      return view(route.config)
    },
  }
}

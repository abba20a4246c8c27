// GET /models, /models/{id} and /audio/models: answered by the gateway from its
// configuration, listing only what the key may use.
import type { BackendRegistry } from '../backends/registry.ts'
import type { ModelConfig, ModelKind } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { Principal } from '../keys/record.ts'
import { mayUseModel } from './scopes.ts'

export interface ModelObject {
  readonly id: string
  readonly object: 'model'
  readonly created: number
  readonly owned_by: string
}

export function createModelCatalogue(registry: BackendRegistry, created: number) {
  const view = (m: ModelConfig): ModelObject => ({ id: m.name, object: 'model', created, owned_by: m.ownedBy })
  const visible = (principal: Principal, kind?: ModelKind): ModelObject[] =>
    registry.models().filter((m) => (kind === undefined || m.kind === kind) && mayUseModel(principal, m.name)).map(view)
  return {
    list: (principal: Principal, kind?: ModelKind) => ({ object: 'list' as const, data: visible(principal, kind) }),
    get(principal: Principal, id: string): ModelObject {
      const route = registry.model(id)
      if (!route || !mayUseModel(principal, id)) {
        throw gatewayError('model_not_found', { message: 'The model does not exist or you do not have access to it.', param: 'model' })
      }
      return view(route.config)
    },
  }
}

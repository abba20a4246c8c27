// A key may be limited to some models and some endpoints; outside them it gets 403.
import type { Endpoint } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { Principal } from '../keys/record.ts'

export function mayUseModel(principal: Principal, model: string): boolean {
  return principal.key.models === null || principal.key.models.includes(model)
}

export function checkModelScope(principal: Principal, model: string): void {
  if (!mayUseModel(principal, model)) throw gatewayError('model_not_allowed', { param: 'model' })
}

export function checkEndpointScope(principal: Principal, endpoint: Endpoint): void {
  if (principal.key.endpoints !== null && !principal.key.endpoints.includes(endpoint)) {
    throw gatewayError('endpoint_not_allowed')
  }
}

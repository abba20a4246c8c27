// Route rules: which routes of a service anyone may call, and which roles the rest need.
import type { RagServiceConfig } from '../config/schema.ts'
import type { Identity } from '../auth/identity.ts'
import { gatewayError } from '../errors.ts'

/** Segment-boundary prefix match: /api/v1/configs covers /api/v1/configs and /api/v1/configs/x. */
function underPrefix(path: string, prefix: string): boolean {
  const p = prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix
  return p === '/' || path === p || path.startsWith(`${p}/`)
}

/** HEAD is a GET without a body: what a GET may read, so may a HEAD; what a GET may not, neither. */
function methodsCover(methods: readonly string[], method: string): boolean {
  return methods.includes(method) || (method === 'HEAD' && methods.includes('GET'))
}

const trimmed = (path: string): string => (path.length > 1 ? path.replace(/\/+$/, '') : path)

/** `path`: the route inside the service, decoded once (what the backend routes on). */
export function isPublicRoute(service: RagServiceConfig, method: string, path: string): boolean {
  return service.publicRoutes.some((r) => methodsCover([r.method], method) && trimmed(r.path) === trimmed(path))
}

/** Every rule matching the method and path must be met by one of the caller's roles; else 403. */
export function checkRouteRules(service: RagServiceConfig, method: string, path: string, identity: Identity): void {
  for (const rule of service.rules) {
    if (!methodsCover(rule.methods, method) || !underPrefix(path, rule.prefix)) continue
    if (!rule.roles.some((role) => identity.roles.includes(role))) throw gatewayError('rag_route_forbidden')
  }
}

// The RAG gateway's routing side: /<service>/<route…> to that service's backend, whose
// corridor is handler.ts. Every refusal is FastAPI's {"detail"}.
import type { HTTPMethod } from 'find-my-way'
import type { AccessTokenVerifier } from '../auth/identity.ts'
import { gatewayError, type GatewayError } from '../errors.ts'
import { RAG_SERVICE_ALIASES, RAG_SERVICES, type Config, type RagService } from '../config/schema.ts'
import type { Router } from '../http/router.ts'
import type { Guardrails } from '../guardrails/create.ts'
import type { Limiter } from '../limits/port.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createOutageLog } from '../observability/outage-log.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { RagBackends } from './backends.ts'
import type * as RagHandler from './handler.ts'

/** The methods routed to a service (the API reference documents these; HEAD and OPTIONS get 405). */
export const RAG_METHODS: readonly HTTPMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']

/** Every path segment that names a service, aliases included. */
export const RAG_SEGMENTS: ReadonlyArray<readonly [segment: string, service: RagService]> = [
  ...RAG_SERVICES.map((s) => [s, s] as const),
  ...Object.entries(RAG_SERVICE_ALIASES),
]

export interface RagGatewayDeps {
  /** The boot's configuration: server.* (a reload cannot change it). */
  readonly config: Pick<Config, 'server'>
  /** The RAG services, rules, limits and headers in force, and where each service is: read once per request. */
  readonly runtime: RuntimeSource<{ readonly config: Pick<Config, 'rag' | 'guardrails'>; readonly rag: RagBackends }>
  readonly accessTokens: AccessTokenVerifier
  readonly limiter: Limiter
  readonly metrics: Metrics
  /** Chat prompts checked under `guardrails.rag` (prompt-check.ts); absent: none. */
  readonly guardrails?: Guardrails
}

export function registerRagRoutes(router: Router, deps: RagGatewayDeps): void {
  const outage = createOutageLog('RAG gateway')
  // The corridor itself (handler.ts: tokens, rules, limits, headers, relay) is loaded by the
  // first request to a service: a gateway with no RAG services never loads it.
  let handler: Promise<typeof RagHandler> | undefined
  for (const [segment, service] of RAG_SEGMENTS) {
    router.on([...RAG_METHODS], `/${segment}/*`, async (ctx) => {
      const { handleRagRequest } = await (handler ??= import('./handler.ts'))
      await handleRagRequest(ctx, segment, service, deps, outage)
    })
  }
}

/**
 * What the RAG gateway answers to a path the router could not match, or null where the
 * OpenAI-shaped 404 stands. Under a service prefix the path was one the router cannot read
 * (malformed percent-encoding): 400, as for any other bad path. A first segment that looks
 * like a service path (lower-case words joined by hyphens, as `query-pipeline`) names an
 * unknown service: FastAPI's 404. Anything else (/v2, /v1, /queue, /admin and whatever a
 * client mangled them into) keeps the inference side's 404.
 */
export function unmatchedRagPath(url: string): GatewayError | null {
  const path = url.split('?', 1)[0] ?? ''
  const segment = RAG_SEGMENTS.find(([name]) => path.startsWith(`/${name}/`) || path === `/${name}`)?.[0]
  // A service's root is not routed (the router drops a trailing slash, and /<service>/* needs more).
  if (segment !== undefined)
    return path.length <= segment.length + 2 ? gatewayError('rag_unknown_route') : gatewayError('rag_bad_path')
  if (/^\/[a-z][a-z0-9]*(-[a-z0-9]+)+(\/|\?|$)/.test(url)) return gatewayError('rag_unknown_service')
  return null
}

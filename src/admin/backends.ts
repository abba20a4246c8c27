// /admin/backends: each model's deployments, what the config declares of their capacity,
// and where that capacity stands now in the shared store (capacity/view.ts), so an
// operator can see why traffic went where it went, or why the gateway answered 429.
import type { z } from 'zod'
import type { BackendList } from '../api/admin.ts'
import type { DeploymentCapacity } from '../capacity/port.ts'
import type { DeploymentView } from '../capacity/view.ts'
import { viewDeployments } from '../capacity/view.ts'
import type { Router } from '../http/router.ts'
import type { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import { sendAdmin } from './http.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { AdminDeps, AdminRuntime } from './routes.ts'

type Reply = z.infer<typeof BackendList>
type DeploymentReply = Reply['data'][number]['deployments'][number]

const isoOf = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString())

function deploymentReply(
  v: DeploymentView,
  now: number,
  breaker: Pick<CircuitBreaker, 'inspect'> | undefined,
): DeploymentReply {
  const s = v.state
  const circuit = breaker?.inspect(v.backend)
  return {
    object: 'deployment',
    id: v.deploymentId,
    backend: v.backend,
    upstream_model: v.upstreamModel,
    weight: v.declared.weight,
    limits: { rpm: v.declared.rpm, tpm: v.declared.tpm, max_concurrent: v.declared.maxConcurrent },
    state:
      s === null
        ? null
        : {
            in_flight: s.inFlight,
            requests: s.requests,
            tokens: s.tokens,
            remaining_requests: v.remaining.requests,
            remaining_tokens: v.remaining.tokens,
            learned: {
              remaining_requests: s.learnedRequests,
              requests_reset_at: isoOf(s.learnedRequestsUntil),
              remaining_tokens: s.learnedTokens,
              tokens_reset_at: isoOf(s.learnedTokensUntil),
            },
            cooling_down: s.coolingUntil !== null && s.coolingUntil > now,
            cooling_until: isoOf(s.coolingUntil),
          },
    circuit:
      circuit === undefined
        ? null
        : { open: circuit.open, failures: circuit.failures, open_until: isoOf(circuit.openUntil) },
  }
}

/** A gateway built without a capacity (an embedder's): the declared side only. */
const UNTRACKED: Pick<DeploymentCapacity, 'inspect'> = { inspect: async () => [] }

export function registerBackendRoutes(
  router: Router,
  deps: Pick<AdminDeps, 'authenticateAdmin' | 'breaker'> & {
    readonly runtime: RuntimeSource<{
      readonly config: Pick<AdminRuntime['config'], 'models'>
      readonly capacity?: DeploymentCapacity
    }>
  },
): void {
  router.on('GET', '/admin/backends', async (ctx) => {
    ctx.route = 'admin.backends'
    deps.authenticateAdmin(ctx.req)
    const { config, capacity } = deps.runtime.current
    const { models } = config
    const views = await viewDeployments(capacity ?? UNTRACKED, models)
    const now = Date.now()
    const reply: Reply = {
      object: 'list',
      store: capacity?.kind ?? null,
      state_available: capacity !== undefined && views.every((v) => v.state !== null),
      data: models.map((m) => ({
        object: 'model',
        name: m.name,
        kind: m.kind,
        deployments: views.filter((v) => v.model === m.name).map((v) => deploymentReply(v, now, deps.breaker)),
      })),
    }
    sendAdmin(ctx, 200, reply)
  })
}

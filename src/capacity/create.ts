// The gateway's DeploymentCapacity, from the config: the declared limits of every
// deployment (by capacity id, ids.ts), counted on the gateway's Redis when its store is
// Redis (one picture for the whole fleet) and in this process otherwise. A store that does
// not answer fails open (capacity.ts: the pick is made by weight and the upstream's own
// limits still hold), and is logged once per outage like the other stores.
import type { Config } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import { createOutageLog } from '../observability/outage-log.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { createDeploymentCapacity } from './capacity.ts'
import { deploymentIdOf } from './ids.ts'
import { memoryCapacityStore } from './memory.ts'
import type { DeploymentCapacity, DeploymentDeclaration } from './port.ts'
import type { ConfiguredModel } from './view.ts'
import { redisCapacityStore } from './redis.ts'

/**
 * Each deployment's declaration by capacity id. Two public models served by one upstream
 * deployment share its id and its quota: the first that declares a limit names it.
 */
export function declarationsOf(models: readonly ConfiguredModel[]): Record<string, DeploymentDeclaration> {
  const out: Record<string, DeploymentDeclaration> = {}
  for (const model of models) {
    for (const d of model.deployments) {
      const id = deploymentIdOf({ backend: d.backend, upstreamModel: d.model ?? model.name })
      const seen = out[id]
      if (seen !== undefined && (seen.rpm ?? seen.tpm ?? seen.maxConcurrent) !== undefined) continue
      out[id] = {
        weight: d.weight,
        ...(d.rpm === undefined ? {} : { rpm: d.rpm }),
        ...(d.tpm === undefined ? {} : { tpm: d.tpm }),
        ...(d.maxConcurrent === undefined ? {} : { maxConcurrent: d.maxConcurrent }),
        ...(d.window === undefined ? {} : { window: d.window }),
      }
    }
  }
  return out
}

/**
 * Each deployment's pool: the deployments joined by the models that may choose among them
 * (a model's deployments are one pool, and two models sharing a deployment join theirs),
 * named by its first id in sort order. A call picks within one pool, in one script on the
 * pool's slot (capacity/redis.ts), and pools spread over a cluster's masters. A reload that
 * joins or splits pools starts the moved deployments' counts afresh on their new slot
 * (capacity/redis.ts says why that is acceptable).
 */
export function poolsOf(models: readonly ConfiguredModel[]): Record<string, string> {
  const parent = new Map<string, string>()
  const root = (id: string): string => {
    let r = id
    for (let up = parent.get(r); up !== undefined && up !== r; up = parent.get(r)) r = up
    parent.set(id, r)
    return r
  }
  const join = (a: string, b: string): void => {
    const [ra, rb] = [root(a), root(b)]
    // The smaller id leads: the pool's name does not depend on the order models are listed in.
    if (ra < rb) parent.set(rb, ra)
    else if (rb < ra) parent.set(ra, rb)
  }
  for (const model of models) {
    const ids = model.deployments.map((d) =>
      deploymentIdOf({ backend: d.backend, upstreamModel: d.model ?? model.name }),
    )
    for (const id of ids) if (!parent.has(id)) parent.set(id, id)
    for (const id of ids.slice(1)) join(ids[0] as string, id)
  }
  return Object.fromEntries([...parent.keys()].map((id) => [id, root(id)]))
}

/** Builds the capacity of a configuration's models; every one it builds shares one store. */
export type CapacityFactory = (models: readonly ConfiguredModel[]) => DeploymentCapacity

/**
 * The store (and what this instance learned) is made once; each configuration, the boot's
 * and each reload's, gets a capacity of its own declarations over it.
 */
export function createCapacityFromConfig(
  config: Pick<Config, 'store'>,
  redis: RedisConnection | undefined,
  log: Logger,
  onSaturated?: (deploymentId: string, reason: 'full' | 'cooling_down', until: number | null) => void,
): CapacityFactory {
  const outage = createOutageLog('deployment capacity')
  const store = redis === undefined ? memoryCapacityStore() : redisCapacityStore(redis, config.store.keyPrefix)
  const learned = new Set<string>()
  const roomListeners = new Set<(deploymentId: string) => void>()
  const onError = (error: unknown): void =>
    outage.failed(log, error instanceof Error ? error : new Error(String(error)))
  return (models) =>
    createDeploymentCapacity(store, {
      deployments: declarationsOf(models),
      pools: poolsOf(models),
      onError,
      learned,
      roomListeners,
      ...(onSaturated === undefined ? {} : { onSaturated }),
    })
}

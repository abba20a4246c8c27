// What an operator sees of the deployments' capacity: GET /admin/backends and the
// per-deployment gauges both read it from here, so the two never disagree on what
// "remaining" means. One inspect() per look, for every configured deployment at once.
//
// Remaining is the tighter of what the config declares (rpm or tpm minus what this window
// has counted) and what the upstream last said is left, while that still holds; unknown
// (null) when neither says anything.
import { declarationsOf } from './create.ts'
import { deploymentIdOf } from './ids.ts'
import type { DeploymentReading } from '../observability/metrics.ts'
import type { DeploymentCapacity, DeploymentDeclaration, DeploymentState } from './port.ts'

/** A model's deployment as the config has it (the schema's type, or any with these fields). */
export interface ConfiguredDeployment extends DeploymentDeclaration {
  readonly backend: string
  /** The name the upstream knows the model by; the public name when absent. */
  readonly model?: string | undefined
}

export interface ConfiguredModel {
  readonly name: string
  readonly deployments: readonly ConfiguredDeployment[]
}

/** One deployment of one public model, and where its capacity stands. */
export interface DeploymentView {
  readonly model: string
  readonly backend: string
  readonly upstreamModel: string
  readonly deploymentId: string
  readonly declared: Required<Pick<DeploymentDeclaration, 'weight'>> & {
    readonly rpm: number | null
    readonly tpm: number | null
    readonly maxConcurrent: number | null
  }
  /** Null when the store did not answer. */
  readonly state: DeploymentState | null
  readonly remaining: Headroom
}

export interface Headroom {
  readonly requests: number | null
  readonly tokens: number | null
}

const declaredLimit = (n: number | undefined): number | null =>
  typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.floor(n) : null

const tighter = (a: number | null, b: number | null): number | null =>
  a === null ? b : b === null ? a : Math.min(a, b)

/** Requests and tokens left on a deployment: the declared window's rest, or the upstream's word, whichever is less. */
export function headroomOf(declaration: DeploymentDeclaration, state: DeploymentState | null): Headroom {
  if (state === null) return { requests: null, tokens: null }
  const rpm = declaredLimit(declaration.rpm)
  const tpm = declaredLimit(declaration.tpm)
  // A learned figure is spent down by the calls sent since the upstream spoke: it may dip below 0.
  const learned = (n: number | null): number | null => (n === null ? null : Math.max(0, n))
  return {
    requests: tighter(rpm === null ? null : Math.max(0, rpm - state.requests), learned(state.learnedRequests)),
    tokens: tighter(tpm === null ? null : Math.max(0, tpm - state.tokens), learned(state.learnedTokens)),
  }
}

interface Target {
  readonly model: string
  readonly deployment: ConfiguredDeployment
  readonly upstreamModel: string
  readonly deploymentId: string
}

function targetsOf(models: readonly ConfiguredModel[]): Target[] {
  return models.flatMap((m) =>
    m.deployments.map((d) => {
      const upstreamModel = d.model ?? m.name
      return {
        model: m.name,
        deployment: d,
        upstreamModel,
        deploymentId: deploymentIdOf({ backend: d.backend, upstreamModel }),
      }
    }),
  )
}

/**
 * Every configured deployment of every model, in config order, with its state. A deployment
 * two public models share is shown under each (its state is the same). A store that fails
 * gives states of null, not an error: the declared side is still worth seeing.
 */
export async function viewDeployments(
  capacity: Pick<DeploymentCapacity, 'inspect'>,
  models: readonly ConfiguredModel[],
): Promise<DeploymentView[]> {
  const targets = targetsOf(models)
  // A deployment two models share counts under the limits the capacity holds it to: the first declared.
  const declarations = declarationsOf(models)
  const ids = [...new Set(targets.map((t) => t.deploymentId))]
  const states = new Map<string, DeploymentState>()
  try {
    for (const state of await capacity.inspect(ids)) states.set(state.deploymentId, state)
  } catch {
    // Unavailable: every state stays null.
  }
  return targets.map((t) => {
    const state = states.get(t.deploymentId) ?? null
    const declared = declarations[t.deploymentId] ?? t.deployment
    return {
      model: t.model,
      backend: t.deployment.backend,
      upstreamModel: t.upstreamModel,
      deploymentId: t.deploymentId,
      declared: {
        weight: t.deployment.weight ?? 1,
        rpm: declaredLimit(declared.rpm),
        tpm: declaredLimit(declared.tpm),
        maxConcurrent: declaredLimit(declared.maxConcurrent),
      },
      state,
      remaining: headroomOf(declared, state),
    }
  })
}

/** The gauges' source (Metrics.setCapacitySource): deployments whose state is known. */
export function capacityReadings(
  capacity: Pick<DeploymentCapacity, 'inspect'>,
  models: readonly ConfiguredModel[],
): () => Promise<DeploymentReading[]> {
  return async () =>
    (await viewDeployments(capacity, models)).flatMap((v) =>
      v.state === null
        ? []
        : [
            {
              deployment: v.deploymentId,
              model: v.model,
              remainingRequests: v.remaining.requests,
              remainingTokens: v.remaining.tokens,
              inFlight: v.state.inFlight,
              coolingUntil: v.state.coolingUntil,
            },
          ],
    )
}

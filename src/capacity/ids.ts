// A deployment's name in the capacity store: `<backend>/<upstream model>`, or `<backend>/*`
// for a deployment whose upstream knows no model name (the resources backend). Every
// instance derives the same id from the same config, so they share one set of counters;
// two public models served by the same upstream deployment share its quota too, as the
// upstream itself does.

/** The parts of a deployment its id is made of (a config deployment or a registry one). */
export interface DeploymentRef {
  /** The backend's name in the config. */
  readonly backend: string
  /** The model name the upstream knows, or null/undefined when there is none. */
  readonly upstreamModel: string | null | undefined
}

export function deploymentIdOf(deployment: DeploymentRef): string {
  return `${deployment.backend}/${deployment.upstreamModel ?? '*'}`
}

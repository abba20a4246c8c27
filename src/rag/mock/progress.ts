// Statuses that move on with time. The mock's uploads and ingestion tasks pass through
// their states one step apart, worked out when they are read: no timer runs, nothing has
// to be stopped, and a step of 0 answers the final state at once. A client polls, as the
// provider's guides do, until the state is final.

export interface Pace {
  /** Time between one state and the next; 0: the final state at once. */
  readonly stepMs: number
  /** A monotonic clock in ms. */
  now(): number
}

export function paceOf(stepMs: number): Pace {
  return { stepMs, now: () => performance.now() }
}

/** The state reached `since` + n steps: stages[n], the last one once every step has passed. */
export function stageAt<T>(pace: Pace, since: number, stages: readonly [T, ...T[]]): T {
  const last = stages.length - 1
  const steps = pace.stepMs <= 0 ? last : Math.floor((pace.now() - since) / pace.stepMs)
  return stages[Math.min(Math.max(steps, 0), last)] ?? stages[0]
}

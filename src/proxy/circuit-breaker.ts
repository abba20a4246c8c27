// Remembers which backends keep refusing connections, so failover stops trying a dead one
// first on every request. After `threshold` consecutive connect failures a backend's
// circuit opens for `coolDownMs`; once that passes it is tried first again, and a single
// further failure opens it anew. Any answer from the backend closes it.
export interface CircuitBreakerOptions {
  /** Consecutive connect failures that open the circuit. */
  readonly threshold?: number
  readonly coolDownMs?: number
  /** Milliseconds; injectable so tests control time. */
  readonly now?: () => number
}

interface State {
  failures: number
  openUntil: number
}

export class CircuitBreaker {
  readonly #threshold: number
  readonly #coolDownMs: number
  readonly #now: () => number
  readonly #states = new Map<string, State>()

  constructor(options: CircuitBreakerOptions = {}) {
    this.#threshold = options.threshold ?? 3
    this.#coolDownMs = options.coolDownMs ?? 10_000
    this.#now = options.now ?? Date.now
  }

  isOpen(key: string): boolean {
    const state = this.#states.get(key)
    return state !== undefined && state.openUntil > this.#now()
  }

  recordFailure(key: string): void {
    const state = this.#states.get(key) ?? { failures: 0, openUntil: 0 }
    state.failures += 1
    if (state.failures >= this.#threshold) state.openUntil = this.#now() + this.#coolDownMs
    this.#states.set(key, state)
  }

  recordSuccess(key: string): void {
    this.#states.delete(key)
  }

  /** Where a backend's circuit stands on this instance (for GET /admin/backends). */
  inspect(key: string): CircuitState {
    const state = this.#states.get(key)
    const open = state !== undefined && state.openUntil > this.#now()
    return { open, failures: state?.failures ?? 0, openUntil: open ? (state?.openUntil ?? null) : null }
  }
}

export interface CircuitState {
  /** Tried last (after every closed one) until openUntil. */
  readonly open: boolean
  /** Connect failures in a row. */
  readonly failures: number
  readonly openUntil: number | null
}

// A store outage is worth one warning, not one error per request that meets it: the first
// failure after a quiet spell is logged, the rest of the same outage only counted. An
// outage is over once no failure has been seen for quietMs.
import type { Logger } from './logger.ts'

export interface OutageLog {
  /** Records one failure; logs a warning if it opens a new outage. */
  failed(log: Logger, err: Error): void
}

export function createOutageLog(what: string, quietMs = 10_000, now: () => number = Date.now): OutageLog {
  let lastFailureAt = -Infinity
  let failures = 0
  return {
    failed(log, err) {
      const at = now()
      const opens = at - lastFailureAt > quietMs
      lastFailureAt = at
      if (!opens) {
        failures++
        return
      }
      // How many the previous outage had, for the operator who wonders how bad it was.
      log.warn(
        { err: err.message, previousOutageFailures: failures || undefined },
        `${what}: the store did not answer (further failures of this outage are not logged)`,
      )
      failures = 1
    },
  }
}

/**
 * A connection that knows when it is down and when it is back (a Redis client's `error`
 * and `ready` events): one error line when the outage starts, one line when it ends, with how
 * long it lasted and how many connection errors it saw in between (those are not logged).
 */
export interface ConnectionOutage {
  /** A connection error: opens an outage unless one is open. */
  down(err: Error): void
  /** The connection is up: closes the open outage, if any. */
  up(): void
  /** Whether an outage is open now. */
  readonly isDown: boolean
}

/** `what` names the connection in the lines ("Redis"); `target` is where it goes, without credentials. */
export function createConnectionOutage(
  log: Logger,
  what: string,
  target: string,
  now: () => number = Date.now,
): ConnectionOutage {
  let since: number | null = null
  let errors = 0
  return {
    down(err) {
      if (since !== null) {
        errors++
        return
      }
      since = now()
      errors = 1
      log.error(
        { target, err: err.message },
        `${what} unreachable at ${target}: requests that need it are answered 503 until it is back (further connection errors of this outage are not logged)`,
      )
    },
    up() {
      if (since === null) return
      const durationMs = now() - since
      since = null
      log.info(
        { target, durationMs, connectionErrors: errors },
        `${what} reachable again at ${target} after ${(durationMs / 1000).toFixed(1)} s`,
      )
    },
    get isDown() {
      return since !== null
    },
  }
}

/**
 * A task that runs again and again on the store (the budgets' refresh, the webhooks' sweep,
 * the JWT signing keys' check): during an outage it fails on every run, once a second for
 * some. One warning when it starts failing, one line when it succeeds again, with how long it
 * failed and how many runs failed; nothing in between.
 */
export interface TaskOutage {
  /** A run failed: opens an outage unless one is open. */
  failed(err: unknown): void
  /** A run succeeded: closes the open outage, if any. */
  succeeded(): void
  /** Whether the task is failing now. */
  readonly isFailing: boolean
}

/** `what` names the task in the lines ("webhooks: sweep"). */
export function createTaskOutage(log: Logger, what: string, now: () => number = Date.now): TaskOutage {
  let since: number | null = null
  let failures = 0
  return {
    failed(err) {
      failures++
      if (since !== null) return
      since = now()
      failures = 1
      log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        `${what} failed; trying again (further failures are not logged until it succeeds)`,
      )
    },
    succeeded() {
      if (since === null) return
      const durationMs = now() - since
      since = null
      log.info({ durationMs, failures }, `${what} succeeded again after ${(durationMs / 1000).toFixed(1)} s`)
    },
    get isFailing() {
      return since !== null
    },
  }
}

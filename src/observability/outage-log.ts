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

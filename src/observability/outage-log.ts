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
      log.warn({ err: err.message, previousOutageFailures: failures || undefined }, `${what}: the store did not answer (further failures of this outage are not logged)`)
      failures = 1
    },
  }
}

// Structured logs: one line per request (see http/access-log.ts), secrets redacted.
import pino, { type Logger, type DestinationStream } from 'pino'
import { CENSOR, censorFields, REDACTED_PATHS } from './log-redaction.ts'

export type { Logger }

/**
 * The process's log lines go to process.stdout itself, not pino's default (a sonic-boom stream
 * writing through libuv's threadpool). On Linux a write to a pipe, a file or a terminal is one
 * write(2) on the spot, so a line is out before the next event is handled, and nothing waits
 * in memory. The threadpool's hand-off cost more than the write: on a busy machine the access
 * log was 8–12 % of a call's CPU profile (`writeString`, bench/results.md "Fifth pass"). A
 * reader that stops reading the pipe holds the gateway up, as it would console.log, rather
 * than letting lines pile up in its memory.
 */
export function createLogger(level: string, destination: DestinationStream = process.stdout): Logger {
  const logger = pino(
    {
      level,
      base: { service: 'tollgate' },
      // Belt and braces: nothing logs headers on purpose, but if anything ever does,
      // credentials never reach the log (log-redaction.ts).
      redact: { paths: [...REDACTED_PATHS], censor: CENSOR },
      formatters: { log: censorFields },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  )
  // A child's bindings too: pino's bindings formatter applies to the root's only. Children
  // inherit this child(), so theirs are censored as well.
  const child = logger.child
  logger.child = function (this: Logger, bindings, options) {
    return child.call(this, censorFields(bindings), options)
  } as typeof child
  return logger
}

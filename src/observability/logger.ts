// Structured logs: one line per request (see http/access-log.ts), secrets redacted.
import pino, { type Logger, type DestinationStream } from 'pino'
import { CENSOR, censorFields, REDACTED_PATHS } from './log-redaction.ts'

export type { Logger }

export function createLogger(level: string, destination?: DestinationStream): Logger {
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

// Structured logs: one line per request (see http/access-log.ts), secrets redacted.
import pino, { type Logger, type DestinationStream } from 'pino'

export type { Logger }

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tollgate' },
      // Belt and braces: nothing logs headers on purpose, but if anything ever does,
      // credentials never reach the log.
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'req.headers["x-api-key"]',
          'req.headers["api-key"]',
          'headers.authorization',
          'headers.cookie',
          'headers["api-key"]',
          '*.authorization',
          '*["api-key"]',
          'key',
          'secret',
          'token',
          'password',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  )
}

// Structured logs: one line per request (see http/access-log.ts), secrets redacted.
import pino, { type Logger, type DestinationStream } from 'pino'

export type { Logger }

/** Log lines are written when this many bytes are waiting, or FLUSH_EVERY_MS after the first. */
const BUFFER_BYTES = 4096
const FLUSH_EVERY_MS = 100

/**
 * Standard output, buffered: the lines of many requests leave in one write rather than one
 * write each (a write per request was 2–5 % of a busy gateway's CPU). A line waits at most
 * FLUSH_EVERY_MS; pino writes what is waiting when the process exits, so only a kill -9
 * can lose the last 100 ms of lines.
 */
function bufferedStdout(): DestinationStream {
  const stream = pino.destination({ dest: 1, sync: false, minLength: BUFFER_BYTES })
  const timer = setInterval(() => {
    try {
      stream.flush()
    } catch {
      clearInterval(timer) // destroyed: standard output is gone
    }
  }, FLUSH_EVERY_MS).unref()
  stream.once('close', () => clearInterval(timer))
  return stream
}

export function createLogger(level: string, destination: DestinationStream = bufferedStdout()): Logger {
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

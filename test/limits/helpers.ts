// Shared by the limiter tests: limiters on memory or the shared Redis (under a random
// prefix, deleted afterwards), a logger that keeps its lines, a command counter, and a
// private redis-server that tests may stop, pause and restart.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { Command, Redis } from 'ioredis'
import { createLogger, type Logger } from '../../src/observability/logger.ts'
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'

export { deleteUnder, keysUnder, REDIS_URL } from '../helpers/redis.ts'
import { deleteUnder } from '../helpers/redis.ts'
import { pollUntil } from '../helpers/poll.ts'
import { REDIS_URL } from '../helpers/redis.ts'

export const randomId = (label = 'k'): string => `${label}_${randomBytes(6).toString('hex')}`
export const testPrefix = (): string => `tgtest:limits:${randomBytes(6).toString('hex')}:`

export interface CapturedLog {
  readonly log: Logger
  lines(): Array<Record<string, unknown>>
}

export function captureLog(level = 'debug'): CapturedLog {
  const lines: Array<Record<string, unknown>> = []
  const log = createLogger(level, {
    write: (line: string) => {
      lines.push(JSON.parse(line) as Record<string, unknown>)
    },
  })
  return { log, lines: () => lines }
}

export const quietMetrics = (): Metrics => createMetrics({ defaultMetrics: false })

/** Value of one labelled sample of a metric, or undefined. */
export async function metricValue(
  metrics: Metrics,
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name)
  if (!metric) return undefined
  const { values } = await metric.get()
  const found = values.find((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))
  return found?.value
}

export const redisClient = (url = REDIS_URL, commandTimeoutMs = 2000): Redis =>
  createRedisClient(url, { commandTimeoutMs, name: 'tgtest-limits' })

/**
 * A file's space on the shared Redis: a fresh prefix, an admin client, and the clients the
 * file opens (push them to `clients`); everything under the prefix is deleted and every
 * client closed when the file ends.
 */
export function redisSpace(t: { teardown(fn: () => Promise<void>): void }): {
  readonly namespace: string
  readonly admin: Redis
  readonly clients: Redis[]
} {
  const namespace = testPrefix()
  const admin = redisClient()
  const clients: Redis[] = []
  t.teardown(async () => {
    try {
      await deleteUnder(admin, namespace)
    } finally {
      for (const c of clients) c.disconnect()
      admin.disconnect()
    }
  })
  return { namespace, admin, clients }
}

/** Counts the commands a client sends, by name. */
export function countCommands(redis: Redis): { count(name?: string): number; reset(): void; restore(): void } {
  const send = redis.sendCommand.bind(redis)
  const seen: string[] = []
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    seen.push(command.name.toLowerCase())
    return send(command, stream)
  }
  return {
    count: (name) => (name === undefined ? seen.length : seen.filter((n) => n === name).length),
    reset: () => {
      seen.length = 0
    },
    restore: () => {
      redis.sendCommand = send
    },
  }
}

export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((done) => server.close(() => done()))
  return port
}

export interface PrivateRedis {
  readonly port: number
  readonly url: string
  /** Kills the server (SIGKILL: no goodbye to clients). */
  kill(): Promise<void>
  /** Starts it again on the same port (empty: nothing is saved). */
  start(): Promise<void>
  /** SIGSTOP: connections stay open, nothing answers. */
  pause(): void
  resume(): void
}

/** A redis-server of the test's own, on a free loopback port, never the shared one; `args` are added to its command line. */
export async function startPrivateRedis(args: readonly string[] = []): Promise<PrivateRedis> {
  const port = await freePort()
  let child: ChildProcess | null = null
  const start = async (): Promise<void> => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    child = proc
    await new Promise<void>((done, fail) => {
      let out = ''
      const timer = setTimeout(() => fail(new Error(`redis-server did not start:\n${out}`)), 10_000)
      proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer)
          done()
        }
      })
      proc.once('exit', (code) => {
        clearTimeout(timer)
        fail(new Error(`redis-server exited with ${code}:\n${out}`))
      })
    })
  }
  const kill = async (): Promise<void> => {
    const proc = child
    child = null
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return
    const exited = new Promise((done) => proc.once('exit', done))
    proc.kill('SIGCONT')
    proc.kill('SIGKILL')
    await exited
  }
  await start()
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    start,
    pause: () => {
      child?.kill('SIGSTOP')
    },
    resume: () => {
      child?.kill('SIGCONT')
    },
  }
}

/** Polls until check() is true, at most `tries` times `everyMs` apart; returns whether it became true. */
export async function eventually(check: () => boolean | Promise<boolean>, tries = 100, everyMs = 20): Promise<boolean> {
  return (
    await pollUntil(
      async () => await check(),
      (ok) => ok,
      tries,
      everyMs,
    )
  ).met
}

// Runs fuzz cases against a running gateway and checks every reply. Cases come from
// fast-check (seeded, so a run can be replayed exactly); they are sent by a pool of
// workers over raw sockets, keep-alive where the case leaves the connection sound, a
// fresh connection otherwise, so thousands of cases take seconds, not one process each.
import { connect, type Socket } from 'node:net'
import fc from 'fast-check'
import { MalformedResponse, ResponseReader, type ParsedResponse } from '../helpers/http-reader.ts'
import { problemWith } from './check.ts'
import { fuzzCase, type FuzzCase, type Mix } from './requests.ts'
import type { ErrorShape, FuzzContext, FuzzTarget } from './targets.ts'

export interface FuzzOptions {
  readonly port: number
  readonly targets: readonly FuzzTarget[]
  readonly ctx: FuzzContext
  readonly mix: Mix
  readonly cases: number
  readonly seed: number
  /** Cases in flight at once. */
  readonly concurrency?: number
  /** A case with no reply and an open connection after this long is a hang. */
  readonly deadlineMs?: number
  /** Stop sending after this many failures (the report keeps the first ones). */
  readonly maxFailures?: number
  /** Sees every reply (to look into a run). */
  readonly onReply?: (target: string, tags: readonly string[], res: ParsedResponse) => void
}

export interface FuzzFailure {
  readonly index: number
  readonly target: string
  readonly tags: readonly string[]
  readonly problem: string
  /** The start of what was sent, escaped, to reproduce it by hand. */
  readonly sent: string
}

export interface FuzzReport {
  readonly cases: number
  readonly requests: number
  readonly seed: number
  readonly ms: number
  /** Replies by status ("200", "404", ...), and requests that got none because the server closed first ("closed"). */
  readonly outcomes: Readonly<Record<string, number>>
  readonly byTarget: Readonly<Record<string, Readonly<Record<string, number>>>>
  readonly failures: readonly FuzzFailure[]
}

interface Connection {
  readonly socket: Socket
  readonly reader: ResponseReader
}

function open(port: number): Promise<Connection> {
  return new Promise((done, fail) => {
    const socket = connect(port, '127.0.0.1')
    const reader = new ResponseReader(socket)
    // The reader records socket errors; a write into a connection the server has closed must not throw.
    socket.on('error', () => undefined)
    socket.once('connect', () => {
      socket.setNoDelay(true)
      done({ socket, reader })
    })
    socket.once('error', fail)
  })
}

const escape = (bytes: Buffer): string =>
  JSON.stringify(bytes.subarray(0, 400).toString('latin1')).slice(1, -1) +
  (bytes.length > 400 ? `… (${bytes.length} bytes)` : '')

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const concurrency = options.concurrency ?? 24
  const deadlineMs = options.deadlineMs ?? 20_000
  const maxFailures = options.maxFailures ?? 20
  const shapeOf = new Map<string, ErrorShape>(options.targets.map((t) => [t.name, t.errors]))
  const samples = fc.sample(fuzzCase(options.targets, options.ctx, options.mix), {
    numRuns: options.cases,
    seed: options.seed,
  })
  const outcomes: Record<string, number> = {}
  const byTarget: Record<string, Record<string, number>> = {}
  const failures: FuzzFailure[] = []
  const idle: Connection[] = []
  let requests = 0
  let next = 0
  const started = performance.now()

  const count = (target: string, outcome: string): void => {
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    const per = (byTarget[target] ??= {})
    per[outcome] = (per[outcome] ?? 0) + 1
  }

  const runCase = async (c: FuzzCase, index: number): Promise<void> => {
    const pooled = c.reusable ? idle.pop() : undefined
    const conn = pooled !== undefined && !pooled.reader.ended ? pooled : await open(options.port)
    const fail = (problem: string): void => {
      failures.push({
        index,
        target: c.target,
        tags: c.tags,
        problem,
        sent: escape(Buffer.concat(c.requests.map((r) => r.bytes))),
      })
    }
    let sound = c.reusable
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<'hang'>((done) => {
      timer = setTimeout(() => done('hang'), deadlineMs)
    })
    try {
      conn.socket.write(Buffer.concat(c.requests.map((r) => r.bytes)))
      const targets = c.target.split(' + ')
      for (const [i, request] of c.requests.entries()) {
        const target = targets[i] ?? c.target
        let res: ParsedResponse | null | 'hang'
        try {
          res = await Promise.race([conn.reader.next(request.method), deadline])
        } catch (err) {
          if (!(err instanceof MalformedResponse)) throw err
          fail(`malformed reply: ${err.message}`)
          sound = false
          break
        }
        if (res === 'hang') {
          fail(`no reply within ${deadlineMs} ms and the connection still open`)
          sound = false
          break
        }
        if (res === null) {
          // The server closed: every request still unanswered got nothing.
          for (let j = i; j < c.requests.length; j++) count(targets[j] ?? c.target, 'closed')
          // A request line without a version is HTTP/0.9, whose replies have no status
          // line to send; Node closes some of those (a PRI method) unanswered. Nothing else may.
          if (!c.tags.includes('version-none'))
            fail(`the connection closed without a reply${conn.reader.error ? ` (${conn.reader.error.message})` : ''}`)
          sound = false
          break
        }
        requests++
        count(target, String(res.status))
        options.onReply?.(target, c.tags, res)
        const problem = problemWith(res, request.method, shapeOf.get(target) ?? 'openai', options.ctx.secrets)
        if (problem !== null) fail(problem)
        if (res.closes) {
          for (let j = i + 1; j < c.requests.length; j++) count(targets[j] ?? c.target, 'closed')
          sound = false
          break
        }
      }
    } finally {
      clearTimeout(timer)
      if (sound && !conn.reader.ended && conn.reader.pending === 0) idle.push(conn)
      else conn.socket.destroy()
    }
  }

  const worker = async (): Promise<void> => {
    while (next < samples.length && failures.length < maxFailures) {
      const index = next++
      const c = samples[index]
      if (c !== undefined) await runCase(c, index)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, () => worker()))
  for (const conn of idle) conn.socket.destroy()
  return { cases: next, requests, seed: options.seed, ms: performance.now() - started, outcomes, byTarget, failures }
}

/** The seed of a run: FUZZ_SEED to replay one, else fresh. */
export function fuzzSeed(env: Readonly<Record<string, string | undefined>>): number {
  const given = env.FUZZ_SEED
  return given !== undefined && /^-?\d+$/.test(given) ? Number(given) : Math.floor(Math.random() * 2 ** 31)
}

export function describeOutcomes(report: FuzzReport): string {
  return Object.entries(report.outcomes)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ')
}

// One fuzz session, as the tests and the benchmark both run it: a gateway of its own, a
// tenth of the cases to warm it up, a memory sample after garbage collection, the rest of
// the cases, another sample, then a look at whether it is still alive and well.
import { memoryOf, type MemorySample } from '../helpers/memory.ts'
import { startFuzzGateway, type FuzzGateway } from './gateway.ts'
import type { Mix } from './requests.ts'
import { runFuzz, type FuzzReport } from './runner.ts'
import type { FuzzTarget } from './targets.ts'

export interface SessionOptions {
  readonly targets: readonly FuzzTarget[]
  readonly mix: Mix
  readonly cases: number
  readonly seed: number
  readonly concurrency?: number
  /** See FuzzGatewayOptions; the result then says which upstream requests named another owner's objects. */
  readonly everythingUpstream?: boolean
}

export interface SessionResult {
  /** Both runs together. */
  readonly report: FuzzReport
  /** After the warm-up and after the run, garbage collected. */
  readonly before: MemorySample
  readonly after: MemorySample
  readonly exitCode: number | null
  readonly healthz: number
  /** Error-level log lines (unhandled errors, 5xx replies). */
  readonly errorLogs: ReadonlyArray<Record<string, unknown>>
  /** With everythingUpstream: requests the upstream received during the run naming another owner's object. */
  readonly leaked?: readonly string[]
}

export async function runFuzzSession(options: SessionOptions): Promise<SessionResult> {
  const fuzz = await startFuzzGateway({ everythingUpstream: options.everythingUpstream === true })
  try {
    const { gw, port, ctx } = fuzz
    const run = (cases: number, seed: number): Promise<FuzzReport> =>
      runFuzz({
        port,
        targets: options.targets,
        ctx,
        mix: options.mix,
        cases,
        seed,
        ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
      }).catch((error: unknown) => {
        // A run that could not go on (the gateway no longer listening, say): what replays it
        // and what the gateway said last, since a crash's stack is only in its own output.
        const { exitCode, signalCode } = gw.child
        const state = exitCode === null && signalCode === null ? 'still running' : `exited (${exitCode ?? signalCode})`
        const tail = gw.output().split('\n').slice(-30).join('\n')
        throw new Error(
          `${error instanceof Error ? error.message : String(error)}: FUZZ_SEED=${options.seed} replays it; the gateway is ${state}; its last output:\n${tail}`,
          { cause: error },
        )
      })
    const warmCases = Math.ceil(options.cases / 10)
    const warm = await run(warmCases, options.seed + 1)
    const before = await memoryOf(gw)
    const main = await run(options.cases - warmCases, options.seed)
    const after = await memoryOf(gw)
    const outcomes: Record<string, number> = { ...warm.outcomes }
    for (const [k, v] of Object.entries(main.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + v
    const byTarget: Record<string, Record<string, number>> = {}
    for (const part of [warm, main]) {
      for (const [target, counts] of Object.entries(part.byTarget)) {
        const into = (byTarget[target] ??= {})
        for (const [k, v] of Object.entries(counts)) into[k] = (into[k] ?? 0) + v
      }
    }
    const report: FuzzReport = {
      cases: warm.cases + main.cases,
      requests: warm.requests + main.requests,
      seed: options.seed,
      ms: warm.ms + main.ms,
      outcomes,
      byTarget,
      failures: [...warm.failures, ...main.failures],
    }
    const healthz = (await fetch(`${gw.url}/healthz`)).status
    const errorLogs = gw
      .logs()
      .filter((l) => l.msg === 'unhandled error' || (typeof l.level === 'number' && l.level >= 50))
    const leaked = options.everythingUpstream === true ? await leakedRequests(fuzz) : undefined
    return {
      report,
      before,
      after,
      exitCode: gw.child.exitCode,
      healthz,
      errorLogs,
      ...(leaked === undefined ? {} : { leaked }),
    }
  } finally {
    await fuzz.stop()
  }
}

/** What reached the upstream since the run began that names one of another owner's objects. */
async function leakedRequests(fuzz: FuzzGateway): Promise<string[]> {
  const received = (await fuzz.upstream.requests()).slice(fuzz.upstreamRequestsAtStart)
  return received
    .filter((r) => fuzz.foreignIds.some((id) => r.path.includes(id) || r.body.includes(id)))
    .map((r) => `${r.method} ${r.path} ${r.body.slice(0, 300)}`)
}

// One fuzz test file's body: a session (session.ts) and what must hold after it. Every
// reply is a success or an error in the contract's shape; the gateway is still running,
// answers /healthz, has logged no unhandled error, and has given back the memory the run
// made it use.
import type { Test } from 'tap'
import { MiB } from '../helpers/memory.ts'
import type { Mix } from './requests.ts'
import { describeOutcomes, fuzzSeed, type FuzzReport } from './runner.ts'
import { runFuzzSession } from './session.ts'
import type { FuzzTarget } from './targets.ts'

export interface SuiteOptions {
  readonly targets: readonly FuzzTarget[]
  readonly mix: Mix
  readonly cases: number
  readonly concurrency?: number
  /** Every model on the recording upstream, which must never see another owner's ids. */
  readonly everythingUpstream?: boolean
  /** A fixed seed: the same cases every run (FUZZ_SEED still chooses another); absent: a random one. */
  readonly seed?: number
}

/** Heap (and buffers) a run may leave behind after garbage collection: caches fill up to their bounds. */
export const HEAP_SLACK = 32 * MiB

export async function fuzzSuite(t: Test, options: SuiteOptions): Promise<FuzzReport> {
  const seed = process.env.FUZZ_SEED === undefined && options.seed !== undefined ? options.seed : fuzzSeed(process.env)
  t.comment(`seed ${seed} (FUZZ_SEED=${seed} replays this run)`)
  const { report, before, after, exitCode, healthz, errorLogs, leaked } = await runFuzzSession({ ...options, seed })

  t.equal(report.cases, options.cases, `${options.cases} cases sent`)
  t.same(
    report.failures,
    [],
    "every reply is a success or an error in the contract's shape; no 5xx, hang, leak or unanswered request",
  )
  t.comment(
    `${report.cases} cases, ${report.requests} replies in ${(report.ms / 1000).toFixed(1)} s: ${describeOutcomes(report)}`,
  )
  if (options.everythingUpstream === true)
    t.same(leaked, [], "no request naming another owner's object reached the upstream")
  t.equal(exitCode, null, 'the gateway is still running')
  t.equal(healthz, 200, '/healthz answers afterwards')
  t.same(
    errorLogs.map((l) => ({ msg: l.msg, err: l.err, route: l.route, status: l.status })).slice(0, 5),
    [],
    'no unhandled error and no error-level log line',
  )
  const grown = after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers)
  t.ok(
    grown < HEAP_SLACK,
    `memory returns to where it was: heap and buffers ${(grown / MiB).toFixed(1)} MiB over the baseline after GC (rss ${(before.rss / MiB).toFixed(0)} → ${(after.rss / MiB).toFixed(0)} MiB)`,
  )
  return report
}

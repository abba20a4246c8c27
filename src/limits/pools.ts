// The batch pool: a batch's lines (src/batches/) are counted apart from their key's
// interactive calls, as OpenAI limits batch traffic apart from the rest.
//
// A key's windowed limits (rpm, tpm, input_tpm, output_tpm) keep two sets of counters per
// (key, model), in the same windows and, on Redis, on the same slot: the interactive calls'
// (every call that is not a batch line) and the batch lines'. The rule:
//  - an interactive call is admitted on the interactive counters alone against the key's
//    limit: a batch can never be why an interactive call is refused (/v2) or waits (/queue);
//  - a batch line is admitted when the interactive use of the window, the batch's own and
//    its cost fit the key's limit, and is counted on the batch's counters. So a batch alone
//    runs at the key's whole limit (20 RPM: 20 lines a minute), and beside interactive calls
//    it uses only the room they leave. Its refusal's retry-after is when either window
//    resets (some room is back then).
// Both steps are one atomic check-and-consume on each store (memory-counters.ts under the
// subject's queue; redis-counters.ts in the admission script, which reads the interactive
// counter beside the batch's).
//
// The price of never refusing an interactive call: within one window the two together can
// exceed the key's limit by what the batch used before the interactive calls came, at most
// one limit's worth (a batch that filled a quiet window, then the key's interactive calls
// taking their own whole limit). Deployments' declared and learned capacity still bound
// what reaches an upstream, and the lifetime quota and budgets (money) are one count for
// both: they are not pooled, and stay exact. docs/batches.md, docs/limits.md.
import type { Subject } from './counters.ts'
import type { CounterState, DimensionName } from './dimensions.ts'

/** Whose pool a subject's windowed counters are: a batch's lines, or (absent) the key's interactive calls. */
export type Pool = 'batch'

/** Whether this dimension of the subject is counted in a pool of its own (the quota never is). */
export function pooled(subject: Pick<Subject, 'pool'>, dimension: { readonly name: DimensionName }): boolean {
  return subject.pool !== undefined && dimension.name !== 'quota'
}

/** Prefixed to a pooled counter's dimension code in its key name. */
export const POOL_CODE: Readonly<Record<Pool, string>> = { batch: 'b' }

/** The interactive calls' subject beside a pooled one: the counters a batch line's use adds to. */
export function interactiveOf(subject: Subject): Subject {
  const { pool: _pool, ...rest } = subject
  return rest
}

/**
 * A batch line's counter as the fit rule reads it: its own use plus the interactive calls'
 * in their window. It keeps its own window's end (a settle gives back in that window), and
 * the earliest reset of the two that hold anything: when some room comes back.
 */
export function withInteractive(own: CounterState, interactive: CounterState): CounterState {
  const resets = (s: CounterState): boolean => s.used > 0 && s.resetMs > 0
  let resetMs = resets(own) ? own.resetMs : 0
  if (resets(interactive) && (resetMs === 0 || interactive.resetMs < resetMs)) resetMs = interactive.resetMs
  return { used: own.used + interactive.used, resetMs, expiresAt: own.expiresAt }
}

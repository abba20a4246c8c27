// Which of a few strings a client's regular expression matches, without letting that
// expression hold the event loop. A JSON Schema `pattern` comes from the request, and a
// pattern such as ^(x+x+)+y$ backtracks for minutes on a short string; so the match runs
// in a vm context whose timeout interrupts it, under a time budget shared by one reply.
import vm from 'node:vm'

/** Milliseconds all the patterns of one reply may take; past it, patterns are no longer checked. */
export const PATTERN_BUDGET_MS = 100

const SOURCE = `(() => {
  let re
  try { re = new RegExp(pattern, 'u') } catch { return -2 }
  return candidates.findIndex((s) => re.test(s))
})()`

// Made on first use, then shared: each call sets the two inputs and reads one number back.
let script: vm.Script | undefined
let context: vm.Context | undefined

/**
 * Answers already found, so a schema sent again is answered the same without matching
 * again (a reply for the same schema must not change because the machine was busy the
 * second time). Only definite answers are kept; bounded, cleared when full.
 */
const known = new Map<string, number>()
const KNOWN_AT_MOST = 1024

export class PatternBudget {
  private left = PATTERN_BUDGET_MS

  /**
   * The index of the first candidate the pattern matches; -1 if none does; undefined if
   * it cannot tell (an invalid pattern, or the budget ran out).
   */
  firstMatch(pattern: string, candidates: readonly string[]): number | undefined {
    const key = `${pattern}\u0000${candidates.join('\u0001')}`
    const answer = known.get(key)
    if (answer !== undefined) return answer
    if (this.left <= 0) return undefined
    script ??= new vm.Script(SOURCE)
    context ??= vm.createContext({})
    context.pattern = pattern
    context.candidates = [...candidates]
    const started = performance.now()
    try {
      const index = script.runInContext(context, { timeout: Math.max(1, Math.ceil(this.left)) }) as number
      if (index === -2) return undefined
      if (known.size >= KNOWN_AT_MOST) known.clear()
      known.set(key, index)
      return index
    } catch {
      // Timed out (the time it took spends the budget below): this pattern is not solved.
      return undefined
    } finally {
      this.left -= performance.now() - started
      context.candidates = []
    }
  }
}

// Counters in this process: rate-limiter-flexible's RateLimiterMemory, one for the
// windowed dimensions (fixed window opened by the first call, like the Redis keys) and
// one for the lifetime quota. It serves the embedded store, and stands in for Redis
// while Redis is unreachable (the insurance limiter). Check-and-consume over several
// dimensions is made atomic by running the admissions of one (key, model) one at a time.
import { RateLimiterMemory } from 'rate-limiter-flexible'
import type { Charge, CounterState, Dimension, DimensionName } from './dimensions.ts'
import { fits } from './dimensions.ts'
import {
  budgetFits,
  EMPTY_BUDGET,
  firedName,
  reached,
  type BudgetCharge,
  type BudgetCrossing,
  type BudgetSettle,
  type BudgetState,
} from './budget-charges.ts'
import {
  counterCode,
  DIMENSION_CODE,
  HELD_CODE,
  sameWindow,
  type AdmitResult,
  type Counters,
  type Subject,
} from './counters.ts'
import { interactiveOf, pooled, withInteractive } from './pools.ts'
import { MemoryHolds } from './holds.ts'
import type { OnceCharge } from './port.ts'
import type { BudgetJournal, SpentCell } from './budget-ledger.ts'

interface LibraryState {
  readonly consumedPoints: number
  readonly msBeforeNext: number
}

export interface MemoryCounters extends Counters {
  /** Lifetime usage counted here, per subject and dimension, emptied as it is read (to hand over to Redis). */
  drainLifetime(): Array<{ subject: Subject; name: DimensionName; used: number }>
  /** Every counter, as JSON-able data (the library's dump format), to keep across restarts. */
  snapshot(): MemorySnapshot
  /** Loads a snapshot; windows that ended meanwhile are skipped. Anything malformed is ignored. */
  restore(data: unknown): void
}

export interface MemorySnapshot {
  readonly version: 1
  readonly windowed: ReturnType<RateLimiterMemory['dump']>
  readonly lifetime: ReturnType<RateLimiterMemory['dump']>
  /** Budgets' spent counters and fired thresholds: [name, value, expiresAt (0: never)]. */
  readonly budgets?: {
    readonly spent: ReadonlyArray<readonly [string, number, number]>
    readonly fired: ReadonlyArray<readonly [string, readonly number[], number]>
    /** Ids of the settles that committed once (OnceCharge), with when each is forgotten. */
    readonly once?: ReadonlyArray<readonly [string, number]>
  }
}

/** Once ids remembered between two sweeps of those that ran out. */
const ONCE_SWEEP_EVERY = 4096

/** A budget counter in memory; expiresAt 0: never. */
interface Cell<T> {
  value: T
  expiresAt: number
}

/**
 * Budgets' counters in this process. Every operation on them is synchronous, so a check
 * and the consumption after it are one step of the event loop: atomic across every
 * (key, model), which the per-subject queue alone would not make them.
 */
class BudgetCells {
  readonly spent = new Map<string, Cell<number>>()
  /** Calls in flight: each one's hold, kept until its settle (holds.ts). */
  readonly held = new MemoryHolds()
  readonly fired = new Map<string, Cell<Set<number>>>()
  /**
   * Ids of once-settles that committed, until they are forgotten. In the snapshot with the
   * spent counters they committed to: a spend the file keeps is never committed twice.
   */
  readonly once = new Map<string, Cell<true>>()

  /** Whether a settle under `once` commits: the first under its id does, and is remembered. */
  first(once: OnceCharge | undefined, now: number): boolean {
    if (once === undefined) return true
    if (this.get(this.once, once.id, now) !== undefined) return false
    // Ids run out unread: swept now and then (the snapshot sweeps them too).
    if (this.once.size % ONCE_SWEEP_EVERY === ONCE_SWEEP_EVERY - 1)
      for (const id of [...this.once.keys()]) this.get(this.once, id, now)
    this.once.set(once.id, { value: true, expiresAt: now + Math.max(1, once.keepMs) })
    return true
  }

  get<T>(map: Map<string, Cell<T>>, name: string, now: number): Cell<T> | undefined {
    const cell = map.get(name)
    if (cell !== undefined && cell.expiresAt !== 0 && cell.expiresAt <= now) {
      map.delete(name)
      return undefined
    }
    return cell
  }

  state(charge: BudgetCharge, now: number): BudgetState {
    return { spent: this.get(this.spent, charge.counter, now)?.value ?? 0, held: this.held.total(charge.counter) }
  }
}

/** Runs tasks of one key one after another; tasks of different keys run freely. */
class KeyedQueue {
  readonly #tails = new Map<string, Promise<void>>()

  /** No task of `key` is running or waiting: a synchronous step now runs as the queue would run it. */
  idle(key: string): boolean {
    return !this.#tails.has(key)
  }

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve()
    let release = (): void => {}
    const done = new Promise<void>((resolve) => {
      release = resolve
    })
    const tail = previous.then(() => done)
    this.#tails.set(key, tail)
    await previous
    try {
      return await task()
    } finally {
      release()
      if (this.#tails.get(key) === tail) this.#tails.delete(key)
    }
  }
}

const SEPARATOR = '\u0000'

/** rate-limiter-flexible's storage under its RateLimiterMemory, whose methods do this synchronously and wrap each result in a promise. */
interface SyncStorage {
  get(key: string): LibraryState | null
  incrby(key: string, value: number, durationSec: number): LibraryState
}

/**
 * The storage of a RateLimiterMemory, read and written synchronously: an admission on the
 * embedded store is then one step of the event loop, with no promise per counter. It is the
 * library's internal member; a release that renames it fails here, at boot, not on a call.
 */
function storageOf(limiter: RateLimiterMemory): SyncStorage {
  const storage = (limiter as unknown as { _memoryStorage?: Partial<SyncStorage> })._memoryStorage
  if (typeof storage?.get !== 'function' || typeof storage.incrby !== 'function')
    throw new Error("rate-limiter-flexible's RateLimiterMemory no longer keeps a _memoryStorage with get and incrby")
  return storage as SyncStorage
}

/** `journal`: told every settle's outcome, to keep it durably (embedded mode: budget-ledger.ts). */
export function memoryCounters(windowMs: number, journal?: BudgetJournal): MemoryCounters {
  // Points are checked by fits(), not by the library: limits differ per key and model.
  const windowed = new RateLimiterMemory({ keyPrefix: '', points: Number.MAX_SAFE_INTEGER, duration: windowMs / 1000 })
  const lifetime = new RateLimiterMemory({ keyPrefix: '', points: Number.MAX_SAFE_INTEGER, duration: 0 })
  // With keyPrefix '' the library's key is the counter's own (getKey), so the storage is keyed alike.
  const windowedNow = storageOf(windowed)
  const windowS = windowMs / 1000
  const lifetimeNow = storageOf(lifetime)
  const queue = new KeyedQueue()
  const subjectKey = (s: Subject): string => `${s.keyId}${SEPARATOR}${s.model}`
  // A batch line's windowed counters are its pool's (pools.ts); the subject's queue is the key's, both pools' admissions in one line.
  const counterKey = (s: Subject, name: DimensionName): string => `${subjectKey(s)}${SEPARATOR}${counterCode(s, name)}`
  const limiterOf = (d: { readonly windowed: boolean }): RateLimiterMemory => (d.windowed ? windowed : lifetime)
  /** The owners of subjects with lifetime counters here, for the hand-over to Redis (where they are kept by owner). */
  const owners = new Map<string, string>()

  /** The library's record as a CounterState; a window whose time is up counts as empty. */
  function stateOf(d: { readonly windowed: boolean }, res: LibraryState | null, now: number): CounterState {
    if (res === null) return { used: 0, resetMs: 0, expiresAt: 0 }
    if (!d.windowed) return { used: Math.max(res.consumedPoints, 0), resetMs: 0, expiresAt: 0 }
    if (res.msBeforeNext <= 0) return { used: 0, resetMs: 0, expiresAt: 0 }
    const used = Math.max(res.consumedPoints, 0)
    return { used, resetMs: used > 0 ? res.msBeforeNext : 0, expiresAt: now + res.msBeforeNext }
  }

  const budgets = new BudgetCells()

  /** Synchronous, like the admission's budget step: commit, release, report first crossings. */
  function settleBudgets(settles: readonly BudgetSettle[], once?: OnceCharge): BudgetCrossing[] {
    const now = Date.now()
    const out: BudgetCrossing[] = []
    // A repeat under a once id commits nothing (its holds still go).
    const commits = settles.length > 0 && budgets.first(once, now)
    const kept: SpentCell[] = []
    settles.forEach(({ charge, real: cost }, index) => {
      const real = commits ? cost : 0
      let spent = budgets.get(budgets.spent, charge.counter, now)
      if (spent === undefined) {
        spent = { value: 0, expiresAt: charge.ttlMs > 0 ? now + charge.ttlMs : 0 }
        budgets.spent.set(charge.counter, spent)
      }
      spent.value += Math.max(real, -spent.value)
      kept.push([charge.counter, spent.value, spent.expiresAt])
      budgets.held.release(charge.counter, charge.hold)
      const reachedNow = reached(charge.spec.thresholds, spent.value, charge.spec.amountNanos)
      if (reachedNow.length === 0) return
      const name = firedName(charge)
      let fired = budgets.get(budgets.fired, name, now)
      if (fired === undefined) budgets.fired.set(name, (fired = { value: new Set(), expiresAt: spent.expiresAt }))
      for (const threshold of reachedNow) {
        if (fired.value.has(threshold)) continue
        fired.value.add(threshold)
        out.push({ index, threshold, spent: spent.value })
      }
    })
    // What committed is kept with its once id in one write; a repeat changed nothing.
    const onceCell = once === undefined ? undefined : budgets.once.get(once.id)
    if (commits) journal?.(kept, once === undefined ? undefined : [once.id, onceCell?.expiresAt ?? now + once.keepMs])
    return out
  }

  function restoreBudgets(data: unknown): void {
    if (typeof data !== 'object' || data === null) return
    const { spent, fired, once } = data as { spent?: unknown; fired?: unknown; once?: unknown }
    const now = Date.now()
    const alive = (at: unknown): at is number => typeof at === 'number' && (at === 0 || at > now)
    if (Array.isArray(spent)) {
      for (const row of spent as unknown[]) {
        if (!Array.isArray(row)) continue
        const [name, value, at] = row as unknown[]
        // Restored twice at boot (the snapshot, then the ledger): the larger spend wins, as spent only grows.
        if (typeof name !== 'string' || typeof value !== 'number' || !Number.isFinite(value) || !alive(at)) continue
        if ((budgets.spent.get(name)?.value ?? -Infinity) <= value) budgets.spent.set(name, { value, expiresAt: at })
      }
    }
    if (Array.isArray(fired)) {
      for (const row of fired as unknown[]) {
        if (!Array.isArray(row)) continue
        const [name, values, at] = row as unknown[]
        if (typeof name === 'string' && Array.isArray(values) && alive(at))
          budgets.fired.set(name, {
            value: new Set(values.filter((v): v is number => typeof v === 'number')),
            expiresAt: at,
          })
      }
    }
    if (Array.isArray(once)) {
      for (const row of once as unknown[]) {
        if (!Array.isArray(row)) continue
        const [id, at] = row as unknown[]
        if (typeof id === 'string' && alive(at) && at !== 0) budgets.once.set(id, { value: true, expiresAt: at })
      }
    }
  }

  const heldKey = (s: Subject): string => `${subjectKey(s)}${SEPARATOR}${HELD_CODE}`
  /** The quota's holds of calls in flight, each kept until its settle (holds.ts). */
  const quotaHolds = new MemoryHolds()

  /** The subject's own counter, as the store holds it. */
  const own = async (
    s: Subject,
    d: Dimension | { readonly name: DimensionName; readonly windowed: boolean },
  ): Promise<CounterState> => stateOf(d, await limiterOf(d).get(counterKey(s, d.name)), Date.now())

  /**
   * A counter as the limiter sees it, read synchronously from the library's storage: the
   * quota is what calls used plus what calls in flight hold; a batch line's windowed counter
   * adds its key's interactive use (pools.ts).
   */
  const readNow = (s: Subject, d: Dimension): CounterState => {
    const ownNow = (of: Subject): CounterState =>
      stateOf(d, (d.windowed ? windowedNow : lifetimeNow).get(counterKey(of, d.name)), Date.now())
    const mine = ownNow(s)
    if (d.windowed) return pooled(s, d) ? withInteractive(mine, ownNow(interactiveOf(s))) : mine
    return { used: mine.used + quotaHolds.total(heldKey(s)), resetMs: 0, expiresAt: 0 }
  }

  /**
   * Check-and-consume over every dimension, in one synchronous step: no other admission or
   * settle of anyone runs in between. The library's penalty() is its storage's incrby() over
   * the limiter's duration, which opens a window when none is.
   */
  function admitNow(
    subject: Subject,
    charges: readonly Charge[],
    budgetCharges: readonly BudgetCharge[],
    hold: string,
  ): AdmitResult {
    const before = charges.map((c) => readNow(subject, c))
    const now = Date.now()
    const found = budgetCharges.map((b) => budgets.state(b, now))
    const admitted =
      charges.every((c, i) => fits(c, before[i]?.used ?? 0)) &&
      budgetCharges.every((b, j) => budgetFits(b, found[j] ?? EMPTY_BUDGET))
    if (!admitted) return { admitted: false, states: before, budgets: found }
    const after_budgets = budgetCharges.map((b, j): BudgetState => {
      const state = found[j] ?? EMPTY_BUDGET
      if (b.cost <= 0) return state
      return { spent: state.spent, held: budgets.held.hold(b.counter, b.hold, b.cost) }
    })
    const after = charges.map((c, i): CounterState => {
      if (c.windowed) {
        const mine = stateOf(c, windowedNow.incrby(counterKey(subject, c.name), c.cost, windowS), Date.now())
        // A batch line's: with the interactive use it was admitted beside (unchanged meanwhile: one step).
        return pooled(subject, c) ? { ...mine, used: (before[i]?.used ?? 0) + c.cost } : mine
      }
      if (c.cost > 0) quotaHolds.hold(heldKey(subject), hold, c.cost)
      return { used: (before[i]?.used ?? 0) + c.cost, resetMs: 0, expiresAt: 0 }
    })
    return { admitted: true, states: after, budgets: after_budgets }
  }

  return {
    kind: 'memory',
    admit(subject, charges, budgetCharges = [], hold = '') {
      if (subject.owner !== undefined && subject.owner !== subject.keyId && charges.some((c) => !c.windowed))
        owners.set(subjectKey(subject), subject.owner)
      const key = subjectKey(subject)
      // A settle of this (key, model) in flight awaits between its steps: the admission waits its turn.
      // Otherwise it runs now, in one step, where the queue would have run it a few microtasks later.
      // (An async function runs synchronously to its end here, and a throw is its rejection.)
      const run = async (): Promise<AdmitResult> => admitNow(subject, charges, budgetCharges, hold)
      return queue.idle(key) ? run() : queue.run(key, run)
    },
    settle(subject, adjustments, budgetSettles = [], once) {
      return queue.run(subjectKey(subject), async () => {
        const crossings = settleBudgets(budgetSettles, once)
        for (const a of adjustments) {
          const key = counterKey(subject, a.name)
          if (!a.windowed) {
            // Commit what the call used; release its hold (once).
            const used = stateOf(a, await lifetime.get(key), Date.now()).used
            const commit = Math.max(a.reserved + a.delta, -used)
            if (commit > 0) await lifetime.penalty(key, commit)
            else if (commit < 0) await lifetime.reward(key, -commit)
            if (a.hold !== undefined) quotaHolds.release(heldKey(subject), a.hold)
            continue
          }
          // Its own counter: a batch line gives back to (or charges) its pool only.
          const current = await own(subject, a)
          if (sameWindow(current.expiresAt, a.expiresAt, windowMs)) {
            const delta = Math.max(a.delta, -current.used)
            if (delta > 0) await limiterOf(a).penalty(key, delta)
            else if (delta < 0) await limiterOf(a).reward(key, -delta)
          } else if (a.delta > 0) {
            await limiterOf(a).penalty(key, a.delta)
          }
        }
        return crossings
      })
    },
    peek(subject, dimensions) {
      return Promise.resolve(dimensions.map((d) => readNow(subject, d)))
    },
    async peekBudgets(charges) {
      const now = Date.now()
      return charges.map((b) => budgets.state(b, now))
    },
    snapshot() {
      const now = Date.now()
      const live = <T>(map: Map<string, Cell<T>>): Array<[string, Cell<T>]> =>
        [...map.entries()].filter(([name]) => budgets.get(map, name, now) !== undefined)
      return {
        version: 1,
        windowed: windowed.dump(),
        lifetime: lifetime.dump(),
        budgets: {
          spent: live(budgets.spent).map(([name, c]) => [name, c.value, c.expiresAt] as const),
          fired: live(budgets.fired).map(([name, c]) => [name, [...c.value], c.expiresAt] as const),
          once: live(budgets.once).map(([id, c]) => [id, c.expiresAt] as const),
        },
      }
    },
    restore(data) {
      if (typeof data !== 'object' || data === null || (data as { version?: unknown }).version !== 1) return
      const { windowed: w, lifetime: l } = data as { windowed?: unknown; lifetime?: unknown }
      // The library validates every record itself and skips what is malformed or expired.
      if (typeof w === 'object' && w !== null) windowed.restore(w as Parameters<RateLimiterMemory['restore']>[0])
      if (typeof l === 'object' && l !== null) lifetime.restore(l as Parameters<RateLimiterMemory['restore']>[0])
      restoreBudgets((data as { budgets?: unknown }).budgets)
    },
    drainLifetime() {
      const out: Array<{ subject: Subject; name: DimensionName; used: number }> = []
      for (const item of lifetime.dump().storage) {
        const [keyId, model, code] = String(item.key).split(SEPARATOR)
        const name = (Object.keys(DIMENSION_CODE) as DimensionName[]).find((n) => DIMENSION_CODE[n] === code)
        if (keyId !== undefined && model !== undefined && name !== undefined && item.value > 0) {
          const owner = owners.get(`${keyId}${SEPARATOR}${model}`)
          out.push({ subject: { keyId, model, ...(owner === undefined ? {} : { owner }) }, name, used: item.value })
        }
        void lifetime.delete(item.key)
      }
      owners.clear()
      return out
    },
  }
}

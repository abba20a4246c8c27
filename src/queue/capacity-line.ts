// The queue's line for upstream capacity, one per gateway and per model (its set of
// deployments). A queued call that every deployment refused waits here, in the order it
// was first refused, instead of each call sleeping until the time it was named and all of
// them retrying at once: only the head tries (admission, then a deployment with room).
// When the head is given a deployment the next one tries at once; when it is refused it
// waits, still at the head, until the new time it was named, or until room may have come
// back (room(): a slot freed or an answer taught the figures again, on this gateway or,
// over pub/sub, on another). So a reset or a freed slot lets through as many calls as the
// store grants, one try at a time per gateway, and the rest keep their places.
//
// Order within a key's line is the queue's: only the head of its key's line waits here
// (waiter.ts), so no call here waits on one behind it in its key's line. Between keys, with
// fair shares (src/fairness/, `fairness` below), the one that tries next is not the first
// refused but the one of the lowest priority band whose party (a key's owner) has the
// lowest virtual token counter, read from the store before each try (first come first
// served between calls of one party, and when the store does not answer). When a party
// further below its share waits on another gateway, the head holds back HOLD_MS so that
// gateway's call takes the room. A call's class places it on entering, as in its key's line
// (priority/classes.ts bandOf): a priority call ahead of every default and flex call, a
// default one ahead of every flex one; without fair shares, first come first served within a
// class. A call already trying keeps its place.
//
// Two things make a wake-up that does not come impossible: room() that arrives while the
// head is trying is kept for its next again() (the head tries once more at once instead of
// waiting for a time that may be a lease's ten minutes away), and no wait is longer than
// RECHECK_MS (a message lost between gateways costs at most that).

import { fairest, partyOf } from '../fairness/vtc.ts'
import type { AdmissionRequest } from '../limits/port.ts'
import { bandOf } from '../priority/classes.ts'

/** The longest the head waits before it tries again, whatever time it was named. */
export const RECHECK_MS = 2000
/** How long the head holds back for a party further below its share waiting on another gateway. */
export const HOLD_MS = 40

export interface CapacityTurn {
  /**
   * The call is done waiting: given a deployment (`granted`: the next in line tries now),
   * or it gave up (the next in line waits for the time the line was named).
   */
  pass(granted: boolean): void
  /** Refused again until `retryAt`: waits at the head until then or until room(); false when the call's signal fired. */
  again(retryAt: number): Promise<boolean>
}

/** Who waits, for fair shares: its model (the counters' scope), its party and its priority band (bandOf). */
export interface LineSeat {
  readonly model: string
  readonly party: string
  readonly band: number
}

/** The seat of a call of `request` in a line: its model, its party (fairness/vtc.ts) and its class's band. */
export const seatOf = (request: Pick<AdmissionRequest, 'model' | 'keyId' | 'owner' | 'serviceClass'>): LineSeat => ({
  model: request.model,
  party: partyOf(request),
  band: bandOf(request.serviceClass),
})

/** Fair shares as the line uses them (fairness/shares.ts implements it). */
export interface LineFairness {
  /**
   * The parties' virtual token counters in `model`, in order, and the least counter of the
   * parties waiting on other gateways (undefined: none); undefined when they cannot be read
   * (first come first served).
   */
  counters(
    model: string,
    parties: readonly string[],
  ): Promise<{ readonly counters: readonly number[]; readonly elsewhere: number | undefined } | undefined>
  /**
   * A party joins the line: lifted to the least counter of the active ones if it was idle
   * (fairness/vtc.ts), so the lift holds while the others are served. Never throws.
   */
  arrived(model: string, party: string): void
  /** A waiter that came later went first for its share (a metric). */
  overtook?(model: string): void
}

export interface CapacityLine {
  /** Joins the line of `deployments` (refused until `retryAt`) and waits for its turn; null when `signal` fired first. */
  enter(
    deployments: readonly string[],
    retryAt: number,
    signal: AbortSignal,
    seat?: LineSeat,
  ): Promise<CapacityTurn | null>
  /**
   * The deployments of a line where calls of `model` wait (undefined: none waits). With fair
   * shares, a call about to try a deployment for the first time joins that line instead,
   * so it does not take the room the line waits for ahead of its turn.
   */
  crowded(model: string): readonly string[] | undefined
  /** Room may have come back on a deployment: the head of each line waiting on it tries now. */
  room(deploymentId: string): void
  /** Calls waiting, over every line (for tests and metrics). */
  waiting(): number
}

interface Waiter {
  readonly seat: LineSeat | undefined
  trying: boolean
  /** When it was last told to try (its line's room() since then counts for its next again()). */
  triedAt: number
  /** Resolves the wait in progress: true to try, false when its signal fired. */
  go: ((tryNow: boolean) => void) | null
}

interface Line {
  readonly deployments: ReadonlySet<string>
  readonly waiters: Waiter[]
  /** No deployment has room before then (epoch ms), unless room() says otherwise. */
  retryAt: number
  /** When room() last said room may have come back (epoch ms). */
  roomAt: number
  timer: NodeJS.Timeout | undefined
  /** The counters are being read to choose who tries next. */
  choosing: boolean
}

export function createCapacityLine(now: () => number = Date.now, fairness?: LineFairness): CapacityLine {
  const lines = new Map<string, Line>()
  /** Per model, the lines where calls of it wait and how many (crowded() reads it on a call's first try). */
  const byModel = new Map<string, Map<Line, number>>()

  function count(line: Line, model: string | undefined, change: 1 | -1): void {
    if (model === undefined) return
    const counts = byModel.get(model) ?? byModel.set(model, new Map()).get(model)!
    const n = (counts.get(line) ?? 0) + change
    if (n > 0) counts.set(line, n)
    else counts.delete(line)
    if (counts.size === 0) byModel.delete(model)
  }

  /**
   * Moves the waiter that goes next by fair share to the head (fairness/vtc.ts fairest).
   * Returns true when a party further below its share waits on another gateway: the head
   * then holds back for HOLD_MS, so that gateway's waiter takes the room first.
   */
  async function choose(line: Line): Promise<boolean> {
    const seated = line.waiters.filter((w) => w.seat !== undefined && !w.trying)
    if (fairness === undefined || seated.length === 0 || seated.length !== line.waiters.length) return false
    const model = (seated[0]?.seat as LineSeat).model
    const parties = [...new Set(seated.map((w) => (w.seat as LineSeat).party))]
    if (seated.some((w) => (w.seat as LineSeat).model !== model)) return false
    const read = await fairness.counters(model, parties).catch(() => undefined)
    if (read === undefined) return false
    const counterOf = new Map(parties.map((p, i) => [p, read.counters[i] ?? 0]))
    // Those still waiting (some may have left while the counters were read), in arrival order.
    const still = line.waiters.filter((w) => seated.includes(w))
    const ranked = still.map((w) => ({ band: w.seat?.band ?? 0, counter: counterOf.get(w.seat?.party ?? '') ?? 0 }))
    const next = fairest(ranked)
    const chosen = still[next]
    if (chosen === undefined) return false
    if (chosen !== line.waiters[0]) {
      line.waiters.splice(line.waiters.indexOf(chosen), 1)
      line.waiters.unshift(chosen)
      fairness.overtook?.(model)
    }
    // A priority call does not hold back for another party's default one.
    const mine = ranked[next] as { band: number; counter: number }
    return mine.band >= 0 && read.elsewhere !== undefined && read.elsewhere < mine.counter
  }

  function schedule(key: string, line: Line): void {
    // Choosing (or holding back): tryHead follows, and the hold's timer is its own.
    if (line.choosing) return
    clearTimeout(line.timer)
    line.timer = undefined
    const head = line.waiters[0]
    if (head === undefined) {
      lines.delete(key)
      return
    }
    if (head.trying) return
    const wait = line.retryAt - now()
    if (wait > 0) {
      if (wait > RECHECK_MS) {
        line.timer = setTimeout(() => {
          line.retryAt = 0
          schedule(key, line)
        }, RECHECK_MS)
      } else line.timer = setTimeout(() => schedule(key, line), wait)
      return
    }
    if (fairness !== undefined) {
      line.choosing = true
      void choose(line)
        .catch(() => false)
        .then((hold) => {
          if (!hold) {
            line.choosing = false
            return tryHead(key, line)
          }
          line.timer = setTimeout(() => {
            line.choosing = false
            tryHead(key, line)
          }, HOLD_MS)
        })
      return
    }
    tryHead(key, line)
  }

  /** The head tries now (choose() may have put another there; one that left is gone). */
  function tryHead(key: string, line: Line): void {
    const head = line.waiters[0]
    if (head === undefined || head.trying) return schedule(key, line)
    head.trying = true
    head.triedAt = now()
    const go = head.go
    head.go = null
    go?.(true)
  }

  /** Waits until `me` is told to try (true) or its signal fires (false: it left the line). */
  function waitFor(key: string, line: Line, me: Waiter, signal: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (signal.aborted) {
        leave(key, line, me, false)
        return resolve(false)
      }
      const onAbort = (): void => {
        me.go = null
        leave(key, line, me, false)
        resolve(false)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      me.go = (tryNow) => {
        signal.removeEventListener('abort', onAbort)
        resolve(tryNow)
      }
      schedule(key, line)
    })
  }

  function leave(key: string, line: Line, me: Waiter, granted: boolean): void {
    const at = line.waiters.indexOf(me)
    if (at < 0) return
    line.waiters.splice(at, 1)
    count(line, me.seat?.model, -1)
    if (granted) line.retryAt = 0
    schedule(key, line)
  }

  return {
    async enter(deployments, retryAt, signal, seat) {
      const key = deployments.join('\n')
      let line = lines.get(key)
      if (line === undefined) {
        line = {
          deployments: new Set(deployments),
          waiters: [],
          retryAt,
          roomAt: 0,
          timer: undefined,
          choosing: false,
        }
        lines.set(key, line)
      } else if (line.waiters.length === 0) line.retryAt = retryAt
      const me: Waiter = { seat, trying: false, triedAt: 0, go: null }
      if (seat !== undefined) fairness?.arrived(seat.model, seat.party)
      // Behind every call of its class or a higher one, ahead of the lower classes.
      const band = seat?.band ?? 0
      const after = line.waiters.findIndex((w) => (w.seat?.band ?? 0) > band && !w.trying)
      if (after < 0) line.waiters.push(me)
      else line.waiters.splice(after, 0, me)
      count(line, seat?.model, 1)
      const joined = line
      if (!(await waitFor(key, joined, me, signal))) return null
      let done = false
      return {
        pass(granted) {
          if (done) return
          done = true
          leave(key, joined, me, granted)
        },
        async again(at) {
          if (done) return false
          me.trying = false
          // Room that came while it tried: try again at once (the refusal may predate it).
          if (joined.roomAt < me.triedAt) joined.retryAt = Math.max(joined.retryAt, at)
          const ok = await waitFor(key, joined, me, signal)
          if (!ok) done = true
          return ok
        },
      }
    },
    crowded(model) {
      if (fairness === undefined) return undefined
      const line = byModel.get(model)?.keys().next().value
      return line === undefined ? undefined : [...line.deployments]
    },
    room(deploymentId) {
      for (const [key, line] of lines) {
        if (!line.deployments.has(deploymentId)) continue
        line.retryAt = 0
        line.roomAt = now()
        schedule(key, line)
      }
    },
    waiting() {
      let n = 0
      for (const line of lines.values()) n += line.waiters.length
      return n
    },
  }
}

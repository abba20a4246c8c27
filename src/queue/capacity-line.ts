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
// Fairness between keys and order within a key's line are the queue's: calls reach this
// line in the order the queue started them, and only the head of its key's line waits here
// (waiter.ts), so no call here waits on one behind it in its key's line. Between keys, a
// call's class orders it as in its key's line (priority/classes.ts bandOf): a priority call
// waits ahead of every default and flex call, a default one ahead of every flex one, first
// come first served within a class; a flex call that already holds its turn keeps trying.
//
// Two things make a wake-up that does not come impossible: room() that arrives while the
// head is trying is kept for its next again() (the head tries once more at once instead of
// waiting for a time that may be a lease's ten minutes away), and no wait is longer than
// RECHECK_MS (a message lost between gateways costs at most that).

/** The longest the head waits before it tries again, whatever time it was named. */
export const RECHECK_MS = 2000

export interface CapacityTurn {
  /**
   * The call is done waiting: given a deployment (`granted`: the next in line tries now),
   * or it gave up (the next in line waits for the time the line was named).
   */
  pass(granted: boolean): void
  /** Refused again until `retryAt`: waits at the head until then or until room(); false when the call's signal fired. */
  again(retryAt: number): Promise<boolean>
}

export interface CapacityLine {
  /** Joins the line of `deployments` (refused until `retryAt`) and waits for its turn; null when `signal` fired first. */
  enter(
    deployments: readonly string[],
    retryAt: number,
    signal: AbortSignal,
    band?: number,
  ): Promise<CapacityTurn | null>
  /** Room may have come back on a deployment: the head of each line waiting on it tries now. */
  room(deploymentId: string): void
  /** Calls waiting, over every line (for tests and metrics). */
  waiting(): number
}

interface Waiter {
  /** Its class's place (bandOf): lower waits ahead. */
  readonly band: number
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
}

export function createCapacityLine(now: () => number = Date.now): CapacityLine {
  const lines = new Map<string, Line>()

  function schedule(key: string, line: Line): void {
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
    if (granted) line.retryAt = 0
    schedule(key, line)
  }

  return {
    async enter(deployments, retryAt, signal, band = 0) {
      const key = deployments.join('\n')
      let line = lines.get(key)
      if (line === undefined) {
        line = { deployments: new Set(deployments), waiters: [], retryAt, roomAt: 0, timer: undefined }
        lines.set(key, line)
      } else if (line.waiters.length === 0) line.retryAt = retryAt
      const me: Waiter = { band, trying: false, triedAt: 0, go: null }
      // Behind every call of its class or a higher one, ahead of the lower classes.
      const after = line.waiters.findIndex((w) => w.band > band && !w.trying)
      if (after < 0) line.waiters.push(me)
      else line.waiters.splice(after, 0, me)
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

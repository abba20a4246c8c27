// The job runner of a single instance: scheduled requests wait in memory, in the order
// they became runnable (lower priority first), and up to `concurrency` run at once (a
// claimed worker counts as one running). A delay is one timer per request, never a poll.
// Nothing here outlives the process: at start the queue service schedules the head of
// every line again from the store.
import type { Held, JobRunner, Outcome, Processor, RequestRef } from './ports.ts'

interface Ready {
  readonly id: string
  readonly priority: number
  readonly order: number
}

export function createLocalRunner(
  options: { readonly onError?: (error: unknown, id: string) => void } = {},
): JobRunner {
  const ready: Ready[] = []
  /** Scheduled (ready, delayed or running), with their priority. */
  const scheduled = new Map<string, { readonly request: RequestRef; readonly priority: number }>()
  const timers = new Map<string, NodeJS.Timeout>()
  const running = new Map<string, { controller: AbortController; done: Promise<void> }>()
  let processor: Processor | null = null
  let concurrency = 0
  /** Workers claimed and not yet run or freed. */
  let claimed = 0
  let order = 0
  let closed = false

  function enqueue(id: string): void {
    const entry = { id, priority: scheduled.get(id)?.priority ?? 0, order: order++ }
    let i = ready.length
    while (i > 0 && (ready[i - 1]?.priority ?? 0) > entry.priority) i--
    ready.splice(i, 0, entry)
    pump()
  }

  function pump(): void {
    while (processor !== null && !closed && running.size + claimed < concurrency && ready.length > 0) {
      const next = ready.shift()
      const request = next === undefined ? undefined : scheduled.get(next.id)?.request
      if (next !== undefined && request !== undefined) run(request, processor)
    }
  }

  /** Runs a request: scheduled, or (`held`) on a claimed worker, whose 'later' goes to `handBack`. */
  function run(request: RequestRef, process: Processor, held?: Held, handBack?: (at: number) => Promise<void>): void {
    const { id } = request
    const controller = new AbortController()
    const done = process(request, controller.signal, held)
      .catch((error: unknown): Outcome => {
        options.onError?.(error, id)
        return { kind: 'later', at: Date.now() + 1000 }
      })
      .then(async (outcome) => {
        running.delete(id)
        if (outcome.kind === 'later' && handBack !== undefined) {
          // Through the coordinator, which schedules it here again and then ends its lease.
          scheduled.delete(id)
          await handBack(outcome.at).catch((error: unknown) => options.onError?.(error, id))
        } else if (outcome.kind === 'later' && !closed) later(id, outcome.at - Date.now())
        else scheduled.delete(id)
        pump()
      })
    running.set(id, { controller, done })
  }

  function later(id: string, delayMs: number): void {
    if (delayMs <= 0) return enqueue(id)
    const timer = setTimeout(() => {
      timers.delete(id)
      enqueue(id)
    }, delayMs)
    timers.set(id, timer)
  }

  return {
    async schedule(request, options = {}) {
      if (closed || scheduled.has(request.id)) return
      scheduled.set(request.id, { request, priority: options.priority ?? 0 })
      later(request.id, options.delayMs ?? 0)
    },

    async wake(id) {
      const timer = timers.get(id)
      if (timer === undefined) return
      clearTimeout(timer)
      timers.delete(id)
      enqueue(id)
    },

    claim() {
      if (closed || processor === null || running.size + claimed >= concurrency) return null
      claimed++
      let kept = true
      const giveBack = (): boolean => {
        if (!kept) return false
        kept = false
        claimed--
        return true
      }
      return {
        run(request, held, handBack) {
          // Closed meanwhile: it stays leased to this instance, and is run again by whoever
          // runs it after this one (at a restart, or when this instance's heartbeat is gone).
          if (!giveBack() || processor === null || closed) return
          // Scheduled while it runs: a schedule of it meanwhile (a sweep's nudge) is left out.
          scheduled.set(request.id, { request, priority: 0 })
          run(request, processor, held, handBack)
        },
        free() {
          if (giveBack()) pump()
        },
      }
    },

    start(process, n) {
      processor = process
      concurrency = n
      pump()
    },

    healthy: () => !closed,

    async close(graceMs = 0) {
      closed = true
      for (const timer of timers.values()) clearTimeout(timer)
      timers.clear()
      ready.length = 0
      const all = Promise.all([...running.values()].map((r) => r.done))
      let timer: NodeJS.Timeout | undefined
      const grace = new Promise<'late'>((done) => {
        timer = setTimeout(() => done('late'), graceMs)
      })
      if ((await Promise.race([all, grace])) === 'late') {
        for (const r of running.values()) r.controller.abort()
        await all
      }
      clearTimeout(timer)
    },
  }
}

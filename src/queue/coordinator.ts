// One gateway's part in the queue: it hands the turn on when someone leaves the head of a
// line (schedules a stored request, or wakes a call wherever it waits), lets a line's head
// try again early when capacity was given back, and keeps the lines healthy: a heartbeat
// so its own calls stay in line, and a periodic sweep that takes out calls of gateways
// that stopped and nudges every head, so a wake-up lost in a crash or an outage costs at
// most one sweep interval. It also keeps the leases (requests a gateway runs on its own
// worker, see bullmq-runner.ts): those of a gateway whose heartbeat ran out, and its own
// that it no longer runs, go to the shared queue.
import type { Logger } from '../observability/logger.ts'
import { createCapacityLine, type CapacityLine, type LineFairness } from './capacity-line.ts'
import type { JobRunner, QueueStore, RequestRef, Ticket } from './ports.ts'
import type { QueueSignals, SignalHandlers } from './signals.ts'
import { decodeTicket, encodeTicket } from './tickets.ts'

/** The heartbeat's longest interval; a short queue.recoverAfterMs makes it beat faster. */
const HEARTBEAT_MS = 5_000

export interface CoordinatorOptions {
  readonly store: QueueStore
  readonly runner: JobRunner
  readonly instance: string
  /** queue.tierPriority: lower first when workers are busy. */
  readonly tierPriority: Readonly<Record<string, number>>
  readonly log: Logger
  readonly signals: (handlers: SignalHandlers) => QueueSignals
  /**
   * queue.recoverAfterMs: a lease of a gateway that stopped goes back to the shared queue
   * within about this long (its heartbeat lasts up to half of it, and leases are checked
   * every half).
   */
  readonly recoverAfterMs?: number
  /** Told of each lease this gateway handed to the shared queue (a metric). */
  readonly onLeaseRecovered?: () => void
  /** Another instance learned a limit of a deployment (capacity's learnedElsewhere). */
  readonly onDeploymentLearned?: (deploymentId: string) => void
  /** Fair shares between the parties waiting in the capacity line (src/fairness/); absent: first come first served. */
  readonly fairness?: LineFairness
}

export class Coordinator {
  readonly instance: string
  /** Calls of this gateway waiting for a deployment with room (capacity-line.ts). */
  readonly capacityLine: CapacityLine
  readonly store: QueueStore
  readonly runner: JobRunner
  readonly #log: Logger
  readonly #signals: QueueSignals
  readonly #priorities: Readonly<Record<string, number>>
  readonly #unlisted: number | undefined
  readonly #turns = new Map<string, () => void>()
  readonly #running = new Map<string, AbortController>()
  /** Requests leased to this gateway that it runs (or is about to). */
  readonly #held = new Set<string>()
  readonly #recoverAfterMs: number
  readonly #onLeaseRecovered: () => void
  #timers: NodeJS.Timeout[] = []

  constructor(options: CoordinatorOptions) {
    this.instance = options.instance
    this.capacityLine = createCapacityLine(Date.now, options.fairness)
    this.store = options.store
    this.runner = options.runner
    this.#log = options.log
    this.#priorities = options.tierPriority
    this.#recoverAfterMs = options.recoverAfterMs ?? 30_000
    this.#onLeaseRecovered = options.onLeaseRecovered ?? (() => {})
    const listed = Object.values(options.tierPriority)
    this.#unlisted = listed.length === 0 ? undefined : Math.max(...listed) + 1
    this.#signals = options.signals({
      onWake: (message) => this.#turnCame(message),
      onCancel: (id) => this.#running.get(id)?.abort(),
      onRoom: (deploymentId) => this.capacityLine.room(deploymentId),
      onLearned: (deploymentId) => options.onDeploymentLearned?.(deploymentId),
    })
  }

  /** Messages from other gateways can arrive. */
  ready(timeoutMs: number): Promise<boolean> {
    return this.#signals.ready(timeoutMs)
  }

  /** The priority of a tier's requests among busy workers (undefined: no priorities configured). */
  priorityOf(tier: string): number | undefined {
    return this.#priorities[tier] ?? this.#unlisted
  }

  /** Makes a stored request runnable now or after `delayMs`. */
  async schedule(request: RequestRef, tier: string | undefined, delayMs = 0): Promise<void> {
    const priority = tier === undefined ? this.#unlisted : this.priorityOf(tier)
    await this.runner.schedule(request, { delayMs, ...(priority === undefined ? {} : { priority }) })
  }

  /** `next` is now the head of `line`: its turn has come. */
  async handOver(line: string, next: Ticket | null): Promise<void> {
    if (next === null) return
    try {
      if (next.kind === 'job') {
        // Priorities need the request's tier; without them its ticket is enough.
        const tier = this.#unlisted === undefined ? undefined : (await this.store.get(next.id))?.tier
        await this.schedule({ id: next.id, line, createdAt: next.joinedAt }, tier)
      } else if (next.instance === this.instance) {
        this.#turnCame(turnMessage(line, next))
      } else {
        await this.#signals.wake(next.instance, turnMessage(line, next))
      }
    } catch (error) {
      // The sweep hands it over later.
      this.#log.warn({ err: describe(error), ticket: next.id }, 'queue: could not hand the turn on')
    }
  }

  /** Capacity was given back on `line`: its head may fit before its retry-after. */
  async released(line: string): Promise<void> {
    try {
      const head = await this.store.head(line)
      if (head === null) return
      if (head.kind === 'job') await this.runner.wake(head.id)
      else await this.handOver(line, head)
    } catch (error) {
      this.#log.debug({ err: describe(error) }, 'queue: could not wake a head after a release')
    }
  }

  /** A call of this gateway is at the head of its line. */
  #turnCame(message: string): void {
    const [line = '', encoded = ''] = message.split('\n')
    const ticket = decodeTicket(encoded)
    if (ticket === null || ticket.kind !== 'call') return
    const wake = this.#turns.get(ticket.id)
    if (wake !== undefined) return wake()
    // No call here holds it any more (it could not leave while the store was away): an
    // orphan at the head would hold the line for ever.
    void this.store
      .leave(line, ticket)
      .then((next) => this.handOver(line, next))
      .catch((error: unknown) => {
        this.#log.debug({ err: describe(error) }, 'queue: could not take an orphaned call out of its line')
      })
  }

  /** Registers how to wake a call of this gateway when its turn comes. */
  onTurn(callId: string, wake: () => void): () => void {
    this.#turns.set(callId, wake)
    return () => {
      this.#turns.delete(callId)
    }
  }

  /** Registers a stored request this gateway runs, so that a cancel can abort it. */
  running(id: string, controller: AbortController): () => void {
    this.#running.set(id, controller)
    return () => {
      this.#running.delete(id)
    }
  }

  /** Aborts a stored request wherever it runs. */
  async cancelRunning(id: string): Promise<void> {
    this.#running.get(id)?.abort()
    await this.#signals.cancel(id)
  }

  /** This gateway is about to lease a request (QueueStore.submit) and run it. */
  hold(id: string): void {
    this.#held.add(id)
  }

  /** This gateway no longer runs a request it leased (it finished, or was never leased). */
  unhold(id: string): void {
    this.#held.delete(id)
  }

  /**
   * Puts a leased request on the shared queue (to run at `at`), and only then ends
   * `runner`'s lease on it. In the other order a schedule that fails after the lease
   * ended (Redis slow or away, or the queues of a gateway that is stopping already closed)
   * would leave a request neither leased nor scheduled, in progress and out of its line:
   * nothing would ever run it again (issue #25). Should the schedule fail, this throws and
   * the lease stays, for the lease check to try again. A job that finds the lease still
   * on looks again shortly (worker.ts); it is woken once the lease is over. Returns whether
   * this call ended the lease (not when another instance's check did first, or the
   * request finished meanwhile).
   */
  async handBack(request: RequestRef, runner: string, at: number, tier: string | undefined): Promise<boolean> {
    await this.schedule(request, tier, at - Date.now())
    if (!(await this.store.release(request, runner))) return false
    if (at <= Date.now()) await this.runner.wake(request.id).catch(() => undefined)
    return true
  }

  /**
   * A request this gateway held and ran must wait after all (the limiter, an upstream
   * retry, or this gateway stopping): to the shared queue, then its lease ends. Never
   * throws: what it could not hand back stays leased here, no longer held, and the lease
   * check hands it on (this gateway's own check, or another's once its heartbeat is gone).
   */
  async handBackHeld(request: RequestRef & { readonly tier: string }, at: number): Promise<void> {
    try {
      await this.handBack(request, this.instance, at, request.tier)
    } catch (error) {
      this.#log.warn(
        { queueId: request.id, err: describe(error) },
        'queue: a request run here could not be handed to the shared queue; the lease check will',
      )
    } finally {
      this.#held.delete(request.id)
    }
  }

  /**
   * Leases nobody runs go to the shared queue: those of gateways whose heartbeat ran out,
   * and this gateway's own that it no longer runs (its hand-back failed). Every instance
   * checks; each may schedule such a request (a second job for it is ignored), and the
   * store's release lets only one of them end the lease and count it.
   */
  async checkLeases(): Promise<void> {
    for (const lease of await this.store.leases()) {
      const { request, runner } = lease
      if (lease.alive && (runner !== this.instance || this.#held.has(request.id))) continue
      try {
        const tier = this.#unlisted === undefined ? undefined : (await this.store.get(request.id))?.tier
        if (!(await this.handBack(request, runner, Date.now(), tier))) continue
        this.#log.info({ queueId: request.id, runner }, 'queue: a leased request nobody runs goes to the shared queue')
        this.#onLeaseRecovered()
      } catch (error) {
        // Still leased: the next check tries again.
        this.#log.warn(
          { queueId: request.id, runner, err: describe(error) },
          'queue: a leased request nobody runs could not be handed to the shared queue yet',
        )
      }
    }
  }

  async sweep(intervalMs: number): Promise<void> {
    const heads = await this.store.sweep(intervalMs)
    for (const { line, head } of heads ?? []) await this.handOver(line, head)
  }

  start(sweepIntervalMs: number): void {
    // Three heartbeats missed: the gateway is gone.
    const aliveMs = Math.min(3 * HEARTBEAT_MS, Math.ceil(this.#recoverAfterMs / 2))
    const beat = (): void =>
      void this.store.heartbeat(this.instance, aliveMs).catch((error: unknown) => {
        this.#log.debug({ err: describe(error) }, 'queue: heartbeat failed')
      })
    const sweep = (): void =>
      void this.sweep(sweepIntervalMs).catch((error: unknown) => {
        this.#log.debug({ err: describe(error) }, 'queue: sweep failed')
      })
    const leases = (): void =>
      void this.checkLeases().catch((error: unknown) => {
        this.#log.debug({ err: describe(error) }, 'queue: lease check failed')
      })
    beat()
    sweep()
    leases()
    this.#timers = [
      setInterval(beat, Math.ceil(aliveMs / 3)),
      setInterval(sweep, sweepIntervalMs),
      setInterval(leases, Math.ceil(this.#recoverAfterMs / 2)),
    ]
    for (const timer of this.#timers) timer.unref()
  }

  async close(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer)
    this.#timers = []
    await this.#signals.close()
  }
}

/** Which call's turn it is: its line and its ticket. */
function turnMessage(line: string, ticket: Ticket): string {
  return `${line}\n${encodeTicket(ticket)}`
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
